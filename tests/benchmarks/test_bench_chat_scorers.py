"""The SearchQA, LiveMathematicianBench and DocVQA scorers against hand-computed results, including
the extraction and normalisation edge cases their evaluators define."""

from __future__ import annotations

import pytest

from skillopt_ci.benchmarks.packs.docvqa.scorer import anls_score, docvqa_answer
from skillopt_ci.benchmarks.packs.livemathematicianbench.scorer import (
    livemath_answer,
    livemath_label,
)
from skillopt_ci.benchmarks.packs.searchqa.scorer import searchqa_answer, squad_f1, squad_normalize
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.scorers import build_scorer


def task(expected, **fields) -> Task:
    return Task(id="t1", input="q", expected=expected, fields={"id": "t1", "input": "q", "expected": expected, **fields},
                source="val.jsonl:1")


def score(spec, output, t):
    return build_scorer(spec, ".").score(output, t)


# --- SearchQA ------------------------------------------------------------------------------------


def test_searchqa_takes_the_last_answer_tag_in_any_case_across_lines():
    assert searchqa_answer("<answer>Paris</answer> no wait <ANSWER>\n  Lyon \n</Answer>") == "Lyon"
    assert searchqa_answer("I think\nthe answer is\n\nRome\n\n") == "Rome"  # no tag: last non-empty line
    assert searchqa_answer("   ") == "   "  # no line at all: the whole text
    assert searchqa_answer("<answer></answer>") == ""


def test_squad_normalisation():
    assert squad_normalize("The  U.S.A.!") == "usa"
    assert squad_normalize("An apple a day") == "apple day"
    assert squad_normalize("theatre") == "theatre"  # only whole words are articles
    assert squad_normalize("café—“x”") == "café—“x”"  # only ASCII punctuation is deleted


def test_searchqa_exact_match_and_f1_by_hand():
    t = task(["Abraham Lincoln", "Lincoln"])
    s = score("searchqa", "<answer>the Lincoln.</answer>", t)
    assert (s.value, s.passed) == (1.0, True)
    assert s.feedback.startswith("hard 1, soft 1.00")
    # pred tokens [president, abraham, lincoln] vs [abraham, lincoln]: P 2/3, R 1, F1 0.8
    s = score({"type": "searchqa", "report": "soft"}, "<answer>President Abraham Lincoln</answer>", t)
    assert s.value == pytest.approx(0.8) and s.passed is False
    assert s.feedback.startswith("hard 0, soft 0.80")
    assert score("searchqa", "<answer>President Abraham Lincoln</answer>", t).value == 0.0


def test_squad_f1_edge_cases():
    assert squad_f1("a", "the") == 0.0  # both normalise to nothing: no common token, F1 0 (SQuAD v1.1)
    assert squad_f1("x y y", "y y z") == pytest.approx(2 / 3)  # counts, not sets: 2 common of 3 and 3
    assert squad_f1("Paris", "London") == 0.0


def test_searchqa_scalar_expected_and_missing_expected():
    assert score("searchqa", "<answer>42</answer>", task("42")).passed
    with pytest.raises(InputError, match='no "expected"'):
        score("searchqa", "x", task(None))


def test_report_option_is_checked():
    with pytest.raises(InputError, match='"report" must be hard or soft'):
        build_scorer({"type": "searchqa", "report": "both"}, ".")
    with pytest.raises(InputError, match='"variant" must be official or reference'):
        build_scorer({"type": "livemath", "variant": "strict"}, ".")
    with pytest.raises(InputError, match='"variant" must be official or reference'):
        build_scorer({"type": "docvqa", "variant": "anls2"}, ".")


# --- LiveMathematicianBench ----------------------------------------------------------------------

OPTIONS = [{"label": "A", "text": "It is compact."}, {"label": "B", "text": "It is open."},
           {"label": "C", "text": "Neither"}, {"label": "D", "text": "A and B"}, {"label": "E", "text": "E"}]
PAIRS = [(o["label"], o["text"]) for o in OPTIONS]


@pytest.mark.parametrize(("answer", "label"), [
    ("B", "B"), ("b", "B"), ("B.", "B"), ("B)", "B"), ("c:", "C"), ("B.):", "B"),  # upper-case, trailing . ) :
    ("it is open.", "B"), ("NEITHER", "C"),   # an option's text, ignoring case
    ("A and B", "D"),                         # the text wins over the first token
    ("C because of the lemma", "C"),          # the first token
    ("D) A and B", "D"),
    ("(B)", None),                            # a leading bracket is not stripped
    ("the answer is B", None), ("", None), ("F", None),
])
def test_livemath_label_rules(answer, label):
    assert livemath_label(answer, PAIRS) == label


def test_livemath_extraction():
    assert livemath_answer("<answer>A</answer> hmm <answer> c. </answer>") == "c."
    assert livemath_answer("Reasoning...\nFinal: D\n") == "Final: D"  # the last line, then rules apply


def test_livemath_scorer():
    t = task("C", choices=OPTIONS)
    assert score("livemath", "Long proof.\n<answer>C</answer>", t).passed
    s = score("livemath", "<answer>neither</answer>", t)
    assert (s.value, s.passed) == (1.0, True)
    s = score({"type": "livemath", "report": "soft"}, "<answer>A</answer>", t)
    assert (s.value, s.passed) == (0.0, False) and "answered A, expected C" in s.feedback
    s = score("livemath", "I cannot decide", t)
    assert not s.passed and "no option label" in s.feedback


