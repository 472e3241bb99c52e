"""DocVQA (``lmms-lab/DocVQA``, config ``DocVQA``, validation split) as a chat suite with page images.

``--from`` is either the dataset download — parquet files (``DocVQA/validation-*.parquet``, columns
``questionId``, ``question``, ``question_types``, ``docId``, ``ucsf_document_id``,
``ucsf_document_page_no``, ``answers``, ``data_split``, ``image`` = ``{bytes, path}``) — or the
reference system's materialised layout: a CSV per split (``questionId``, ``question``, ``answer``
as a Python-literal list or a plain string, ``image_path``, ``topic``) with the page images beside
it (a question may end in ``document_path: <image path>``). Parquet files named ``test*`` (no
answers) and other configs next to a ``DocVQA/`` folder are not read.

Each manifest question's page image is written into the suite as ``images/q<qid>_d<docid>.<ext>``
and sent with the question as an image part (one chat call); the golds are its answers. Scorer
``docvqa``: ANLS (soft), ANLS >= 0.999 (hard).
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path, PurePosixPath
from typing import Any

from skillopt_ci.benchmarks.draft import SuiteDraft, chat_suite
from skillopt_ci.benchmarks.hf_rows import RowScan, data_files
from skillopt_ci.benchmarks.manifest import Manifest, ManifestItem, pick
from skillopt_ci.benchmarks.packs.docvqa import PACK
from skillopt_ci.core.errors import InputError

COLUMNS = ("questionId", "question", "question_types", "docId", "ucsf_document_id", "ucsf_document_page_no",
           "answers", "image")
DOC_PATH = "document_path:"
MAGIC = {b"\x89PNG\r\n\x1a\n": ".png", b"\xff\xd8\xff": ".jpg", b"GIF87a": ".gif", b"GIF89a": ".gif"}
PROMPT = """Answer the question about the document page in the image. Ground the answer in what the page \
shows and give the shortest exact span of text from the page that answers it.

Question: {{ input }}

Return the final answer inside <answer></answer>.
"""


def image_suffix(data: bytes) -> str | None:
    """The file extension of PNG, JPEG, GIF or WebP bytes, else ``None``."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return next((ext for magic, ext in MAGIC.items() if data.startswith(magic)), None)


