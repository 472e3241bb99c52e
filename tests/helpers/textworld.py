"""A small deterministic text world, and a simulated player for it.

:class:`TextWorld` is an environment class for the ``interactive`` environment
(``world: helpers.textworld:TextWorld``): a few rooms joined by exits, objects lying
in them, and one goal per task. The layout comes from the task record::

    {"id": "key-box", "input": "Put the key in the box.",
     "world": {"start": "hall",
               "rooms": {"hall": {"exits": {"north": "study"}, "items": ["key"]},
                         "study": {"exits": {"south": "hall"}, "items": ["box"]}},
               "objects": {"box": {"container": true, "closed": true}},
               "goal": {"put": ["key", "box"]}}}

Objects not listed under ``objects`` are plain portable things. Object properties: ``container``
(holds things; not portable), ``closed`` (a closed container), ``fixed`` (cannot be taken),
``lightable`` (a lamp), ``fire`` (lights a lightable thing when carried: matches). Goals:
``{"put": [thing, container]}`` or ``{"light": thing}``. Reaching the goal gives reward 1.0 and
ends the episode. Commands: ``look``, ``inventory``, ``go <direction>`` (or the direction alone),
``take``, ``drop``, ``open``, ``close``, ``put <thing> in <container>``, ``light <thing>``;
articles are ignored. A command the world does not know gets ``Nothing happens.``; one it knows
but cannot carry out says why (``The box is closed.``). Every observation ends with a view of the
room: ``You are in the hall. You see: a box (closed), a key. Exits: north. You carry: nothing.``

:func:`play` is a :class:`~skillopt_ci.sim.ScriptedModelServer` policy that plays the world
from the last user message (its goal, its ``> action`` history lines and the room view of the
current observation). Like the triage simulation it does not understand language: it follows
the rules the skill (the system prompt) states, and nothing else. Rules it understands:

- a line saying to open containers before putting things in them (``Open containers before
  putting things in them.``): without it, it puts things into closed boxes, again and again;
- a line saying lighting needs matches (``To light a lamp, carry matches: take them first.``):
  without it, it tries to light things with nothing, again and again.

It answers in the format the user message asks for (``inside <tag></tag>`` or the last line).
Both classes are pure and deterministic: the same request gives the same reply.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.sim.protocols import ScriptedRequest

DIRECTIONS = {"n": "north", "s": "south", "e": "east", "w": "west", "u": "up", "d": "down"}
REVERSE = {"north": "south", "south": "north", "east": "west", "west": "east", "up": "down", "down": "up"}
ARTICLES = {"the", "a", "an", "some"}
NOTHING = "Nothing happens."


@dataclass
class _Thing:
    name: str
    container: bool = False
    closed: bool = False
    fixed: bool = False
    lightable: bool = False
    lit: bool = False
    fire: bool = False
    contents: list[str] = field(default_factory=list)

    def shown(self) -> str:
        notes = []
        if self.container:
            notes.append("closed" if self.closed else "open")
            if not self.closed and self.contents:
                notes.append("holding: " + ", ".join(self.contents))
        if self.lightable:
            notes.append("lit" if self.lit else "unlit")
        plural = self.name.endswith("s") and not self.name.endswith("ss")
        article = "some" if plural else "an" if self.name[:1] in "aeiou" else "a"
        return f"{article} {self.name}" + (f" ({'; '.join(notes)})" if notes else "")


class TextWorld:
    """One episode at a time: ``reset(task)`` then ``step(action)`` until ``done``.

    ``reset`` raises ``ValueError`` naming the problem when the task's ``world`` is malformed."""

    def __init__(self, show_inventory: bool = True):
        self.show_inventory = show_inventory
        self.done = False

    def reset(self, task: dict[str, Any]) -> str:
        layout = task.get("world")
        if not isinstance(layout, dict):
            raise ValueError("the task has no 'world' mapping")
        layout = copy.deepcopy(layout)
        rooms = layout.get("rooms")
        if not isinstance(rooms, dict) or not rooms:
            raise ValueError("world.rooms must be a non-empty mapping")
        self.exits = {room: dict((spec or {}).get("exits", {})) for room, spec in rooms.items()}
        self.items = {room: list((spec or {}).get("items", [])) for room, spec in rooms.items()}
        for room, exits in self.exits.items():
            for direction, target in exits.items():
                if target not in rooms:
                    raise ValueError(f"world: exit {direction} of room {room!r} leads to unknown room {target!r}")
        self.things = {name: _Thing(name) for items in self.items.values() for name in items}
        for name, props in (layout.get("objects") or {}).items():
            try:
                self.things[name] = _Thing(name, **props)
            except TypeError:
                raise ValueError(f"world.objects.{name}: unknown property in {sorted(props)}") from None
        inside = [c for thing in self.things.values() for c in thing.contents]
        self.things.update({c: self.things.get(c) or _Thing(c) for c in inside})
        self.room = layout.get("start") or next(iter(rooms))
        if self.room not in rooms:
            raise ValueError(f"world.start {self.room!r} is not a room")
        self.goal = layout.get("goal") or {}
        put, light = self.goal.get("put"), self.goal.get("light")
        if not ((isinstance(put, list) and len(put) == 2) or isinstance(light, str)):
            raise ValueError("world.goal must be {'put': [thing, container]} or {'light': thing}")
        self.carried: list[str] = []
        self.done = False
        return self.view()

    def step(self, action: str) -> tuple[str, float, bool]:
        if self.done:
            return "The episode is over.\n" + self.view(), 0.0, True
        words = ["in" if w == "into" else w for w in re.findall(r"[a-z]+", action.lower()) if w not in ARTICLES]
        result = self._do(words)
        reward = 0.0
        if self._goal_met():
            self.done, reward = True, 1.0
            result += " You have reached the goal."
        return f"{result}\n{self.view()}", reward, self.done

    def close(self) -> None:
        self.done = True

    # -- the world's rules ------------------------------------------------------------------

    def view(self) -> str:
        here = ", ".join(self.things[n].shown() for n in self.items[self.room]) or "nothing"
        exits = ", ".join(self.exits[self.room]) or "none"
        text = f"You are in the {self.room}. You see: {here}. Exits: {exits}."
        if self.show_inventory:
            text += f" You carry: {', '.join(self.carried) or 'nothing'}."
        return text

    def _visible(self) -> list[str]:
        seen = list(self.items[self.room]) + list(self.carried)
        for name in list(seen):
            thing = self.things[name]
            if thing.container and not thing.closed:
                seen.extend(thing.contents)
        return seen

    def _do(self, words: list[str]) -> str:
        if not words:
            return NOTHING
        verb, rest = words[0], words[1:]
        if verb in ("look", "l") and not rest:
            return "You look around."
        if verb in ("inventory", "i") and not rest:
            return f"You carry: {', '.join(self.carried) or 'nothing'}."
        if verb in DIRECTIONS or verb in REVERSE:
            verb, rest = "go", [verb]
        if verb == "go" and len(rest) == 1:
            return self._go(DIRECTIONS.get(rest[0], rest[0]))
        if verb == "put" and "in" in rest[1:-1]:
            cut = rest.index("in", 1)
            return self._put(" ".join(rest[:cut]), " ".join(rest[cut + 1:]))
        handlers = {"take": self._take, "get": self._take, "drop": self._drop, "open": self._open,
                    "close": self._close, "light": self._light}
        if verb in handlers and rest:
            return handlers[verb](" ".join(rest))
        return NOTHING

    def _go(self, direction: str) -> str:
        if direction not in self.exits[self.room]:
            return "You cannot go that way."
        self.room = self.exits[self.room][direction]
        return f"You go {direction}."

    def _take(self, name: str) -> str:
        if name in self.carried:
            return f"You already carry the {name}."
        if name not in self._visible():
            return f"You see no {name} here."
        thing = self.things[name]
        if thing.fixed or thing.container:
            return f"The {name} is too heavy to carry."
        self._remove(name)
        self.carried.append(name)
        return f"You take the {name}."

    def _drop(self, name: str) -> str:
        if name not in self.carried:
            return f"You are not carrying the {name}."
        self.carried.remove(name)
        self.items[self.room].append(name)
        return f"You drop the {name}."

    def _open(self, name: str, closing: bool = False) -> str:
        if name not in self._visible():
            return f"You see no {name} here."
        thing = self.things[name]
        if not thing.container:
            return f"The {name} cannot be {'closed' if closing else 'opened'}."
        if thing.closed == closing:
            return f"The {name} is already {'closed' if closing else 'open'}."
        thing.closed = closing
        return f"You {'close' if closing else 'open'} the {name}."

    def _close(self, name: str) -> str:
        return self._open(name, closing=True)

    def _put(self, name: str, target: str) -> str:
        if name not in self.carried:
            return f"You are not carrying the {name}."
        if target not in self._visible():
            return f"You see no {target} here."
        box = self.things[target]
        if not box.container:
            return f"You cannot put things in the {target}."
        if box.closed:
            return f"The {target} is closed."
        self.carried.remove(name)
        box.contents.append(name)
        return f"You put the {name} in the {target}."

    def _light(self, name: str) -> str:
        if name not in self._visible():
            return f"You see no {name} here."
        thing = self.things[name]
        if not thing.lightable:
            return f"The {name} cannot be lit."
        if thing.lit:
            return f"The {name} is already lit."
        if not any(self.things[c].fire for c in self.carried):
            return f"You have nothing to light the {name} with."
        thing.lit = True
        return f"The {name} is now lit."

    def _remove(self, name: str) -> None:
        for items in self.items.values():
            if name in items:
                items.remove(name)
                return
        for thing in self.things.values():
            if name in thing.contents:
                thing.contents.remove(name)
                return

    def _goal_met(self) -> bool:
        if "put" in self.goal:
            name, target = self.goal["put"]
            return target in self.things and name in self.things[target].contents
        target = self.things.get(self.goal["light"])
        return bool(target and target.lit)


