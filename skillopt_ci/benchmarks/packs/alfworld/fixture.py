"""ALFWorld fixture: fake game folders in the upstream layout, and a simulated player.

:func:`write_fixture` writes, under ``dest``, one game folder per manifest id at the manifest's
own path (``json_2.1.1/<split>/<task>-<Object>-<Mrecep>-<Receptacle>-<scene>/trial_…/``): a
``game.tw-pddl`` holding ``solvable: true`` and a layout for the bundled ALFWorld-format world
(:mod:`skillopt_ci.envs.alfworld_text`) in place of a PDDL problem, and a ``traj_data.json``
with the ``task_type``. The layout follows the folder name: the object, the target receptacle,
the station the task type needs (sink basin, microwave, fridge, desk lamp), a few closed
cabinets and drawers, with the object placed by the scene number. It returns ``dest``, the
folder a user passes to ``bench import alfworld --from`` (their ``ALFWORLD_DATA``). Writing all
191 published games takes a fraction of a second, so the import works with the published
manifest.

:func:`policy` is a :class:`~skillopt_ci.sim.ScriptedModelServer` policy that plays from
the turn message alone (objective, current observation, admissible actions, the last steps): it
searches the receptacles in order, opening closed ones, takes the object, and puts it in place.
Like the text world's player it does not understand language; it follows one rule the skill
(under "## Skill Knowledge", or the system message) may state: a line saying to clean, heat or
cool the object before placing it (``Clean, heat or cool the object before you put it in
place.``). Without it, it places the object as it is, so the clean/heat/cool games are never won
(the episode runs out of steps) while the others are: a score strictly between 0 and 1. It
answers ``<think>…</think>`` then ``<action>…</action>``. Pure and deterministic.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from skillopt_ci.benchmarks.manifest import Manifest, load_manifest
from skillopt_ci.envs.alfworld_text import LAYOUT_KEY
from skillopt_ci.sim.protocols import ScriptedRequest

RULE_RE = re.compile(r"^.*\b(clean|heat|cool)\b.*\bbefore\b.*$", re.I | re.M)
STATIONS = {"pick_clean_then_place_in_recep": ("clean", "sinkbasin"),
            "pick_heat_then_place_in_recep": ("heat", "microwave"),
            "pick_cool_then_place_in_recep": ("cool", "fridge")}
OPENABLE = {"cabinet", "drawer", "fridge", "microwave", "safe", "box"}
SKILL_RULE = "Clean, heat or cool the object before you put it in place."


def write_fixture(dest: Path, manifest: Manifest | None = None) -> Path:
    """One fake game per id of ``manifest`` (the published one when ``None``) under ``dest``."""
    manifest = manifest if manifest is not None else load_manifest("alfworld")
    for items in manifest.splits.values():
        for item in items:
            gamefile = str(item.fields["gamefile"])
            folder = (dest / gamefile).parent
            folder.mkdir(parents=True, exist_ok=True)
            layout = layout_for(folder.parent.name, str(item.fields.get("task_type", "")))
            game = {"solvable": True, "walkthrough": [], LAYOUT_KEY: layout}
            (dest / gamefile).write_text(json.dumps(game, indent=1) + "\n", encoding="utf-8")
            traj = {"task_type": layout["goal"]["type"], "task_id": folder.name}
            (folder / "traj_data.json").write_text(json.dumps(traj) + "\n", encoding="utf-8")
    return dest


def layout_for(task_folder: str, task_type: str) -> dict[str, Any]:
    """The bundled-world layout of a game named like ALFWorld's task folders."""
    parts = task_folder.split("-")
    kind = task_type or parts[0]
    thing, target = parts[1].lower(), parts[3].lower()
    scene = int(parts[-1]) if parts[-1].isdigit() else 0
    places = ["countertop 1", "cabinet 1", "drawer 1", "shelf 1", "cabinet 2"]
    if kind == "look_at_obj_in_light":
        places.append("sidetable 1")
    else:
        places.append(f"{target} 1")
    if kind in STATIONS:
        places.append(f"{STATIONS[kind][1]} 1")
    places = list(dict.fromkeys(places))
    receptacles: dict[str, list[str]] = {p: [] for p in places}
    spots = [p for p in places if p.split(" ")[0] not in (target, "sinkbasin", "microwave", "fridge")]
    receptacles[spots[scene % len(spots)]].append(f"{thing} 1")
    if kind == "pick_two_obj_and_place":
        receptacles[spots[(scene + 2) % len(spots)]].append(f"{thing} 2")
    if kind == "look_at_obj_in_light":
        receptacles["sidetable 1"].append("desklamp 1")
    openable = [p for p in places if p.split(" ")[0] in OPENABLE]
    return {"receptacles": receptacles, "openable": openable,
            "goal": {"type": kind, "object": thing, "receptacle": target}}


