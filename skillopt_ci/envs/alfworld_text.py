"""A small text world speaking ALFWorld's observation and action format, without ALFWorld.

It runs the games the ALFWorld fixture writes (a ``game.tw-pddl`` JSON holding a layout under
:data:`LAYOUT_KEY` instead of a PDDL problem), so the tests and the demo play episodes that look
like ALFWorld's when the ``alfworld`` package is not installed. It is not ALFWorld: no PDDL, no
planner, one room of numbered receptacles. A layout::

    {"receptacles": {"countertop 1": ["apple 1"], "fridge 1": [], "sinkbasin 1": [],
                     "desk 1": ["desklamp 1"]},
     "openable": ["fridge 1"],
     "goal": {"type": "pick_clean_then_place_in_recep", "object": "apple", "receptacle": "fridge"}}

Goal types are ALFWorld's six: ``pick_and_place_simple``, ``look_at_obj_in_light``,
``pick_clean_then_place_in_recep``, ``pick_heat_then_place_in_recep``,
``pick_cool_then_place_in_recep`` and ``pick_two_obj_and_place``. Actions are ALFWorld's
(``go to countertop 1``, ``open fridge 1``, ``take apple 1 from countertop 1``, ``move apple 1 to
fridge 1`` (alfworld 0.4's wording; earlier versions said ``put apple 1 in/on fridge 1``), ``clean apple 1 with sinkbasin 1``, ``heat … with microwave 1``, ``cool … with
fridge 1``, ``use desklamp 1``, ``examine …``, ``inventory``, ``look``, ``help``); anything else
gets ``Nothing happens.``. Pure and deterministic.
"""

from __future__ import annotations

import copy
from typing import Any

LAYOUT_KEY = "skillopt_text_world"
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING = "Nothing happens."
GOALS = {
    "pick_and_place_simple": ("put some {object} on {receptacle}.", ""),
    "look_at_obj_in_light": ("look at {object} under the desklamp.", ""),
    "pick_clean_then_place_in_recep": ("put a clean {object} in {receptacle}.", "clean"),
    "pick_heat_then_place_in_recep": ("put a hot {object} in {receptacle}.", "hot"),
    "pick_cool_then_place_in_recep": ("put a cool {object} in {receptacle}.", "cool"),
    "pick_two_obj_and_place": ("put two {object} in {receptacle}.", ""),
}
CHANGES = {"clean": ("sinkbasin", "clean"), "heat": ("microwave", "hot"), "cool": ("fridge", "cool")}


def kind(name: str) -> str:
    """``apple 1`` -> ``apple``."""
    return name.rsplit(" ", 1)[0]


def listing(names: list[str]) -> str:
    if not names:
        return "nothing"
    shown = [f"a {n}" for n in names]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + ", and " + shown[-1]