# -- the simulated player ---------------------------------------------------------------------

OPEN_RULE = re.compile(r"open (the )?containers? before (you )?(put|putting|place|placing)", re.I)
MATCHES_RULE = re.compile(r"\blight.*\bmatches\b|\bmatches\b.*\blight", re.I)
VIEW_RE = re.compile(r"You are in the (?P<room>[\w ]+?)\. You see: (?P<seen>.*?)\. Exits: (?P<exits>.*?)\."
                     r"(?: You carry: (?P<carry>.*?)\.)?$", re.M)
GOAL_PUT_RE = re.compile(r"\bput (?:the )?(\w+) (?:in|into) (?:the )?(\w+)", re.I)
GOAL_LIGHT_RE = re.compile(r"\blight (?:the )?(\w+)", re.I)
TAG_RE = re.compile(r"inside <(\w+)>")
PAST_RE = re.compile(r"^(?:> |Last action: )(.+)$", re.M)


@dataclass(frozen=True)
class _View:
    room: str
    things: dict[str, str]  # name -> state notes ("closed", "open; holding: key", "")
    exits: tuple[str, ...]
    carry: tuple[str, ...]


def _parse_view(text: str) -> _View | None:
    found = list(VIEW_RE.finditer(text))
    if not found:
        return None
    m = found[-1]
    things: dict[str, str] = {}
    for item in re.findall(r"\b(?:an?|some) (\w+)(?: \(([^)]*)\))?", m.group("seen")):
        things[item[0]] = item[1]
        for inner in re.findall(r"holding: ([\w, ]+)", item[1]):
            things.update({n.strip(): "" for n in inner.split(",")})
    carry = tuple(c.strip() for c in (m.group("carry") or "").split(",") if c.strip() not in ("", "nothing"))
    exits = tuple(e.strip() for e in m.group("exits").split(",") if e.strip() not in ("", "none"))
    return _View(m.group("room"), things, exits, carry)


