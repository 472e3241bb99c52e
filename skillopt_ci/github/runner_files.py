"""The runner's files and workflow commands: step outputs, the job summary, annotations, masks.

- ``GITHUB_OUTPUT``: ``name<<DELIM`` … ``DELIM`` with a random delimiter that no value line
  equals (so a value can never end the block early or inject another output).
- ``GITHUB_STEP_SUMMARY``: appended, and kept under GitHub's 1 MiB per step.
- ``GITHUB_PATH``: one folder per line, put on PATH for the later steps of the job.
- Workflow commands escape ``%``, CR and LF in messages, and also ``:`` and ``,`` in properties.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from skillopt_ci.core.redact import redact, write_command

SUMMARY_LIMIT = 1024 * 1024 - 1024  # 1 MiB per step, with room for what others append


def write_outputs(path: Path | None, values: Mapping[str, str]) -> None:
    if path is None:
        return
    chunks = []
    for name, value in values.items():
        lines = str(value).splitlines() or [""]
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        while delimiter in lines:
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        chunks.append(f"{name}<<{delimiter}\n" + "\n".join(lines) + f"\n{delimiter}\n")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(redact("".join(chunks)))


def append_summary(path: Path | None, markdown: str) -> None:
    if path is None:
        return
    used = path.stat().st_size if path.exists() else 0
    room = SUMMARY_LIMIT - used
    if room <= 0:
        return
    data = redact(markdown).encode("utf-8")
    if len(data) > room:
        note = "\n\n_Summary truncated at GitHub's 1 MiB limit; the full report is in the run artifact._\n"
        data = data[: room - len(note.encode())].decode("utf-8", "ignore").encode("utf-8") + note.encode()
    with open(path, "ab") as fh:
        fh.write(data + b"\n")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, *, stream: TextIO | None = None, **properties: str | int | None) -> None:
    """Emit ``::name prop=value,…::message`` (e.g. ``error``, ``warning``, ``notice``)."""
    props = ",".join(f"{k}={_escape_property(str(v))}" for k, v in properties.items() if v is not None)
    out = stream or sys.stdout
    write_command(out, f"::{name}{' ' + props if props else ''}::{_escape_data(message)}\n")
    out.flush()


def mask(value: str, *, stream: TextIO | None = None) -> None:
    """Ask the runner to hide ``value`` in every later log line."""
    if value:
        command("add-mask", value, stream=stream)


def add_path(path_file: Path | None, folder: Path) -> bool:
    """Append ``folder`` to ``GITHUB_PATH`` so the job's later steps find its programs; False
    outside Actions (no file). A folder with a line break could inject a second entry: refused."""
    if path_file is None:
        return False
    text = str(folder)
    if "\n" in text or "\r" in text:
        raise ValueError(f"refusing to add a path with a line break to GITHUB_PATH: {text!r}")
    with open(path_file, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return True
