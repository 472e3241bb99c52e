"""Edit application: anchored step edits, protected blocks, caps, the slow-update rewrite, diffs."""

from __future__ import annotations

import random

import pytest

from helpers.paths import REPO
from skillopt_ci.core.edits import (
    Edit,
    EditCaps,
    apply_edits,
    edit_problems,
    ensure_protected_block,
    protected_block,
    rewrite_protected_block,
    unified_diff,
)
from skillopt_ci.core.skill import FRONT_MATTER_RE, estimate_tokens, parse_skill

SKILL = (REPO / "skills/ticket-triage/SKILL.md").read_text(encoding="utf-8")
BILLING = '- If the ticket mentions "invoice", "refund" or "charged", the category is billing.'
BUG = '- If the ticket mentions "crash" or "error", the category is bug.'
OUTAGE = '- If the ticket mentions "outage", the category is bug.'
ANSWER = "Answer with only category/priority, for example `billing/P3`, and nothing else."
START = "<!-- skillopt:protected:start durable -->"
END = "<!-- skillopt:protected:end durable -->"
GUIDANCE = "- Never guess the customer's plan."


def apply_one(edit: Edit, text: str = SKILL, caps: EditCaps | None = None) -> tuple[str, str, str]:
    result, outcomes = apply_edits(text, [edit], caps or EditCaps())
    assert len(outcomes) == 1 and outcomes[0].edit == edit
    return result, outcomes[0].status, outcomes[0].detail


def with_guidance(text: str = SKILL) -> str:
    result, outcome = rewrite_protected_block(text, "durable", GUIDANCE)
    assert outcome.status == "applied"
    return result


def test_example_skill_has_the_lines_the_tests_rely_on():
    for line in (BILLING, BUG, ANSWER, START, END):
        assert SKILL.count(line) == 1
    assert SKILL.rstrip().endswith(END)


# --- each operation -------------------------------------------------------------------------


def test_append_adds_text_after_one_blank_line_and_after_a_trailing_protected_block():
    result, status, detail = apply_one(Edit("append", text="\n\n- Escalate outages to P1.\n\n"))
    assert status == "applied"
    assert result == SKILL.rstrip() + "\n\n- Escalate outages to P1.\n"
    assert result.index("Escalate") > result.index(END)
    assert protected_block(result, "durable") == ""
    assert detail == f"append at line {result[: result.index('- Escalate')].count(chr(10)) + 1}"
    parse_skill(result)


def test_append_keeps_the_trailing_block_content_intact():
    base = with_guidance()
    result, status, _ = apply_one(Edit("append", text="More."), base)
    assert status == "applied"
    assert protected_block(result, "durable") == GUIDANCE
    assert result.endswith(END + "\n\nMore.\n")


@pytest.mark.parametrize("anchor", [BUG, BUG + "\n"])
def test_insert_after_a_whole_bullet_line_adds_the_next_bullet(anchor):
    result, status, _ = apply_one(Edit("insert_after", text=OUTAGE + "\n", anchor=anchor))
    assert status == "applied"
    assert result == SKILL.replace(BUG + "\n", BUG + "\n" + OUTAGE + "\n")


def test_insert_after_mid_line_inserts_verbatim():
    result, status, _ = apply_one(
        Edit("insert_after", text=" (or security)", anchor="the category is account")
    )
    assert status == "applied"
    assert "the category is account (or security).\n" in result


def test_insert_after_the_last_line_without_a_newline():
    result, status, _ = apply_one(Edit("insert_after", text="- b", anchor="- a"), "# T\n\n- a")
    assert (result, status) == ("# T\n\n- a\n- b", "applied")


def test_replace_swaps_the_anchor_verbatim():
    result, status, _ = apply_one(
        Edit("replace", text="The default priority is P2.", anchor="The default priority is P3.")
    )
    assert status == "applied"
    assert result == SKILL.replace("The default priority is P3.", "The default priority is P2.")