class AlfredTextWorld:
    """One episode of one layout: ``reset()``, then ``step(command) -> (observation, won)``.
    The constructor raises ``ValueError`` naming what is wrong with the layout."""

    def __init__(self, layout: dict[str, Any]):
        receptacles = layout.get("receptacles")
        goal = layout.get("goal")
        if not isinstance(receptacles, dict) or not receptacles:
            raise ValueError("the layout has no receptacles")
        if not isinstance(goal, dict) or goal.get("type") not in GOALS:
            raise ValueError(f"the layout's goal type must be one of {', '.join(GOALS)}")
        self.layout = copy.deepcopy(layout)
        self.goal = self.layout["goal"]
        self.objective = GOALS[self.goal["type"]][0].format(
            object=self.goal.get("object", ""), receptacle=self.goal.get("receptacle", ""))
        self.reset()

    def reset(self) -> str:
        self.contents: dict[str, list[str]] = {r: list(o) for r, o in self.layout["receptacles"].items()}
        self.openable = set(self.layout.get("openable", []))
        self.opened: set[str] = set()
        self.location: str | None = None
        self.holding: str | None = None
        self.states: dict[str, set[str]] = {}
        self.lamp_on = False
        self.won = False
        return f"{WELCOME}\n\n{self.look()}\n\nYour task is to: {self.objective}"

    def look(self) -> str:
        if self.location is None:
            return ("You are in the middle of a room. Looking quickly around you, you see "
                    f"{listing(list(self.contents))}.")
        return f"You are facing the {self.location}. Next to it, you see nothing."

    def describe(self, place: str) -> str:
        if place in self.openable:
            if place not in self.opened:
                return f"The {place} is closed."
            return f"The {place} is open. In it, you see {listing(self.contents[place])}."
        return f"On the {place}, you see {listing(self.contents[place])}."

    def step(self, command: str) -> tuple[str, bool]:
        words = " ".join(command.lower().strip().rstrip(".").split())
        observation = self._do(words)
        self.won = self.won or self._goal_met()
        return observation, self.won

    def _reachable(self) -> bool:
        here = self.location
        return here is not None and (here not in self.openable or here in self.opened)

    def _do(self, words: str) -> str:
        if words == "look":
            return self.look()
        if words == "inventory":
            return f"You are carrying: a {self.holding}." if self.holding else "You are not carrying anything."
        if words == "help":
            return ("Available commands: look, inventory, go to (receptacle), open (receptacle), close (receptacle), "
                    "take (object) from (receptacle), move (object) to (receptacle), examine (something), "
                    "use (object), heat/cool/clean (object) with (receptacle)")
        if words in self.admissible_commands():
            verb, _, rest = words.partition(" ")
            if verb in CHANGES:
                return self._change(verb, rest)
            return getattr(self, f"_{verb}")(rest)
        return NOTHING

    def _go(self, rest: str) -> str:
        self.location = rest.removeprefix("to ")
        return f"You arrive at {self.location}. {self.describe(self.location)}"

    def _open(self, place: str) -> str:
        self.opened.add(place)
        return f"You open the {place}. {self.describe(place)}"

    def _close(self, place: str) -> str:
        self.opened.discard(place)
        return f"You close the {place}."

    def _take(self, rest: str) -> str:
        thing, _, place = rest.partition(" from ")
        self.contents[place].remove(thing)
        self.holding = thing
        return f"You pick up the {thing} from the {place}."

    def _move(self, rest: str) -> str:
        thing, _, place = rest.partition(" to ")
        self.contents[place].append(thing)
        self.holding = None
        return f"You move the {thing} to the {place}."

    def _change(self, verb: str, rest: str) -> str:
        thing, _, place = rest.partition(" with ")
        self.states.setdefault(thing, set()).add(CHANGES[verb][1])
        return f"You {verb} the {thing} using the {place}."

    def _use(self, lamp: str) -> str:
        self.lamp_on = True
        return f"You turn on the {lamp}."

    def _examine(self, what: str) -> str:
        return self.describe(what) if what == self.location else f"There's nothing special about {what}."

    def admissible_commands(self) -> list[str]:
        """What ALFWorld would admit here, ``help`` included, sorted."""
        here = self.location
        found = [f"go to {r}" for r in self.contents if r != here] + ["inventory", "look", "help"]
        if here is not None:
            found.append(f"examine {here}")
            if here in self.openable:
                found.append(f"{'close' if here in self.opened else 'open'} {here}")
        if self._reachable() and here is not None:
            items = self.contents[here]
            if self.holding is None:
                found += [f"take {t} from {here}" for t in items if kind(t) != "desklamp"]
            else:
                found.append(f"move {self.holding} to {here}")
                for verb, (station, _) in CHANGES.items():
                    if kind(here) == station:
                        found.append(f"{verb} {self.holding} with {here}")
            found += [f"use {t}" for t in items if kind(t) == "desklamp"]
        if self.holding:
            found.append(f"examine {self.holding}")
        return sorted(set(found))

    def _goal_met(self) -> bool:
        goal = self.goal
        if goal["type"] == "look_at_obj_in_light":
            return bool(self.lamp_on and self.holding and kind(self.holding) == goal["object"])
        need = GOALS[goal["type"]][1]
        placed = [t for place, items in self.contents.items() if kind(place) == goal.get("receptacle")
                  for t in items if kind(t) == goal["object"] and (not need or need in self.states.get(t, set()))]
        return len(placed) >= (2 if goal["type"] == "pick_two_obj_and_place" else 1)
