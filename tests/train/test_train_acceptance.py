"""``train.acceptance`` names the rule that accepts a candidate; the four flags it replaced are
read once, with a deprecation warning, and their dominated combinations run as the rule that
dominated them. End to end through the real CLI against the simulated models."""

from __future__ import annotations

import itertools
import json

import pytest
import yaml

from helpers.cli import run_cli
from helpers.training import train, train_project
from skillopt_ci.inputs.acceptance import DEFAULT, LEGACY_FLAGS, NAMES, read_legacy, rule_of_flags
from skillopt_ci.inputs.yamlfile import load_schema
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SimulatedModels
from skillopt_ci.train.acceptance import RULES, PairedRule, ScreenedRule, rule_named
from skillopt_ci.train.state import TrainState


def test_the_names_the_schema_accepts_are_the_registered_rules():
    schema = load_schema("config.schema.json")
    enum = schema["properties"]["train"]["properties"]["acceptance"]["enum"]
    assert tuple(enum) == NAMES == tuple(RULES)
    assert DEFAULT == "screened" and isinstance(rule_named(DEFAULT), ScreenedRule)
    assert all(RULES[name].name == name for name in NAMES)


def test_unknown_rule_names_the_known_ones():
    with pytest.raises(Exception, match="unknown train.acceptance 'strict'; known: screened, sequential"):
        rule_named("strict")


@pytest.mark.parametrize(("flags", "name", "retired"), [
    # the flags' old defaults: each edit screened alone, confirmed candidates non-inferior, else sequential
    ({}, "screened", False),
    ({"sequential": False, "screen_edits_alone": False, "noninferior_after_screening": False}, "mean", False),
    ({"screen_edits_alone": False}, "sequential", False),
    ({"honest_incumbent": True, "screen_edits_alone": False, "sequential": False}, "honest", False),
    ({"honest_incumbent": True, "screen_edits_alone": False}, "honest-sequential", False),
    # retired: screening alone under the one-pass mean gate, or without non-inferiority
    ({"sequential": False}, "screened", True),
    ({"noninferior_after_screening": False}, "screened", True),
    ({"honest_incumbent": True}, "honest-sequential", True),
])
def test_old_flags_map_to_the_rule_they_amount_to(flags, name, retired):
    out, notes = read_legacy({"epochs": 3, **flags})
    if not flags:
        assert out == {"epochs": 3} and notes == []
        return
    assert out == {"epochs": 3, "acceptance": name}
    assert [k for k, _ in notes[: len(flags)]] == [k for k in LEGACY_FLAGS if k in flags]
    assert all(f"write `acceptance: {name}`" in m for _, m in notes[: len(flags)])
    assert any("is retired" in m for _, m in notes) is retired


def test_every_combination_of_the_old_flags_has_a_rule():
    seen = {rule_of_flags(*combo)[0] for combo in itertools.product((False, True), repeat=4)}
    assert seen == set(NAMES)


def test_a_flag_beside_acceptance_is_ignored_with_a_warning():
    out, notes = read_legacy({"acceptance": "mean", "sequential": True})
    assert out == {"acceptance": "mean"}
    assert notes == [("sequential", "deprecated and ignored: train.acceptance (mean) is set; remove sequential")]


def test_the_paired_rules_say_how_they_sample():
    assert RULES["honest"] == PairedRule("honest", sequential=False, honest=True)
    assert RULES["honest-sequential"].honest and not RULES["sequential"].honest
    assert [n for n in NAMES if RULES[n].screens_edits_alone] == ["screened"]


def decisions(run) -> list[tuple[str, str, str]]:
    return [(r.step, r.decision.value, r.reason) for r in TrainState.load(run).history]


def test_a_config_with_the_old_flags_trains_exactly_as_the_rule_they_name(tmp_path):
    legacy = {"sequential": False, "screen_edits_alone": False, "noninferior_after_screening": False}
    with ScriptedModelServer(SimulatedModels()) as sim:
        old = train_project(tmp_path / "old", sim.openai_base_url, train={"epochs": 1, **legacy}, cache={"mode": "off"})
        new = train_project(tmp_path / "new", sim.openai_base_url, train={"epochs": 1, "acceptance": "mean"},
                            cache={"mode": "off"})
        ran_old, ran_new = train(old, tmp_path / "run-old"), train(new, tmp_path / "run-new")
    assert ran_old.code == ran_new.code == 0, ran_old.err + ran_new.err
    assert decisions(tmp_path / "run-old") == decisions(tmp_path / "run-new")
    assert len(decisions(tmp_path / "run-new")) >= 2
    # One warning per flag, at its line, naming the rule to write; none for the new spelling.
    lines = [line for line in ran_old.err.splitlines() if line.startswith("warning: ")]
    config_text = (old / "skillopt.yml").read_text().splitlines()
    for flag in legacy:
        line_no = next(i for i, text in enumerate(config_text, 1) if text.strip().startswith(f"{flag}:"))
        assert f"warning: skillopt.yml:{line_no}: train.{flag}: deprecated: write `acceptance: mean` instead " \
               "(what the flags set here amount to)" in lines
    assert not [line for line in ran_new.err.splitlines() if line.startswith("warning: ")]
    manifest = json.loads((tmp_path / "run-old" / "config.json").read_text())
    assert manifest["policy"]["acceptance"] == "mean" and "sequential" not in manifest["policy"]


def test_validate_lists_the_deprecation_and_passes(tmp_path):
    project = train_project(tmp_path / "p", "http://127.0.0.1:9/v1", train={"honest_incumbent": True})
    res = run_cli("validate", cwd=project)
    assert res.code == 0, res.out + res.err
    text = res.out + res.err
    assert "train.honest_incumbent: deprecated: write `acceptance: honest-sequential`" in text
    assert "is retired" in text  # screening edits alone had no rule with an honest incumbent
    strict = run_cli("validate", "--strict", cwd=project)
    assert strict.code == 2


def test_an_unknown_rule_is_bad_input(tmp_path):
    project = train_project(tmp_path / "p", "http://127.0.0.1:9/v1", train={"acceptance": "strict"})
    res = run_cli("validate", cwd=project)
    assert res.code == 2 and "acceptance" in res.out + res.err
    data = yaml.safe_load((project / "skillopt.yml").read_text())
    assert data["train"]["acceptance"] == "strict"  # nothing rewritten
