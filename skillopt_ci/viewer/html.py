"""The viewer's HTML: the self-contained report of one run, and the live viewer's page.

Both are the same app (``static/app.js`` and ``static/app.css``, inlined). A report embeds the
run's bundle as ``<script type="application/json" id="bundle">`` with every ``<`` written as
``\\u003c``, so no string in the data can close the tag or open another one. The
Content-Security-Policy allows exactly one script — the app, by its SHA-256 — plus inline styles
and ``data:`` images: an injected inline handler or ``<script>`` could not run even if the app
had a bug, and a report can make no network request at all. (A big bundle is embedded gzipped:
see :func:`embed_json`.) The live page has no embedded data; it fetches ``/api/runs`` and
``/api/run?id=`` from its own origin (``connect-src 'self'``).

The hash is computed from the very text that is inlined, so the policy and the script cannot
drift apart.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import re
from importlib import resources
from typing import Any

from skillopt_ci.core.redact import redact

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
PLAIN_LIMIT = 3_000_000  # characters of bundle JSON embedded as is; above, gzip + base64


def _static(name: str) -> str:
    text = (resources.files(__package__) / "static" / name).read_text(encoding="utf-8")
    # The HTML parser turns CRLF into LF before the browser hashes the script: hash what it sees.
    return text.replace("\r\n", "\n")


APP_JS = _static("app.js")
APP_CSS = _static("app.css")
if any(tag in APP_JS.lower() for tag in ("<script", "</script", "<!--")) or "</style" in APP_CSS.lower():
    raise RuntimeError("app.js must not contain <script, </script or <!-- (nor app.css </style): they are inlined")

SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(APP_JS.encode("utf-8")).digest()).decode("ascii")
REPORT_CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src '{SCRIPT_HASH}'"
LIVE_CSP = f"default-src 'none'; connect-src 'self'; style-src 'unsafe-inline'; img-src data:; script-src '{SCRIPT_HASH}'"


def embed_json(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script type="application/json">`` element.

    Up to :data:`PLAIN_LIMIT` characters it is the JSON itself; a bigger bundle (thousands of
    results) is embedded as ``{"encoding": "gzip+base64", "data": "…"}`` — its JSON gzipped
    (deterministically) and base64-encoded — which the app inflates in the browser, so that a
    report of 5,000 results stays a few megabytes."""
    # Redacted here as well as when the file is written: a gzipped bundle would hide a secret.
    text = redact(json.dumps(data, ensure_ascii=False, separators=(",", ":"))).replace("<", "\\u003c")
    # A lone surrogate (from a "\\ud800" escape in a results file) cannot be written as UTF-8.
    text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if len(text) <= PLAIN_LIMIT:
        return text
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")
    return json.dumps({"encoding": "gzip+base64", "data": packed})


def _page(title: str, csp: str, body: str) -> str:
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{html.escape(csp, quote=False)}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta name=\"referrer\" content=\"no-referrer\">\n"
        f"<title>{html.escape(redact(title))}</title>\n"
        "<link rel=\"icon\" href=\"data:,\">\n"
        f"<style>\n{APP_CSS}</style>\n</head>\n<body>\n"
        "<noscript>This page needs JavaScript (it runs locally and fetches nothing from the internet).</noscript>\n"
        f"{body}<script>{APP_JS}</script>\n</body>\n</html>\n"
    )


def render_report(bundle: dict[str, Any]) -> str:
    """The whole self-contained HTML document for one run's bundle (see :mod:`bundle`)."""
    data = f"<script type=\"application/json\" id=\"bundle\">{embed_json(bundle)}</script>\n"
    return _page(f"skillopt-ci · {bundle.get('title') or bundle.get('kind', 'run')}", REPORT_CSP, data)


def render_live_page() -> str:
    """The live viewer's page: the same app, no data; it fetches the runs from its own origin."""
    return _page("skillopt-ci · runs", LIVE_CSP, "")
