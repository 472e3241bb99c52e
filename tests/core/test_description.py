"""Description edits: one value of the front matter changes, the name, the other keys and the
body stay byte for byte, within the Agent Skills limit; body and description runs keep to their part."""

from __future__ import annotations

import pytest

from skillopt_ci.core.description import LIMIT, description_of, with_description
from skillopt_ci.core.edits import Edit, EditCaps, apply_edits
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import parse_skill

SKILL = ("---\nname: release-notes\ndescription: Helps with project documents.\nlicense: MIT  # kept\n---\n"
         "# Release notes\n\nWrite the notes of one version.\n")
ONLY_DESCRIPTION = EditCaps(parts=("description",))


def edit(op: str, text: str = "", anchor: str = "", part: str = "description") -> Edit:
    return Edit(op, text=text, anchor=anchor, rationale="r", part=part)


def test_an_append_adds_a_sentence_and_keeps_every_other_byte():
    out, (outcome,) = apply_edits(SKILL, [edit("append", "Use when the request asks for a changelog.")], ONLY_DESCRIPTION)
    assert outcome.status == "applied", outcome.detail
    assert description_of(out) == "Helps with project documents. Use when the request asks for a changelog."
    assert out == SKILL.replace("documents.\n", "documents. Use when the request asks for a changelog.\n")
    parsed = parse_skill(out)
    assert parsed.name == "release-notes" and parsed.body == parse_skill(SKILL).body


@pytest.mark.parametrize(("op", "anchor", "text", "expected"), [
    ("replace", "Helps with project documents.", "Writes release notes.", "Writes release notes."),
    ("insert_after", "Helps with", "release notes and", "Helps with release notes and project documents."),
    ("delete", " project", "", "Helps with documents."),
])
def test_anchored_edits_change_the_description_only(op, anchor, text, expected):
    out, (outcome,) = apply_edits(SKILL, [edit(op, text, anchor)], ONLY_DESCRIPTION)
    assert outcome.status == "applied", outcome.detail
    assert description_of(out) == expected and out.endswith("license: MIT  # kept\n---\n# Release notes\n\nWrite "
                                                             "the notes of one version.\n")


def test_the_name_and_the_body_cannot_be_reached_from_the_description():
    for anchor in ("release-notes", "Write the notes"):  # the name's text and the body's are not the description
        out, (outcome,) = apply_edits(SKILL, [edit("replace", "x", anchor)], ONLY_DESCRIPTION)
        assert (outcome.status, out) == ("anchor_not_found", SKILL)
    out, (outcome,) = apply_edits(SKILL, [edit("append", "a rule", part="body")], ONLY_DESCRIPTION)
    assert outcome.status == "protected" and "edits only the description" in outcome.detail and out == SKILL
    out, (outcome,) = apply_edits(SKILL, [edit("append", "Use it.")])  # a body run leaves the description alone
    assert outcome.status == "protected" and out == SKILL


def test_the_limit_and_angle_brackets_are_refused():
    long = "x" * (LIMIT - len("Helps with project documents.") + 1)
    out, (outcome,) = apply_edits(SKILL, [edit("append", long)], EditCaps(max_edit_chars=2000, parts=("description",)))
    assert outcome.status == "too_long" and "1,024" in outcome.detail and out == SKILL
    out, (outcome,) = apply_edits(SKILL, [edit("append", "Use for <xml> files.")], ONLY_DESCRIPTION)
    assert outcome.status == "invalid" and out == SKILL
    out, (outcome,) = apply_edits(SKILL, [edit("delete", anchor="Helps with project documents.")], ONLY_DESCRIPTION)
    assert outcome.status == "invalid" and "empty" in outcome.detail


def test_a_folded_description_becomes_one_line_and_the_keys_after_it_stay():
    text = "---\nname: n\ndescription: >\n  folded\n  text\n\nmetadata:\n  owner: me\n---\nbody\n"
    out, (outcome,) = apply_edits(text, [edit("append", "More.")], ONLY_DESCRIPTION)
    assert outcome.status == "applied"
    assert out == "---\nname: n\ndescription: folded text More.\n\nmetadata:\n  owner: me\n---\nbody\n"


def test_a_missing_description_is_written_after_the_name_and_no_front_matter_is_an_error():
    assert with_description("---\nname: n\nlicense: MIT\n---\nb\n", "Use it: for notes.") == \
        "---\nname: n\ndescription: 'Use it: for notes.'\nlicense: MIT\n---\nb\n"
    with pytest.raises(InputError, match="no front matter"):
        with_description("# just a body\n", "x")


def test_the_same_edit_of_two_parts_is_two_edits():
    body, description = edit("append", "Use it.", part="body"), edit("append", "Use it.")
    assert body.key() != description.key()
    assert "part" not in body.to_dict() and description.to_dict()["part"] == "description"
    assert Edit.from_dict(description.to_dict()) == description