# -- the simulated player --------------------------------------------------------------------------


def _section(text: str, head: str) -> str:
    found = re.search(rf"^{re.escape(head)}\s*(.*?)(?:\n\s*\n|\Z)", text, re.S | re.M)
    return found.group(1).strip() if found else ""


def _kind(name: str) -> str:
    return name.rsplit(" ", 1)[0]


def choose(user: str, skill: str) -> str:
    """The player's next action for one turn message."""
    found = re.search(r"^Your task is to: (.*)$", user, re.M)
    objective = found.group(1) if found else ""
    observation = _section(user, "Current observation:")
    admissible = [a.strip() for a in _section(user, "Admissible actions now:").splitlines() if a.strip()]
    recent = "\n".join(re.findall(r"^Observation \d+: (.*)$", user, re.M) + [observation])
    goal = re.search(r"(?:look at |put (?:a |an |some |two )?(?:clean |hot |cool )?)(\w+)"
                     r"(?: (?:in|on) (\w+)| under)", objective)
    if not goal:
        return "look"
    thing, target = goal.group(1), goal.group(2) or ""
    held = next((a.split(" ")[1:3] for a in admissible if a.startswith("move ")), None)
    holding = " ".join(held) if held else None
    if "look at" in objective:
        if holding:
            use = next((a for a in admissible if a.startswith("use desklamp")), None)
            return use or _search(admissible, observation, holding)
        return _take(admissible, thing, None) or _search(admissible, observation, holding)
    if holding is None:
        return _take(admissible, thing, target) or _search(admissible, observation, holding)
    change = next((v for v in ("clean", "heat", "cool") if f" {_adjective(v)} {thing}" in objective), None)
    if change and RULE_RE.search(skill) and f"You {change} the {holding}" not in recent:
        station = dict(STATIONS.values())[change]
        verb = next((a for a in admissible if a.startswith(f"{change} {holding} with")), None)
        opening = next((a for a in admissible if a.startswith(f"open {station}")), None)
        going = next((a for a in admissible if a.startswith(f"go to {station}")), None)
        return verb or opening or going or "look"
    place = next((a for a in admissible if a.startswith(f"move {holding} to {target} ")), None)
    opening = next((a for a in admissible if a.startswith(f"open {target} ")), None)
    going = next((a for a in admissible if a.startswith(f"go to {target} ")), None)
    return place or opening or going or "look"


def _adjective(verb: str) -> str:
    return {"clean": "clean", "heat": "hot", "cool": "cool"}[verb]


def _take(admissible: list[str], thing: str, target: str | None) -> str | None:
    """Take the object from anywhere but the target receptacle (what is there is already placed)."""
    for action in admissible:
        found = re.match(rf"take ({thing} \d+) from (.+)$", action)
        if found and (target is None or _kind(found.group(2)) != target):
            return action
    return None


def _search(admissible: list[str], observation: str, holding: str | None) -> str:
    """Open the receptacle here if it is closed, else go to the next one in order (cyclically).
    Where the player is: the receptacle it may examine that is neither a "go to" target nor held."""
    opening = next((a for a in admissible if a.startswith("open ")), None)
    if opening and "is closed" in observation:
        return opening
    targets = [a[len("go to "):] for a in admissible if a.startswith("go to ")]
    examined = [a[len("examine "):] for a in admissible if a.startswith("examine ")]
    here = next((x for x in examined if x not in targets and x != holding), None)
    places = sorted(set(targets) | ({here} if here else set()))
    if not places:
        return "look"
    following = places[(places.index(here) + 1) % len(places)] if here in places else places[0]
    return f"go to {following}"


def reply(user: str, skill: str) -> str:
    action = choose(user, skill)
    return f"<think>The next useful step is: {action}.</think>\n<action>{action}</action>"


def policy(request: ScriptedRequest) -> str:
    """The scripted server policy (``skillopt_ci.benchmarks.packs.alfworld.fixture:policy``)."""
    user = request.last_user
    skill = user.partition("## Skill Knowledge")[2] or request.system
    return reply(user, skill)
