"""The optimizer's answer format: a JSON object ``{"analysis", "edits": [...]}``.

The contract is ``skillopt_ci/inputs/schemas/proposal.schema.json``. :func:`extract_json_object` finds
the object in a reply (a fenced ```json block, else the first top-level object in prose);
:func:`read_proposal` validates it and builds :class:`~skillopt_ci.core.edits.Edit` records. Every
problem raises :class:`ProposalError` with one short, specific message meant to be sent back to
the model (``edits[1].op: 'rewrite' is not one of append, insert_after, replace, delete``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from skillopt_ci.core.edits import OPS, Edit
from skillopt_ci.core.text import clip, cut
from skillopt_ci.inputs.yamlfile import format_path, schema_validator
from skillopt_ci.models.structured import ReplyFormat

SCHEMA = "proposal.schema.json"


def decoding_schema() -> dict[str, Any]:
    """The proposal schema in the form a provider can enforce while decoding: one variant per
    kind of edit (``anyOf``) with exactly its fields, instead of the ``if``/``then`` requirements
    of ``proposal.schema.json``, which grammar-based decoders (llama.cpp) and strict modes drop.
    A reply valid here is valid there; :func:`read_proposal` still checks it against the contract."""
    field = {"type": "string", "minLength": 1}

    def variant(ops: list[str], *fields: str) -> dict[str, Any]:
        properties = {"op": {"type": "string", "enum": ops}, **{f: field for f in fields}, "rationale": field}
        return {"type": "object", "additionalProperties": False, "required": list(properties),
                "properties": properties}

    edit = {"anyOf": [variant(["append"], "text"), variant(["insert_after", "replace"], "anchor", "text"),
                      variant(["delete"], "anchor")]}
    return {"type": "object", "additionalProperties": False, "required": ["analysis", "edits"],
            "properties": {"analysis": {"type": "string"}, "edits": {"type": "array", "items": edit}}}


PROPOSAL_REPLY = ReplyFormat("skill_proposal", decoding_schema())
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(\w*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)


class ProposalError(ValueError):
    """An optimizer reply that cannot be used; ``message`` is short and names the problem."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ParsedProposal:
    analysis: str
    edits: tuple[Edit, ...]
    dropped: int = 0  # edits beyond the limit, cut off


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object of a reply: the first fenced ``json`` block (or unlabelled fenced block
    holding an object) that parses, else the first ``{...}`` in the text that parses as an
    object. Raises :class:`ProposalError` when there is none."""
    fenced_error = None
    for m in _FENCED.finditer(text):
        label, body = m.group(2).lower(), m.group(3)
        if label not in ("json", "") or (label == "" and not body.lstrip().startswith("{")):
            continue
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            fenced_error = fenced_error or f"the fenced JSON block is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if isinstance(value, dict):
            return value
        fenced_error = fenced_error or f"the fenced JSON block holds a {_kind(value)}, not an object"
    decoder = json.JSONDecoder()
    first_error = None
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError as exc:
            first_error = first_error or f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if isinstance(value, dict):
            return value
    if fenced_error:
        raise ProposalError(fenced_error)
    if first_error:
        raise ProposalError(f"no valid JSON object found in the reply ({first_error})")
    raise ProposalError("no JSON object found in the reply")


def read_proposal(text: str, max_edits: int, *, source: str = "failure", part: str = "body") -> ParsedProposal:
    """Validate a reply against the proposal schema and build its edits (``support`` 1,
    ``source`` as given). Edits beyond ``max_edits`` are dropped, in order; that is not an
    error. ``anchor`` is kept exactly as written (it must match the skill byte for byte)."""
    data = extract_json_object(text)
    problem = first_problem(data)
    if problem:
        raise ProposalError(problem)
    raw = data["edits"]
    keep = raw[: max(max_edits, 0)]
    edits = tuple(
        Edit(
            op=item["op"],
            text="" if item["op"] == "delete" else item.get("text", ""),
            anchor="" if item["op"] == "append" else item.get("anchor", ""),
            rationale=item["rationale"].strip(),
            support=1,
            source=source,
            part=part,
        )
        for item in keep
    )
    return ParsedProposal(analysis=data["analysis"].strip(), edits=edits, dropped=len(raw) - len(keep))


def parse_proposal(text: str, max_edits: int, *, source: str = "failure") -> list[Edit]:
    """The edits of a reply, at most ``max_edits``; raises :class:`ProposalError`."""
    return list(read_proposal(text, max_edits, source=source).edits)


def first_problem(data: Any) -> str | None:
    """The first schema violation of ``data``, in document order, as one short sentence."""
    errors = sorted(schema_validator(SCHEMA).iter_errors(data), key=_path_key)
    if not errors:
        return None
    err = errors[0]
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return _describe(err) + more


def _path_key(err: Any) -> list[tuple[str, Any]]:
    return [(type(part).__name__, part) for part in err.absolute_path]


def _describe(err: Any) -> str:
    path = format_path(tuple(err.absolute_path))
    where = f"{path}: " if path else ""
    v, value = err.validator, err.instance
    if v == "enum" and list(err.validator_value) == list(OPS):
        return f"{where}{_short(value)} is not one of {', '.join(OPS)}"
    if v == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        op = value.get("op") if isinstance(value, dict) else None
        cond = f" for op {op}" if op in OPS and missing in ("anchor", "text") else ""
        return f"{where}{missing!r} is required{cond}"
    if v == "type":
        return f"{where}expected {err.validator_value}, got {_kind(value)}"
    if v == "additionalProperties":
        extra = sorted(set(value) - set(err.schema.get("properties", {})))
        allowed = ", ".join(err.schema.get("properties", {}))
        return f"{where}unknown key {', '.join(map(repr, extra))}; allowed keys: {allowed}"
    if v == "minLength":
        return f"{where}must not be empty"
    return f"{where}{cut(err.message, 160)}"


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _short(value: Any) -> str:
    return clip(repr(value), 40)  # redacted before the cut: no prefix of a key the model echoed
