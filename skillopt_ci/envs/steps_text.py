"""A trajectory as bounded text: what the optimizer's reflection reads of a rollout. Pure.

One block per step (``[model]``, ``[tool_call read_file]``, ``[tool_result read_file]``,
``[tool_result grep · error]``, ``[error]``…), then the final answer or what ended the rollout.
Past ``limit`` characters the middle goes: the start (how the agent set out) and the end (how it
finished) are kept, with a line saying how many characters and steps were cut.
"""

from __future__ import annotations

from collections.abc import Sequence

from skillopt_ci.core.trajectory import Step

STEP_CHARS = 4_000  # one step's share at most, so a single huge tool result cannot fill the rendering


def step_text(step: Step) -> str:
    label = step.kind if step.name is None else f"{step.kind} {step.name}"
    if step.is_error:
        label += " · error"
    body = (step.arguments or "") if step.kind == "tool_call" else step.text
    if step.images:
        body = f"{body}\n(images: {', '.join(step.images)})".lstrip("\n")
    if len(body) > STEP_CHARS:
        body = f"{body[:STEP_CHARS]}… [{len(body) - STEP_CHARS} characters cut]"
    return f"[{label}] {body}"


def render_steps(steps: Sequence[Step], ending: str, limit: int) -> str:
    """``steps`` and the ``ending`` line, within ``limit`` characters (start and end kept)."""
    blocks = [step_text(s) for s in steps] + [ending]
    full = "\n".join(blocks)
    if len(full) <= limit:
        return full
    budget = max(limit - 80, 0)
    head: list[str] = []
    tail: list[str] = []
    used = 0
    # alternate taking blocks from the end and from the start, so both stay whole where they can
    lo, hi = 0, len(blocks) - 1
    take_end = True
    while lo <= hi:
        block = blocks[hi] if take_end else blocks[lo]
        if used + len(block) + 1 > budget:
            break
        used += len(block) + 1
        if take_end:
            tail.insert(0, block)
            hi -= 1
        else:
            head.append(block)
            lo += 1
        take_end = not take_end
    cut = blocks[lo:hi + 1]
    room = budget - used
    if room > 200 and cut:  # show as much of the first cut block as still fits
        head.append(cut[0][: room - 40] + " …")
    chars = sum(len(b) + 1 for b in cut)
    note = f"… [{len(cut)} step(s), about {chars} characters cut from the middle] …"
    return "\n".join([*head, note, *tail])


def render_transcript(prompt: str, steps: tuple[Step, ...] | list[Step], limit: int) -> str:
    """An interactive episode as text for the optimizer; past ``limit`` characters the middle is
    cut (the start shows the task and the world, the end how the episode finished)."""
    lines = [f"[task]\n{prompt.strip()}"]
    for step in steps:
        head = step.kind
        if step.kind == "observation" and step.reward:
            head += f" reward={step.reward:g}"
        if step.done:
            head += " done"
        lines.append(f"[{head}] {step.text}" if step.kind == "action" else f"[{head}]\n{step.text}")
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    note_len = 80
    keep = max(limit - note_len, 0)
    head_chars, tail_chars = keep // 2, keep - keep // 2
    cut = len(text) - head_chars - tail_chars
    return f"{text[:head_chars]}\n… [{cut} characters of the trajectory cut] …\n{text[len(text) - tail_chars:]}"
