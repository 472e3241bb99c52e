"""DocVQA fixture: small document pages drawn with Pillow, with rows in the ``lmms-lab/DocVQA``
parquet schema (or the per-split CSV layout with ``fmt="csv"``), and a simulated reader.

Each page is a short letter with a date, an amount and an addressee, drawn as text; the same
fields ride in the PNG's ``tEXt`` chunk so the simulated reader can "read" the page from the image
bytes it receives. By the question's place in its split it asks for the date (the reader answers
it exactly), the total (the reader drops a trailing zero: ANLS 0.83, hard 0) or the addressee
(the reader gives up: 0).
"""

from __future__ import annotations

import csv
import io
import json
import struct
from pathlib import Path

from skillopt_ci.benchmarks.manifest import Manifest, items_or_first
from skillopt_ci.sim.protocols import ScriptedRequest

PER_SPLIT = 3
NAMES = ("Dr. R. Keller", "Ms. A. Brandt", "Mr. J. Okafor", "Prof. L. Moreau", "Dr. S. Ito")
QUESTIONS = (("What is the date of the letter?", "date"), ("What is the total amount?", "total"),
             ("To whom is the letter addressed?", "to"))


def page_fields(n: int) -> dict[str, str]:
    return {"date": f"{1 + n % 12}/{1 + n % 28}/9{n % 10}", "total": f"${10 + n}.50", "to": NAMES[n % len(NAMES)]}


def page_png(fields: dict[str, str]) -> bytes:
    """A 320x160 white page with the letter's lines in black, the fields also in a tEXt chunk."""
    from PIL import Image, ImageDraw
    from PIL.PngImagePlugin import PngInfo

    image = Image.new("RGB", (320, 160), "white")
    draw = ImageDraw.Draw(image)
    lines = ["ACME TOBACCO RESEARCH", f"Date: {fields['date']}", f"To: {fields['to']}", f"Total: {fields['total']}"]
    for i, line in enumerate(lines):
        draw.text((16, 16 + 32 * i), line, fill="black")
    info = PngInfo()
    info.add_text("page", json.dumps(fields))
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def _rows(manifest: Manifest | None) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    n = 0
    for split, items in items_or_first("docvqa", manifest, PER_SPLIT).items():
        out[split] = []
        for place, entry in enumerate(items):
            fields = page_fields(n)
            question, key = QUESTIONS[place % len(QUESTIONS)]
            doc = entry.fields.get("docId", str(n))
            out[split].append({
                "questionId": entry.id, "question": question, "question_types": ["form"], "docId": int(doc),
                "ucsf_document_id": f"fx{n:04d}", "ucsf_document_page_no": "1", "answers": [fields[key]],
                "data_split": "val", "image": {"bytes": page_png(fields), "path": None},
                "image_path": entry.fields.get("image_path", f"data/docvqa_images/q{entry.id}_d{doc}.png"),
            })
            n += 1
    return out


def write_fixture(dest: Path, manifest: Manifest | None = None, fmt: str = "parquet") -> Path:
    """One question (and page) per manifest id, or a few per published split; return the folder to
    import. ``parquet``: ``docvqa/DocVQA/validation-00000-of-00001.parquet``; ``csv``:
    ``docvqa/{train,val,test}/docvqa_<split>.csv`` with the pages under ``docvqa/data/docvqa_images/``."""
    root = dest / "docvqa"
    rows = _rows(manifest)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        (root / "DocVQA").mkdir(parents=True, exist_ok=True)
        flat = [{k: v for k, v in r.items() if k != "image_path"} for split in rows.values() for r in split]
        pq.write_table(pa.Table.from_pylist(flat), root / "DocVQA" / "validation-00000-of-00001.parquet")
        return root
    for split, split_rows in rows.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        with (root / split / f"docvqa_{split}.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["questionId", "question", "answer", "image_path", "topic", "docId"])
            for r in split_rows:
                image = root / r["image_path"]
                image.parent.mkdir(parents=True, exist_ok=True)
                image.write_bytes(r["image"]["bytes"])
                writer.writerow([r["questionId"], r["question"], repr(r["answers"]), r["image_path"], "form", r["docId"]])
    return root


def png_text(data: bytes) -> dict[str, str]:
    """The tEXt chunks of PNG bytes as {keyword: text}."""
    found, at = {}, 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"tEXt":
            key, _, text = data[at + 8:at + 8 + length].partition(b"\0")
            found[key.decode("latin-1")] = text.decode("latin-1")
        at += 12 + length
    return found


def policy(request: ScriptedRequest) -> str:
    images = request.images
    fields = json.loads(png_text(images[0]["bytes"]).get("page", "{}")) if images else {}
    prompt = request.last_user
    if "date" in prompt and "date" in fields:
        return f"The letter is dated {fields['date']}.\n<answer>{fields['date']}</answer>"
    if "total" in prompt and "total" in fields:
        return f"<answer>{fields['total'].rstrip('0')}</answer>"
    return "I cannot read the addressee.\n<answer>unknown</answer>"
