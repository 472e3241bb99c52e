"""``train.acceptance``: the names of training's acceptance rules, and how the flags they replace
are read.

Training decides whether a candidate replaces the incumbent by one named rule
(:mod:`skillopt_ci.train.acceptance` holds the rules themselves). Before the names, four booleans
(``screen_edits_alone``, ``noninferior_after_screening``, ``sequential``, ``honest_incumbent``)
chose among the same tests in 16 combinations, most of them never measured and several dominated
on the training-quality bench. A config that still sets them is read once, here: the flags map to
the rule they amount to, each flag set gets a deprecation warning naming the rule to write
instead, and a combination that no rule keeps runs as the nearest one that dominated it, with a
warning that says so. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NAMES = ("screened", "sequential", "honest", "honest-sequential", "mean")
DEFAULT = "screened"
LEGACY_FLAGS = ("screen_edits_alone", "noninferior_after_screening", "sequential", "honest_incumbent")
# What each flag defaulted to before the names: a config that set some of them meant the others' defaults.
LEGACY_DEFAULTS = {"screen_edits_alone": True, "noninferior_after_screening": True, "sequential": True,
                   "honest_incumbent": False}


def rule_of_flags(alone: bool, noninferior: bool, sequential: bool, honest: bool) -> tuple[str, bool]:
    """The rule the four flags amount to, and whether the combination was retired (it runs as that
    rule, which dominated it on the bench: as good a test score with far fewer useless edits
    accepted)."""
    if honest:
        return ("honest-sequential" if sequential else "honest"), alone
    if sequential:
        if not alone:
            return "sequential", False
        return "screened", not noninferior
    if not alone:
        return "mean", False
    return "screened", True


def read_legacy(train: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``train`` with the deprecated flags replaced by ``acceptance``, and the warnings to give,
    each as (the key it is about, the message)."""
    given = [k for k in LEGACY_FLAGS if k in train]
    if not given:
        return dict(train), []
    out = {k: v for k, v in train.items() if k not in LEGACY_FLAGS}
    if "acceptance" in train:
        return out, [(k, f"deprecated and ignored: train.acceptance ({train['acceptance']}) is set; remove {k}")
                     for k in given]
    flags = {k: bool(train.get(k, LEGACY_DEFAULTS[k])) for k in LEGACY_FLAGS}
    name, retired = rule_of_flags(flags["screen_edits_alone"], flags["noninferior_after_screening"],
                                  flags["sequential"], flags["honest_incumbent"])
    out["acceptance"] = name
    notes = [(k, f"deprecated: write `acceptance: {name}` instead (what the flags set here amount to)")
             for k in given]
    if retired:
        combo = ", ".join(f"{k}: {str(v).lower()}" for k, v in flags.items())
        notes.append((given[0], f"the combination {combo} is retired (dominated on the training-quality bench, "
                                f"docs/decisions.md); it runs as `acceptance: {name}`"))
    return out, notes