@pytest.mark.parametrize("anchor", [BUG, BUG + "\n"])
def test_delete_a_whole_line_removes_the_line(anchor):
    result, status, _ = apply_one(Edit("delete", anchor=anchor))
    assert status == "applied"
    assert result == SKILL.replace(BUG + "\n", "")


def test_delete_mid_line_removes_only_the_anchor():
    result, status, _ = apply_one(Edit("delete", anchor=' or "error"'))
    assert status == "applied"
    assert '- If the ticket mentions "crash", the category is bug.\n' in result


def test_delete_a_paragraph_between_blank_lines_leaves_one_blank_line():
    result, status, _ = apply_one(Edit("delete", anchor=ANSWER))
    assert status == "applied"
    assert result == SKILL.replace(ANSWER + "\n\n", "")
    assert "## Answer\n\n" + START in result


def test_delete_at_the_edges_leaves_no_stray_blank_line():
    assert apply_one(Edit("delete", anchor="# T"), "# T\n\nbody\n")[0] == "body\n"
    assert apply_one(Edit("delete", anchor="body"), "# T\n\nbody\n")[0] == "# T\n"
    assert apply_one(Edit("delete", anchor="body"), "# T\n\nbody")[0] == "# T\n"


def test_replace_with_empty_text_deletes_like_delete():
    assert apply_one(Edit("replace", anchor=BUG))[0] == apply_one(Edit("delete", anchor=BUG))[0]


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (Edit("rewrite", text="x", anchor="y"), "op 'rewrite' is not one of"),
        (Edit("append", text="x", anchor="y"), "append takes no anchor"),
        (Edit("append", text="  \n"), "append needs non-blank text"),
        (Edit("insert_after", text="x"), "insert_after needs a non-blank anchor"),
        (Edit("insert_after", text="", anchor="y"), "insert_after needs non-blank text"),
        (Edit("replace", text="x", anchor=" \n"), "replace needs a non-blank anchor"),
        (Edit("delete", text="x", anchor="y"), "delete takes no text"),
        (Edit("delete"), "delete needs a non-blank anchor"),
        (Edit("append", text="a\x00b"), "NUL"),
        (Edit("append", text=None), "must be strings"),  # type: ignore[arg-type]
    ],
)
def test_structurally_invalid_edits_are_refused(edit, problem):
    assert any(problem in p for p in edit_problems(edit))
    result, status, detail = apply_one(edit)
    assert (result, status) == (SKILL, "invalid")
    assert problem in detail


@pytest.mark.parametrize(
    "edit",
    [Edit("append", text="x"), Edit("insert_after", text="x", anchor="y"), Edit("replace", anchor="y"),
     Edit("replace", text="x", anchor="y"), Edit("delete", anchor="y")],
)
def test_valid_edits_have_no_problems(edit):
    assert edit_problems(edit) == []


def test_text_over_the_length_cap_is_too_long():
    result, status, detail = apply_one(Edit("append", text="x" * 11), caps=EditCaps(max_edit_chars=10))
    assert (result, status, detail) == (SKILL, "too_long", "text is 11 characters; the limit is 10")
    assert apply_one(Edit("append", text="x" * 10), caps=EditCaps(max_edit_chars=10))[1] == "applied"


def test_missing_anchor_is_not_found():
    result, status, detail = apply_one(Edit("delete", anchor="the category is spam"))
    assert (result, status) == (SKILL, "anchor_not_found")
    assert detail == 'anchor "the category is spam" is not in the skill'


def test_repeated_anchor_is_ambiguous_and_never_guessed():
    result, status, detail = apply_one(Edit("replace", text="x", anchor='If the ticket mentions "'))
    assert (result, status) == (SKILL, "ambiguous_anchor")
    assert detail == 'anchor "If the ticket mentions \\"" appears 3 times'


def test_overlapping_occurrences_count_as_ambiguous():
    assert apply_one(Edit("delete", anchor="aa"), "# T\n\naaa\n")[1] == "ambiguous_anchor"