def parse_answers(value: Any, where: str) -> list[str]:
    """The golds of a row: a list, a Python-literal list string (``"['1/8/93']"``) or one string."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise InputError(f"answer {value!r:.60} is not a Python list literal", where=where) from None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(a, str) for a in value):
        raise InputError(f"answers must be a non-empty list of strings, got {value!r:.60}", where=where)
    return list(value)


def _parquet_files(source: Path) -> list[Path]:
    root = source / "DocVQA" if (source / "DocVQA").is_dir() else source
    return [p for p in data_files(root, (".parquet",)) if not p.name.startswith("test")]


def _parquet_rows(files: list[Path], manifest: Manifest, counter: list[int]):
    scan = RowScan(PACK.name, "questionId", COLUMNS, manifest.ids())
    for row_id, row, where in scan.rows(files):
        image = row["image"] if isinstance(row["image"], dict) else {}
        if not isinstance(image.get("bytes"), (bytes, bytearray)):
            raise InputError(f"question {row_id}: the image column has no bytes", where=where)
        page = {"question": row["question"], "answers": parse_answers(row["answers"], where),
                "docId": row["docId"], "topic": "|".join(row["question_types"] or []),
                "ucsf_document_id": row["ucsf_document_id"], "ucsf_document_page_no": row["ucsf_document_page_no"],
                "image": bytes(image["bytes"]), "where": where}
        yield row_id, page, where
    counter[0] = scan.total


def _csv_rows(files: list[Path], source: Path, manifest: Manifest, counter: list[int]):
    wanted = manifest.ids()
    for path in files:
        try:
            with path.open(newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise InputError(f"cannot read CSV: {exc}", where=str(path)) from None
        for index, row in enumerate(rows):
            where = f"{path} row {index + 2}"  # the header is line 1
            answer = "answer" if "answer" in row else "answers"
            missing = [c for c in ("questionId", "question", answer) if c not in row]
            if missing:
                raise InputError(f"no {', '.join(missing)} column", where=str(path), hint=PACK.data_help)
            counter[0] += 1
            if row["questionId"] not in wanted:
                continue
            question, marked = _split_marker(row["question"])
            image = _csv_image(row.get("image_path") or marked, path, source, where)
            yield row["questionId"], {"question": question, "answers": parse_answers(row[answer], where),
                                      "docId": row.get("docId"), "topic": row.get("topic", ""),
                                      "image": image, "where": where}, where


def _split_marker(question: str) -> tuple[str, str]:
    """The question without a trailing ``document_path:`` marker, and the path it gives."""
    at = question.rfind(DOC_PATH)
    if at == -1:
        return question, ""
    return question[:at].rstrip(), question[at + len(DOC_PATH):].strip()


def _csv_image(relative: str, csv_file: Path, source: Path, where: str) -> bytes:
    if not relative:
        raise InputError("the row names no image (image_path, or document_path: in the question)", where=where)
    bases = [source, csv_file.parent, *csv_file.parents]
    for base in dict.fromkeys(bases):
        candidate = base / relative
        if candidate.is_file():
            return candidate.read_bytes()
    raise InputError(f"image {relative!r} not found next to {source} or the CSV", where=where)


def _task(item: ManifestItem, page: dict[str, Any]) -> tuple[dict[str, Any], str, bytes]:
    suffix = image_suffix(page["image"])
    if suffix is None:
        raise InputError(f"question {item.id}: the page image is not PNG, JPEG, GIF or WebP", where=page["where"])
    want_doc = item.fields.get("docId")
    if want_doc is not None and page["docId"] is not None and str(page["docId"]) != str(want_doc):
        raise InputError(f"question {item.id}: docId {page['docId']} in the data but {want_doc} in the manifest "
                         f"({item.where})", where=page["where"], hint="import the dataset revision the manifest names")
    doc = want_doc if want_doc is not None else page["docId"]
    stem = PurePosixPath(str(item.fields.get("image_path") or f"q{item.id}_d{doc}")).stem
    name = f"images/{stem}{suffix}"
    meta = {k: page[k] for k in ("ucsf_document_id", "ucsf_document_page_no") if page.get(k) is not None}
    record = {"id": item.id, "input": page["question"].strip(), "images": [name], "expected": page["answers"],
              "metadata": {"docId": str(doc), "topic": page["topic"] or item.fields.get("topic", ""), **meta}}
    return record, name, page["image"]


def read(source: Path, manifest: Manifest) -> SuiteDraft:
    counter = [0]
    parquet = _parquet_files(source) if source.is_dir() or source.suffix == ".parquet" else []
    if parquet:
        rows, kind = _parquet_rows(parquet, manifest, counter), f"{len(parquet)} parquet file(s)"
    else:
        tables = data_files(source, (".csv",))
        if not tables:
            raise InputError("no DocVQA parquet or CSV files here", where=str(source), hint=PACK.data_help)
        rows, kind = _csv_rows(tables, source, manifest, counter), f"{len(tables)} CSV file(s)"
    picked = pick(manifest, rows, str(source))
    draft = SuiteDraft(name=PACK.name, suite=chat_suite(
        "DocVQA: answer a question about a scanned document page (one chat call with the image).", PROMPT, "docvqa"),
        tasks={})
    for split, pages in picked.items():
        draft.tasks[split] = []
        for item, page in zip(manifest.splits[split], pages, strict=True):
            record, name, data = _task(item, page)
            draft.tasks[split].append(record)
            draft.files[name] = data
    size = sum(map(len, draft.files.values()))
    draft.notes.append(f"{len(manifest.ids()):,} of {counter[0]:,} questions used ({kind}); "
                       f"{len(draft.files):,} page images ({size / 1e6:.1f} MB) written into the suite")
    return draft
