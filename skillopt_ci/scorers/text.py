"""Text scorers: thin wrappers over :mod:`normalize` and :mod:`match`."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import clip, quote
from skillopt_ci.scorers.base import Score, Scorer, describe_expected, expected_strings
from skillopt_ci.scorers.match import anls, extract_choice, f1
from skillopt_ci.scorers.normalize import normalize_text, tokens


@dataclass(frozen=True)
class ExactOptions:
    case_sensitive: bool = False
    ignore_punctuation: bool = False
    ignore_articles: bool = False
    strip: bool = True  # trim the ends and collapse whitespace runs


class Exact(Scorer):
    """The output equals one of the expected strings after the chosen normalisation."""

    name = "exact"
    Options = ExactOptions

    def _norm(self, s: str) -> str:
        o = self.options
        return normalize_text(
            s,
            case=not o.case_sensitive,
            whitespace=o.strip,
            punctuation=o.ignore_punctuation,
            articles=o.ignore_articles,
        )

    def score(self, output: str, task: Task) -> Score:
        expected = expected_strings(task, self.name)
        got = self._norm(output)
        for candidate in expected:
            if got == self._norm(candidate):
                return Score.binary(True, f"matched {quote(candidate)}")
        return Score.binary(False, f"{describe_expected(expected)}, got {quote(output)}")


@dataclass(frozen=True)
class ContainsOptions:
    case_sensitive: bool = False


class Contains(Scorer):
    """One of the expected strings occurs in the output (whitespace runs collapsed)."""

    name = "contains"
    Options = ContainsOptions

    def score(self, output: str, task: Task) -> Score:
        expected = expected_strings(task, self.name)
        fold = not self.options.case_sensitive
        got = normalize_text(output, case=fold)
        for candidate in expected:
            if normalize_text(candidate, case=fold) in got:
                return Score.binary(True, f"output contains {quote(candidate)}")
        what = describe_expected(expected).replace("expected", "output does not contain", 1)
        return Score.binary(False, f"{what}; got {quote(output)}")


@dataclass(frozen=True)
class RegexOptions:
    pattern: str | None = None  # default: task.expected is the pattern (or a list of them)
    flags: str = ""  # letters from "imsxa": ignorecase, multiline, dotall, verbose, ascii
    fullmatch: bool = False  # the whole output (trimmed) must match


_FLAGS = {"i": re.I, "m": re.M, "s": re.S, "x": re.X, "a": re.A}


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


class Regex(Scorer):
    """The output matches the pattern (``re.search``; ``re.fullmatch`` when ``fullmatch``)."""

    name = "regex"
    Options = RegexOptions

    def setup(self) -> None:
        bad = set(self.options.flags) - set(_FLAGS)
        if bad:
            raise self.error(
                f'unknown regex flag(s) "{"".join(sorted(bad))}"; allowed: i, m, s, x, a'
            )
        self.flags = 0
        for letter in self.options.flags:
            self.flags |= _FLAGS[letter]
        if self.options.pattern is not None:
            self._pattern(self.options.pattern, where=None)

    def _pattern(self, pattern: str, where: str | None) -> re.Pattern[str]:
        try:
            return _compile(pattern, self.flags)
        except re.error as exc:
            raise self.error(
                f"invalid regular expression /{clip(pattern)}/: {exc}", where=where
            ) from exc

    def score(self, output: str, task: Task) -> Score:
        if self.options.pattern is not None:
            sources = [self.options.pattern]
        else:
            sources = expected_strings(task, self.name)
        text = output.strip() if self.options.fullmatch else output
        for source in sources:
            pattern = self._pattern(source, where=task.source or None)
            m = pattern.fullmatch(text) if self.options.fullmatch else pattern.search(text)
            if m:
                return Score.binary(True, f"matched /{clip(source)}/ at {quote(m.group(0))}")
        shown = " or ".join(f"/{clip(s, 80)}/" for s in sources[:3])
        verb = "fully match" if self.options.fullmatch else "match"
        return Score.binary(False, f"answer did not {verb} {shown}; got {quote(output)}")


@dataclass(frozen=True)
class GradedOptions:
    pass_threshold: float = 0.5


def _check_threshold(scorer: Scorer) -> None:
    if not 0.0 <= scorer.options.pass_threshold <= 1.0:
        raise scorer.error(f"pass_threshold must be in [0, 1], got {scorer.options.pass_threshold}")


class TokenF1(Scorer):
    """SQuAD token F1 (case, punctuation and articles ignored), max over the references."""

    name = "token_f1"
    Options = GradedOptions

    def setup(self) -> None:
        _check_threshold(self)

    def score(self, output: str, task: Task) -> Score:
        value, best = max((f1(output, ref), ref) for ref in expected_strings(task, self.name))
        if value == 1.0:
            return Score(1.0, True, f"token F1 1.00 against {quote(best)}")
        feedback = f"token F1 {value:.2f}: expected {quote(best)}, got {quote(output)}"
        got, ref = tokens(output), tokens(best)
        got_set, ref_set = set(got), set(ref)
        missing = list(dict.fromkeys(t for t in ref if t not in got_set))[:5]
        extra = list(dict.fromkeys(t for t in got if t not in ref_set))[:5]
        if missing:
            feedback += f"; missing {', '.join(missing)}"
        if extra:
            feedback += f"; extra {', '.join(extra)}"
        return Score.graded(value, self.options.pass_threshold, feedback)


@dataclass(frozen=True)
class AnlsOptions:
    pass_threshold: float = 0.5
    tau: float = 0.5  # normalised edit distance at or above which the similarity counts as 0


class Anls(Scorer):
    """DocVQA ANLS: ``1 - normalised Levenshtein distance``, 0 at or beyond ``tau``; max over refs."""

    name = "anls"
    Options = AnlsOptions

    def setup(self) -> None:
        _check_threshold(self)
        if not 0.0 < self.options.tau <= 1.0:
            raise self.error(f"tau must be in (0, 1], got {self.options.tau}")

    def score(self, output: str, task: Task) -> Score:
        refs = expected_strings(task, self.name)
        value, best = max((anls(output, ref, self.options.tau), ref) for ref in refs)
        return Score.graded(
            value,
            self.options.pass_threshold,
            f"ANLS {value:.2f}: expected {quote(best)}, got {quote(output)}",
        )


@dataclass(frozen=True)
class ChoiceOptions:
    labels: tuple[str, ...] = ("A", "B", "C", "D")


class Choice(Scorer):
    """Multiple choice: the label extracted from the output equals the expected label."""

    name = "choice"
    Options = ChoiceOptions

    def setup(self) -> None:
        labels = self.options.labels
        if not labels or any(not x.strip() for x in labels):
            raise self.error("labels must be a non-empty list of non-empty strings")
        if len({x.casefold() for x in labels}) != len(labels):
            raise self.error(f"labels must differ ignoring case: {list(labels)}")

    def score(self, output: str, task: Task) -> Score:
        labels = self.options.labels
        accepted = set()
        for raw in expected_strings(task, self.name):
            label = extract_choice(raw, labels)
            if label is None:
                raise InputError(
                    f'task "{task.id}": expected {quote(raw)} is not one of the labels {list(labels)}',
                    where=task.source or None,
                )
            accepted.add(label)
        got = extract_choice(output, labels)
        if got is None:
            return Score.binary(
                False, f"no answer label ({', '.join(labels)}) found in output {quote(output)}"
            )
        want = " or ".join(f'"{x}"' for x in sorted(accepted))
        if got in accepted:
            return Score.binary(True, f'answered "{got}" as expected')
        return Score.binary(False, f'expected {want}, got "{got}"')