def test_long_anchors_are_shortened_in_details():
    detail = apply_one(Edit("delete", anchor="z" * 200))[2]
    assert len(detail) < 100 and "\u2026" in detail


def test_an_edit_that_changes_nothing_is_a_no_op():
    result, status, _ = apply_one(Edit("replace", text=BUG, anchor=BUG))
    assert (result, status) == (SKILL, "no_op")


# --- ordering -----------------------------------------------------------------------------------


def test_edits_apply_in_order_to_the_evolving_text():
    edits = [
        Edit("insert_after", text=OUTAGE, anchor=BUG),
        Edit("replace", text='"outage" or "down"', anchor='"outage"'),
        Edit("delete", anchor="not in the skill"),
        Edit("delete", anchor=BILLING),
    ]
    result, outcomes = apply_edits(SKILL, edits)
    assert [o.status for o in outcomes] == ["applied", "applied", "anchor_not_found", "applied"]
    assert [o.edit for o in outcomes] == edits
    assert BUG + '\n- If the ticket mentions "outage" or "down", the category is bug.\n' in result
    assert BILLING not in result


def test_a_later_anchor_is_not_found_before_the_edit_that_adds_it():
    edits = [Edit("replace", text='"down"', anchor='"outage"'), Edit("insert_after", text=OUTAGE, anchor=BUG)]
    _, outcomes = apply_edits(SKILL, edits)
    assert [o.status for o in outcomes] == ["anchor_not_found", "applied"]


# --- protected blocks and front matter ---------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (Edit("delete", anchor="Never guess"), 'overlaps protected block "durable"'),
        (Edit("replace", text="x", anchor="protected:end durable"), 'overlaps protected block "durable"'),
        (Edit("replace", text="x", anchor="nothing else.\n\n<!-- skillopt"), "overlaps protected"),
        (Edit("delete", anchor=END + "\n"), "overlaps protected"),
        (Edit("insert_after", text="- x", anchor=GUIDANCE), "overlaps protected"),
        (Edit("insert_after", text="- x", anchor=START), "overlaps protected"),
    ],
)
def test_anchors_touching_a_protected_block_are_refused(edit, where):
    base = with_guidance()
    result, status, detail = apply_one(edit, base)
    assert (result, status) == (base, "protected")
    assert where in detail


def test_insert_right_before_a_block_is_outside_it():
    base = with_guidance()
    result, status, _ = apply_one(Edit("insert_after", text="- extra", anchor=ANSWER + "\n\n"), base)
    assert status == "applied"
    assert ANSWER + "\n\n- extra\n" + START in result
    assert protected_block(result, "durable") == GUIDANCE


@pytest.mark.parametrize(
    "text",
    ["<!-- skillopt:protected:start evil -->", "skillopt:protected:end durable", "see <!-- note -->"],
)
@pytest.mark.parametrize("op", ["append", "insert_after", "replace"])
def test_new_text_cannot_write_markers_or_comments(op, text):
    edit = Edit(op, text=text, anchor="" if op == "append" else BUG)
    result, status, detail = apply_one(edit)
    assert (result, status) == (SKILL, "protected")
    assert "markers cannot be written by step edits" in detail


def test_an_edit_that_would_assemble_a_marker_from_existing_text_is_refused():
    text = "# T\n\nNote: <!-- skillopt:protQected:start evil -->\n"
    result, status, detail = apply_one(Edit("delete", anchor="Q"), text)
    assert (result, status) == (text, "protected")
    assert "protected block" in detail


@pytest.mark.parametrize(
    "anchor", ["name: ticket-triage", "---\n\n# Ticket triage", "Use when a new support ticket arrives."]
)
def test_the_front_matter_is_not_editable(anchor):
    result, status, detail = apply_one(Edit("replace", text="x", anchor=anchor))
    assert (result, status) == (SKILL, "protected")
    assert detail.endswith("overlaps the front matter, which step edits cannot change")


