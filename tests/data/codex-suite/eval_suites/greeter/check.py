"""Passes when answer.txt holds a greeting in the house style: upper case, ending with "!"."""

import sys
from pathlib import Path

answer = Path("answer.txt")
if not answer.is_file():
    sys.exit("answer.txt was not written")
text = answer.read_text().strip()
if not text or text != text.upper() or not text.endswith("!"):
    sys.exit(f"not in the house style (upper case, ending with '!'): {text!r}")
print("ok:", text)