def test_livemath_task_errors():
    with pytest.raises(InputError, match='needs "choices"'):
        score("livemath", "<answer>A</answer>", task("A"))
    with pytest.raises(InputError, match="is not one of the option labels"):
        score("livemath", "<answer>A</answer>", task("F", choices=OPTIONS))


@pytest.mark.parametrize(("reply", "label"), [
    ("so the result follows. \\boxed{b}", "B"),
    ("The answer is: c", "C"),
    ("Answer: (D)", "D"),
    ("Reasoning...\nFinal: A", "A"),
    ("I pick (A)", "A"),
    ("boxed{A} first, then \\boxed{C}", "C"),  # \boxed{} is looked for before boxed{}
    ("Answer: Because the map is onto", "B"),  # the authors' pattern reads the B of Because
    ("<answer>B</answer>", None),  # the method's tags are not the authors' protocol
    ("", None),
])
def test_livemath_official_protocol(reply, label):
    from skillopt_ci.benchmarks.packs.livemathematicianbench.scorer import livemath_official_label

    assert livemath_official_label(reply) == label


def test_livemath_official_variant_scores_boxed_answers():
    t = task("B", choices=[{"label": "A", "text": "1"}, {"label": "B", "text": "2"}])
    assert score({"type": "livemath", "variant": "official"}, "Thus \\boxed{B}", t).passed
    assert not score("livemath", "Thus \\boxed{B}", t).passed  # reference: the last line is no label
    assert score("livemath", "<answer>B</answer>", t).passed


# --- DocVQA --------------------------------------------------------------------------------------


def test_docvqa_extraction_by_last_positions():
    assert docvqa_answer("<answer>x</answer> then <answer> 1/8/93 </answer>") == "1/8/93"
    # The last <answer> opens after the last </answer>: no pair, so the last non-empty line.
    assert docvqa_answer("<answer>first</answer>\nwait\n<answer>second") == "<answer>second"
    assert docvqa_answer("The date is\n\n  1/8/93  \n") == "1/8/93"
    assert docvqa_answer("") == ""


def test_anls_by_hand_reference():
    """The method's evaluator (variant reference)."""
    def ref(prediction: str, gold: str) -> float:
        return anls_score(prediction, gold, variant="reference")

    assert ref("ITC  Limited ", "itc limited") == 1.0  # case and whitespace
    assert ref("itc limited.", "itc limited") == pytest.approx(1 - 1 / 12)  # punctuation kept
    assert ref("abcd", "abxd") == pytest.approx(0.75)
    assert ref("ab", "abcd") == 0.0  # distance 2/4 = 0.5 is not below tau
    assert ref("ab", "ac") == 0.0
    assert ref("a  b  c", "a b d") == pytest.approx(0.8)  # divided by the normalised lengths
    assert ref("abc", "abcd") == pytest.approx(0.75)
    assert ref("", "") == 1.0 and ref("", "x") == 0.0


def test_anls_by_hand_official():
    """The Robust Reading Competition's ANLS script (the default): the edit distance of the
    normalised strings over the longer of the normalised gold and the answer as given; a
    similarity of exactly 1 - tau is kept."""
    assert anls_score("ab", "ac") == pytest.approx(0.5)  # half the characters wrong: 0.5, not 0
    assert anls_score("ab", "abcd") == pytest.approx(0.5)
    assert anls_score("a", "abcd") == 0.0  # 1 - 3/4 is below 0.5
    assert anls_score("a  b  c", "a b d") == pytest.approx(1 - 1 / 7)  # the answer's raw length, 7
    assert anls_score("ITC  Limited ", "itc limited") == 1.0
    assert anls_score("itc limited.", "itc limited") == pytest.approx(1 - 1 / 12)
    assert anls_score("", "") == 1.0 and anls_score("", "x") == 0.0


def test_docvqa_answer_tags_in_any_case():
    """As the method's extractor reads them: <ANSWER>ITC</ANSWER> is the answer ITC."""
    assert docvqa_answer("Looking...\n<ANSWER>ITC</ANSWER>") == "ITC"
    assert docvqa_answer("<Answer>0.28</Answer> done") == "0.28"
    t = task(["itc"])
    assert score("docvqa", "<ANSWER>ITC</ANSWER>", t).value == 1.0
    assert score({"type": "docvqa", "variant": "reference"}, "<Answer>ITC</answer>", t).value == 1.0


def test_docvqa_scorer_best_over_golds_and_hard_threshold():
    t = task(["1/8/93", "January 8, 1993"])
    s = score("docvqa", "<answer>1/8/93</answer>", t)
    assert (s.value, s.passed) == (1.0, True)
    s = score({"type": "docvqa", "report": "soft"}, "<answer>january 8 1993</answer>", t)
    assert s.value == pytest.approx(1 - 1 / 15) and not s.passed  # one comma missing of 15 chars
    assert score("docvqa", "<answer>january 8 1993</answer>", t).value == 0.0
    assert score("docvqa", "<answer></answer>", task("")).passed  # two empty strings
    with pytest.raises(InputError, match="tau"):
        build_scorer({"type": "docvqa", "tau": 0}, ".")