def choose_action(skill: str, user: str) -> str:
    """The player's next command for the user message ``user`` under the rules of ``skill``."""
    view = _parse_view(user)
    if view is None:
        return "look"
    past = PAST_RE.findall(user)
    goal = next((line for line in user.splitlines() if line.startswith("Goal:")), user)
    if m := GOAL_PUT_RE.search(goal):
        thing, box = m.group(1).lower(), m.group(2).lower()
        if thing in view.carry:
            if box in view.things:
                if "closed" in view.things[box] and OPEN_RULE.search(skill):
                    return f"open {box}"
                return f"put {thing} in {box}"
        elif thing in view.things:
            return f"take {thing}"
    elif m := GOAL_LIGHT_RE.search(goal):
        lamp = m.group(1).lower()
        knows = MATCHES_RULE.search(skill) is not None
        if knows and "matches" not in view.carry and "matches" in view.things:
            return "take matches"
        if (lamp in view.things or lamp in view.carry) and (not knows or "matches" in view.carry):
            return f"light {lamp}"
    return _explore(view, past)


def _explore(view: _View, past: list[str]) -> str:
    """Go through the exit used least in the history shown, never straight back unless it is the
    only way: enough to cover the small tree-shaped maps of the test suites."""
    if not view.exits:
        return "look"
    moves = [p.removeprefix("go ").strip() for p in past if p.startswith("go ")]
    back = REVERSE.get(moves[-1]) if moves else None
    options = [e for e in view.exits if e != back] or list(view.exits)
    return "go " + min(options, key=lambda e: (moves.count(e), view.exits.index(e)))


def reply(system: str, user: str) -> str:
    """The player's answer to a turn: a short thought and the next command, in the format the
    user message asks for (``inside <tag></tag>``, else the command alone on the last line)."""
    action = choose_action(system, user)
    tag = TAG_RE.search(user)
    thought = f"I will {action}."
    return f"{thought}\n<{tag.group(1)}>{action}</{tag.group(1)}>" if tag else f"{thought}\n{action}"


def play(request: ScriptedRequest) -> str:
    """The scripted server policy (``--policy helpers.textworld:play``)."""
    return reply(request.system, request.last_user)
