"""Where the tests find the checkout and their own data, wherever a test module sits."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
