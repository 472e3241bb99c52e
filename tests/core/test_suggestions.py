"""A trained skill cut into suggestions on a pull request's diff (core/suggestions.py)."""

from __future__ import annotations

from helpers.review_pr import accept
from skillopt_ci.core.edits import Edit
from skillopt_ci.core.suggestions import Change, changes, diff_hunks, edits_behind, suggest

HEAD = "".join(f"line {i}\n" for i in range(1, 21))


def test_hunks_are_read_from_the_new_side_of_the_patch():
    patch = "@@ -1,3 +1,4 @@ title\n a\n+b\n c\n d\n@@ -10 +11 @@\n-x\n+y\n@@ -20,2 +21,0 @@\n-gone\n-gone\n"
    assert diff_hunks(patch) == [(1, 4), (11, 11)]  # a hunk with no new lines has nothing to comment on
    assert diff_hunks(None) == [] and diff_hunks("") == []


def test_changes_inside_the_diff_become_suggestions_and_accepting_them_gives_the_trained_text():
    trained = HEAD.replace("line 3\n", "line 3, sharper\n").replace("line 5\n", "line 5\nnew after 5\n")
    placed, outside = suggest(HEAD, trained, "@@ -1,8 +1,8 @@\n")
    assert outside == []
    assert [(s.first, s.last, s.lines) for s in placed] == [
        (3, 3, ("line 3, sharper",)),
        (5, 5, ("line 5", "new after 5")),  # an insertion repeats the line before it
    ]
    assert accept(HEAD, placed) == trained


def test_a_change_outside_every_hunk_is_kept_for_the_body():
    trained = HEAD.replace("line 3\n", "line 3, sharper\n").replace("line 15\n", "")
    placed, outside = suggest(HEAD, trained, "@@ -1,5 +1,5 @@\n")
    assert [s.first for s in placed] == [3]
    assert outside == [Change(15, 15, ("line 15",), ())]


def test_an_insertion_uses_the_line_after_when_only_that_one_is_in_the_diff():
    trained = HEAD.replace("line 10\n", "line 10\nnew\n")
    [s], [] = suggest(HEAD, trained, "@@ -11,3 +11,3 @@\n")
    assert (s.first, s.last, s.lines) == (11, 11, ("new", "line 11"))
    [top], [] = suggest(HEAD, "first\n" + HEAD, "@@ -1,2 +1,2 @@\n")
    assert (top.first, top.lines) == (1, ("first", "line 1"))


def test_a_removal_suggests_nothing_in_place_of_the_lines():
    trained = HEAD.replace("line 2\nline 3\n", "")
    [s], [] = suggest(HEAD, trained, "@@ -1,6 +1,6 @@\n")
    assert (s.first, s.last, s.lines) == (2, 3, ())
    assert accept(HEAD, [s]) == trained


def test_adjacent_changes_are_one_suggestion():
    trained = HEAD.replace("line 4\n", "line four\n").replace("line 5\n", "line 5 new\n")
    blocks = changes(HEAD, trained)
    assert len(blocks) == 1  # difflib joins adjacent lines into one block: one suggestion
    placed, outside = suggest(HEAD, trained, "@@ -1,9 +1,9 @@\n")
    assert len(placed) == 1 and outside == [] and accept(HEAD, placed) == trained


def test_the_edits_behind_a_change_are_found_by_their_text_or_a_removed_anchor():
    trained = HEAD.replace("line 7\n", "line 7\n- Bug tickets have priority P2.\n").replace("line 12\n", "")
    add, remove = changes(HEAD, trained)
    edits = [Edit(op="insert_after", anchor="line 7", text="- bug tickets have   priority P2."),
             Edit(op="delete", anchor="line 12"), Edit(op="insert_after", anchor="x", text="unrelated")]
    assert edits_behind(add, edits) == [0]
    assert edits_behind(remove, edits) == [1]
