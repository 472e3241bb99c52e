"""Simulated triggering: a target that picks a skill from its listing, and the optimizer's side
of description training.

Like the other simulations it does not reason; it matches words, the way a model under-informed
by a vague description behaves:

* **target** (:class:`CatalogueTarget`) — a request that offers the ``Skill`` tool with the
  catalogue listing (``- name: description`` lines) loads the listed skill whose description
  shares the most *cue words* with the request (content words: four letters or more, not in
  :data:`GENERIC`, a final ``s`` dropped), at least one; a description sentence that starts with
  "Not for" excludes a request sharing a cue with it. A vague description ("Helps with project
  documents.") shares no cue with most requests and is missed; a sibling with a closer
  description wins the near-misses. Once a skill is loaded (or when none is chosen) it answers
  in one line. A pure function of the request.
* **optimizer** (:func:`reflect_triggers`) — for each missed trigger, the request's cues that
  the description lacks and that no request it must leave alone has, added as one "Use when the
  request is about …" sentence; for each false trigger, the cues it shares with the description
  and with no request that should trigger, excluded in one "Not for requests about …" sentence.
  One prompt in ``bad_every`` (by a hash of the prompt) instead gets an over-broad sentence
  (:data:`BROAD`) that makes near-misses trigger: the validation gate is what keeps it out.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from skillopt_ci.sim.protocols import ScriptedReply, ScriptedToolCall
from skillopt_ci.sim.reflection_prompt import digest, fenced_after, max_edits, unfence

TOOL = "Skill"
HEADER = "# Skill optimization: reflect on triggering"
GENERIC = frozenset(["about", "after", "again", "also", "because", "before", "being", "could", "does", "doing", "done", "each", "every", "from", "have", "help", "helps", "into", "just", "like", "make", "many", "more", "most", "much", "need", "needs", "only", "other", "over", "please", "some", "such", "than", "that", "their", "them", "then", "there", "these", "they", "this", "those", "through", "under", "very", "want", "what", "when", "where", "which", "while", "with", "would", "your", "yours", "used", "using", "write", "writes", "draft", "drafts", "create", "give", "short", "work", "thing", "things", "request", "requests", "project", "document", "documents", "file", "files", "new", "the", "and", "for", "you", "can", "any", "all", "our", "out", "now", "how", "not", "use", "whenever", "skill", "skills"])
BROAD = "Use for any writing or editing request about a project's text."
_WORD = re.compile(r"[a-z0-9]+")
_LINE = re.compile(r"^- ([A-Za-z0-9_.-]+): (.*)$", re.MULTILINE)
_REQUEST = re.compile(r"^### (Request|Handled right) \d+: task (\S+) — should use the skill: (yes|no); used it: (yes|no)",
                      re.MULTILINE)
_FENCE = re.compile(r"^(`{3,})text\n(?:.*?\n)?\1$", re.MULTILINE | re.DOTALL)


def cues(text: str) -> set[str]:
    """The content words of ``text`` the simulated target matches on."""
    words = set(_WORD.findall(text.lower()))
    return {w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w
            for w in words if len(w) >= 4 and w not in GENERIC}


def chosen_skill(request_text: str, listing: dict[str, str]) -> str | None:
    """The skill the simulated target loads for ``request_text`` from ``listing`` (name →
    description), or ``None``: most shared cues wins, ties by listing order; a "Not for"
    sentence sharing a cue rules its skill out."""
    asked = cues(request_text)
    best, best_count = None, 0
    for name, description in listing.items():
        sentences = re.split(r"(?<=[.!?])\s+", description)
        excluded = set().union(*(cues(s) for s in sentences if s.lower().startswith("not for")))
        claimed = set().union(*(cues(s) for s in sentences if not s.lower().startswith("not for")))
        if asked & excluded:
            continue
        count = len(asked & claimed)
        if count > best_count:
            best, best_count = name, count
    return best


class CatalogueTarget:
    """The scripted-server policy of the target in a catalogue rollout."""

    def __call__(self, request: Any) -> ScriptedReply | str:
        loaded = [m for m in request.messages if m["role"] == "tool"]
        asked = next((m["content"] for m in request.messages if m["role"] == "user"), "")
        if loaded:
            return "Done, following the skill's instructions."
        listing = dict(_LINE.findall(request.system or ""))
        name = chosen_skill(asked if isinstance(asked, str) else "", listing)
        if name is None:
            return "Done, without any skill."
        return ScriptedReply(tool_calls=(ScriptedToolCall(TOOL, {"skill": name}),))


def offers_skill_tool(request: Any) -> bool:
    return any(t.get("name") == TOOL for t in getattr(request, "tools", None) or ())


def reflect_triggers(prompt: str, bad_every: int = 3) -> dict[str, Any]:
    """The simulated optimizer's answer to a trigger reflection (see the module docstring)."""
    description = fenced_after(prompt, "## Current description")
    if description is None:
        return {"analysis": "could not find the description in the prompt", "edits": []}
    requests = _requests(prompt)
    have = cues(description)
    leave_alone = set().union(*(c for wanted, _, c in requests if not wanted))
    must_trigger = set().union(*(c for wanted, _, c in requests if wanted))
    missing: Counter[str] = Counter()
    claimed: Counter[str] = Counter()
    for wanted, used, words in requests:
        if wanted and not used:
            missing.update(sorted(words - have - leave_alone))
        elif used and not wanted:
            claimed.update(sorted((words & have) - must_trigger))
    edits = []
    if missing:
        top = sorted(missing, key=lambda w: (-missing[w], -len(w), w))[:3]  # the most shared, then the most specific
        edits.append({"op": "append", "text": f"Use when the request is about {_join(top)}.",
                      "rationale": f"{sum(1 for w, u, _ in requests if w and not u)} missed requests are about "
                                   f"{_join(top)}, which the description does not mention."})
    if claimed:
        top = sorted(claimed, key=lambda w: (-claimed[w], -len(w), w))[:2]
        edits.append({"op": "append", "text": f"Not for requests about {_join(top)}.",
                      "rationale": f"requests about {_join(top)} used the skill although it is not for them."})
    if bad_every and digest(prompt) % bad_every == 0:
        edits = [{"op": "append", "text": BROAD, "rationale": "a broader description is found more often."}]
    return {"analysis": f"{len(requests)} requests read; {len(edits)} description edits proposed.",
            "edits": edits[: max_edits(prompt)]}


def _requests(prompt: str) -> list[tuple[bool, bool, set[str]]]:
    """(should trigger, did, cues of the request) of every request the prompt shows."""
    found = []
    for m in _REQUEST.finditer(prompt):
        body = prompt[m.end():]
        at = body.find("The request:")
        fence = _FENCE.search(body, at) if at >= 0 else None
        text = unfence(fence.group(0)) if fence else ""
        found.append((m.group(3) == "yes", m.group(4) == "yes", cues(text)))
    return found


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