def test_an_edit_cannot_create_front_matter():
    text = "# T\n\nbody\n"
    result, status, _ = apply_one(Edit("replace", text="---\nname: evil\n---\n# T", anchor="# T"), text)
    assert (result, status) == (text, "protected")


def test_append_to_a_skill_that_is_only_front_matter_keeps_it():
    text = "---\nname: t\n---\n"
    result, status, _ = apply_one(Edit("append", text="Body."), text)
    assert status == "applied"
    assert parse_skill(result).front_matter == {"name": "t"} and parse_skill(result).body == "\nBody.\n"


# --- token cap ---------------------------------------------------------------------------------


def test_growth_past_the_token_cap_is_refused_and_rolled_back():
    caps = EditCaps(max_skill_tokens=estimate_tokens(SKILL) + 2)
    edits = [Edit("append", text="Escalate every outage to P1 immediately."), Edit("append", text="P1")]
    result, outcomes = apply_edits(SKILL, edits, caps)
    assert [o.status for o in outcomes] == ["over_token_cap", "applied"]
    assert outcomes[0].detail.endswith(f"the cap is {caps.max_skill_tokens}")
    assert result == SKILL.rstrip() + "\n\nP1\n"


def test_shrinking_is_allowed_even_over_the_cap():
    caps = EditCaps(max_skill_tokens=10)
    edits = [
        Edit("delete", anchor=BUG),
        Edit("replace", text="Default P3.", anchor="The default priority is P3."),
        Edit("replace", text="The default priority is P3 unless urgent.", anchor="Default P3."),
        Edit("insert_after", text="- x", anchor=BILLING),
    ]
    _, outcomes = apply_edits(SKILL, edits, caps)
    assert [o.status for o in outcomes] == ["applied", "applied", "over_token_cap", "over_token_cap"]


# --- slow update -------------------------------------------------------------------------------


def test_rewrite_protected_block_replaces_the_content_between_markers():
    result, outcome = rewrite_protected_block(SKILL, "durable", "\n  - Check the plan first.  \n\n")
    assert outcome.status == "applied"
    assert result == SKILL.replace(START + "\n" + END, START + "\n- Check the plan first.\n" + END)
    assert protected_block(result, "durable") == "- Check the plan first."
    assert outcome.edit == Edit(
        op="replace", anchor="", text="\n  - Check the plan first.  \n\n", source="slow_update",
        rationale="slow update",
    )
    again, second = rewrite_protected_block(result, "durable", GUIDANCE)
    assert second.status == "applied" and second.edit.anchor == "- Check the plan first."
    assert protected_block(again, "durable") == GUIDANCE
    cleared, third = rewrite_protected_block(again, "durable", "")
    assert third.status == "applied" and cleared == SKILL
    parse_skill(again)


def test_rewrite_with_the_same_content_is_a_no_op():
    base = with_guidance()
    for content in (GUIDANCE, "\n" + GUIDANCE + "  \n"):
        result, outcome = rewrite_protected_block(base, "durable", content)
        assert (result, outcome.status) == (base, "no_op")
        assert outcome.edit.anchor == GUIDANCE and outcome.edit.text == content


@pytest.mark.parametrize("content", ["<!-- skillopt:protected:end durable -->\nx", "a <!-- b", "skillopt:protected"])
def test_rewrite_refuses_content_with_markers(content):
    result, outcome = rewrite_protected_block(SKILL, "durable", content)
    assert (result, outcome.status) == (SKILL, "protected")


