"""LLM-as-judge scorer: a judge model grades the output against a rubric.

The prompt lives in ``skillopt_ci/prompts/judge.md``. Untrusted text (the output, and the task
input and reference) is fenced with a backtick fence longer than any backtick run inside it, so
the output cannot close its fence and pose as instructions. Each of ``repeats`` samples is one
call ``models.complete("judge", messages, sample_index=i)``; verdicts are parsed by
:func:`parse_verdict`. An unparseable verdict is counted in ``Score.errors`` and left out of the
mean, never scored as zero; when no sample parses the scorer raises ``ScoringError``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.errors import InputError, ScoringError
from skillopt_ci.core.task import Task
from skillopt_ci.core.template import placeholders, render
from skillopt_ci.core.text import as_text, clip, fence, quote
from skillopt_ci.models.base import Message, ModelCaller, Usage
from skillopt_ci.prompts.render import load_template, strip_leading_comment
from skillopt_ci.scorers.base import Score, Scorer

PLACEHOLDERS = ("rubric", "input", "reference", "output")
_SCORE_LINE = re.compile(
    r"^[\s>#*_-]*score[\s*_]*[:=][\s*_]*(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+))(?P<rest>[^\n]*)$",
    re.IGNORECASE | re.MULTILINE,
)
_REASON_LINE = re.compile(
    r"^[\s>#*_-]*reason[\s*_]*[:=][\s*_]*(?P<text>.+)$", re.IGNORECASE | re.MULTILINE
)
_PASS_FAIL = re.compile(
    r"^[\s>#*_-]*(?:(?:verdict|grade|result)[\s*_]*[:=][\s*_]*)?(?P<v>pass|fail)(?:ed)?\b[\s*_.!]*"
    r"(?:[-:\u2013\u2014]\s*(?P<rest>[^\n]*))?$",
    re.IGNORECASE | re.MULTILINE,
)


def default_template() -> str:
    return load_template("judge.md")


def _in_range(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ValueError(f"score {clip(repr(raw), 30)} is not a number")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"score {clip(repr(raw), 30)} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"score {clip(str(raw), 30)} is outside [0, 1]")
    return value


def _json_verdict(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    found = None
    for m in re.finditer(r"\{", text):
        try:
            obj = decoder.raw_decode(text, m.start())[0]
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "score" in obj:
            found = obj
    return found


def parse_verdict(text: str) -> tuple[float, str]:
    """``(score, reason)`` from a judge reply; ``ValueError`` saying why when there is none.

    Accepted, in order: the last JSON object with a ``"score"`` key (fenced or not); the last
    line ``SCORE: 0.7`` (with an optional ``REASON: ...`` line); the last line reading ``PASS``
    or ``FAIL`` (also ``VERDICT: PASS``), worth 1 and 0. A score outside [0, 1], a fraction
    (``7/10``) or a percentage is not rescaled: the verdict is unparseable.
    """
    obj = _json_verdict(text)
    if obj is not None:
        return _in_range(obj["score"]), str(obj.get("reason", "")).strip()
    lines = list(_SCORE_LINE.finditer(text))
    if lines:
        m = lines[-1]
        if m["rest"].strip().startswith(("/", "%")):
            raise ValueError(f"score {clip(m['num'] + m['rest'], 30)} is not a number in [0, 1]")
        reasons = list(_REASON_LINE.finditer(text))
        reason = reasons[-1]["text"] if reasons else text.replace(m.group(0), "")
        return _in_range(m["num"]), reason.strip()
    verdicts = list(_PASS_FAIL.finditer(text))
    if verdicts:
        m = verdicts[-1]
        reason = m["rest"] or text.replace(m.group(0), "")
        return (1.0 if m["v"].lower() == "pass" else 0.0), reason.strip()
    raise ValueError("no verdict found")


@dataclass(frozen=True)
class JudgeOptions:
    rubric: str
    repeats: int = 1
    pass_threshold: float = 0.5
    template: str | None = None  # the whole prompt, with {{placeholders}}
    template_file: str | None = None  # same, from a file relative to the suite directory


class Judge(Scorer):
    name = "llm_judge"
    Options = JudgeOptions
    needs_model = True

    def setup(self) -> None:
        o = self.options
        if not o.rubric.strip():
            raise self.error('option "rubric" must not be empty')
        if o.repeats < 1:
            raise self.error(f"repeats must be at least 1, got {o.repeats}")
        if not 0.0 <= o.pass_threshold <= 1.0:
            raise self.error(f"pass_threshold must be in [0, 1], got {o.pass_threshold}")
        if o.template is not None and o.template_file is not None:
            raise self.error('give "template" or "template_file", not both')
        where = None
        if o.template_file is not None:
            path = self.suite_dir / o.template_file
            where = str(path)
            try:
                template = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise self.error(f"cannot read template: {exc.strerror}", where=where) from exc
        else:
            template = o.template if o.template is not None else default_template()
        template = strip_leading_comment(template)
        used = set(placeholders(template))
        if unknown := used - set(PLACEHOLDERS):
            raise self.error(
                f"unknown template placeholder(s) {sorted(unknown)}; allowed: {list(PLACEHOLDERS)}",
                where=where,
            )
        if "output" not in used:
            raise self.error("the judge template must contain {{output}}", where=where)
        self.template = template

    def render(self, output: str, task: Task) -> str:
        reference = ""
        if task.expected is not None:
            reference = (
                "## Reference answer\n\nA correct answer, for comparison; the answer to grade "
                f"need not match it word for word.\n\n{fence(as_text(task.expected))}\n"
            )
        values = {
            "rubric": self.options.rubric.strip(),
            "input": fence(as_text(task.input) if task.input is not None else ""),
            "reference": reference,
            "output": fence(output),
        }
        return render(self.template, values)

    def score(self, output: str, task: Task) -> Score:
        raise self._no_model()

    def _no_model(self) -> InputError:
        return self.error("needs a judge model", hint="set models.judge in skillopt.yml")

    async def ascore(self, output: str, task: Task, models: ModelCaller | None = None) -> Score:
        if models is None:
            raise self._no_model()
        messages = [Message("user", self.render(output, task))]
        gathered = await asyncio.gather(
            *(
                models.complete("judge", messages, sample_index=i)
                for i in range(self.options.repeats)
            ),
            return_exceptions=True,
        )
        for outcome in gathered:
            if isinstance(outcome, BaseException):
                raise outcome
        replies = [r for r in gathered if not isinstance(r, BaseException)]  # every one, as a Completion
        usage = sum((r.usage for r in replies), Usage())
        verdicts, problems = [], []
        for reply in replies:
            try:
                verdicts.append(parse_verdict(reply.text))
            except ValueError as exc:
                problems.append(f"{exc} in {quote(reply.text, 80)}")
        if not verdicts:
            error = ScoringError(
                f"judge verdict unparseable in all {len(replies)} samples: {problems[0]}",
                usage=usage,
            )
            raise error
        value = sum(s for s, _ in verdicts) / len(verdicts)
        reasons = list(dict.fromkeys(clip(r, 240 // len(verdicts) + 20) for _, r in verdicts if r))
        head = (
            f"judge {value:.2f}"
            if len(verdicts) == 1
            else f"judge mean {value:.2f} of {len(verdicts)}"
        )
        feedback = f"{head}: {' | '.join(reasons)}" if reasons else head
        return Score.graded(
            value, self.options.pass_threshold, feedback, usage=usage, errors=len(problems)
        )