def test_rewrite_of_a_missing_block_then_ensure_protected_block():
    result, outcome = rewrite_protected_block(SKILL, "lessons", "- x")
    assert (result, outcome.status) == (SKILL, "anchor_not_found")
    assert outcome.detail == 'there is no protected block "lessons"'
    assert protected_block(SKILL, "lessons") is None
    ensured = ensure_protected_block(SKILL, "lessons")
    assert ensured == (
        SKILL.rstrip()
        + "\n\n<!-- skillopt:protected:start lessons -->\n<!-- skillopt:protected:end lessons -->\n"
    )
    assert ensure_protected_block(ensured, "lessons") == ensured
    assert ensure_protected_block(SKILL, "durable") == SKILL
    written, outcome = rewrite_protected_block(ensured, "lessons", "- x")
    assert outcome.status == "applied" and protected_block(written, "lessons") == "- x"
    assert [r.name for r in parse_skill(written).protected] == ["durable", "lessons"]
    with pytest.raises(ValueError):
        ensure_protected_block(SKILL, "bad name")


def test_rewrite_respects_the_token_cap():
    caps = EditCaps(max_skill_tokens=estimate_tokens(SKILL) + 3)
    result, outcome = rewrite_protected_block(SKILL, "durable", "Always read the whole ticket first.", caps)
    assert (result, outcome.status) == (SKILL, "over_token_cap")
    shrunk, outcome = rewrite_protected_block(with_guidance(), "durable", "", EditCaps(max_skill_tokens=10))
    assert (shrunk, outcome.status) == (SKILL, "applied")


# --- diff --------------------------------------------------------------------------------------


def test_unified_diff():
    assert unified_diff(SKILL, SKILL) == ""
    new, _ = apply_edits(SKILL, [Edit("insert_after", text=OUTAGE, anchor=BUG)])
    diff = unified_diff(SKILL, new)
    assert diff.startswith("--- current\n+++ candidate\n@@ ")
    assert f"\n {BUG}\n+{OUTAGE}\n" in diff and diff.endswith("\n")
    assert sum(line.startswith(("+", "-")) for line in diff.splitlines()) == 3
    assert unified_diff("a", "b", "old", "new") == (
        "--- old\n+++ new\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"
    )


# --- fuzz --------------------------------------------------------------------------------------

TEXTS = [
    "- New rule.", "", "word", "\n\n", "\n- bullet\n", "-->", "<!", "--", "\x00",
    "<!-- skillopt:protected:end durable -->", "skillopt:protected", "---\nname: evil\n---\n",
    "## Heading\n\nParagraph.", "skillopt:prot", "ected:start evil -->",
]


def random_edit(rng: random.Random, text: str) -> Edit:
    op = rng.choice(["append", "insert_after", "replace", "delete", "bogus"])
    if rng.random() < 0.3:
        anchor = rng.choice(text.splitlines(keepends=rng.random() < 0.5) or [""])
    else:
        start = rng.randrange(len(text))
        anchor = text[start : start + rng.randint(1, 50)]
    if op == "append" and rng.random() < 0.8:
        anchor = ""
    body = rng.choice(TEXTS) if rng.random() < 0.5 else text[rng.randrange(len(text)) :][:30]
    if rng.random() < 0.05:
        body = "x" * 801
    return Edit(op, text="" if op == "delete" and rng.random() < 0.8 else body, anchor=anchor)


def test_fuzzed_edits_always_leave_a_parseable_skill_with_blocks_and_front_matter_intact():
    rng = random.Random(20240601)
    base = with_guidance()
    front = FRONT_MATTER_RE.match(base)
    assert front is not None
    statuses: dict[str, int] = {}
    text = base
    for _ in range(100):
        edits = [random_edit(rng, text) for _ in range(rng.randint(1, 6))]
        text, outcomes = apply_edits(text, edits, EditCaps(max_skill_tokens=estimate_tokens(base) + 200))
        assert [o.edit for o in outcomes] == edits
        for outcome in outcomes:
            statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
        skill = parse_skill(text)
        assert text.startswith(front.group(0))
        assert [r.name for r in skill.protected] == ["durable"]
        assert protected_block(text, "durable") == GUIDANCE
        if len(text) < len(front.group(0)) + 200:
            text = base
    assert sum(statuses.values()) > 250
    for status in ("applied", "protected", "ambiguous_anchor", "invalid", "too_long", "over_token_cap"):
        assert statuses.get(status, 0) > 0, statuses
