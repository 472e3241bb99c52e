"""A Codex project (``tests/data/codex-suite``) scored by a ``verify`` command that also fails when
any workspace file holds the API key."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from helpers.paths import DATA

SUITE = DATA / "codex-suite"


SKILL = "skills/greeter/SKILL.md"


KEY = "sk-codex-e2e-" + "DISTINCTIVE0123456789"


# check.py also fails when any workspace file holds the key (assembled so check.py itself does not).
KEY_PROBE = f"""
import os as _os
_key = {KEY[:10]!r} + {KEY[10:]!r}
for _dir, _, _names in _os.walk("."):
    for _name in _names:
        with open(_os.path.join(_dir, _name), "rb") as _f:
            if _key.encode() in _f.read():
                sys.exit("the API key is in " + _os.path.join(_dir, _name))
"""


def codex_project(root: Path, base_url: str, binary: Path) -> Path:
    shutil.copytree(SUITE, root)
    check = root / "eval_suites/greeter/check.py"
    check.write_text(check.read_text().replace('print("ok:", text)', KEY_PROBE + 'print("ok:", text)'))
    suite_file = root / "eval_suites/greeter/suite.yaml"
    suite = yaml.safe_load(suite_file.read_text())
    suite["environment"]["binary"] = str(binary)
    suite_file.write_text(yaml.safe_dump(suite, sort_keys=False))
    config = {
        "version": 1,
        "models": {
            "target": {"provider": "openai", "api": "responses", "model": "gpt-5.5", "base_url": base_url,
                       "max_retries": 0},
            "optimizer": {"provider": "openai-compatible", "model": "sim-optimizer-1", "base_url": base_url},
        },
        "skills": [{"path": SKILL, "suite": "eval_suites/greeter"}],
        "concurrency": 2,
        "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"},
        "pricing": {"gpt-5.5": {"input": 1.0, "output": 2.0}},
        "train": {"epochs": 1, "batch_size": 3},
    }
    (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (root / ".gitignore").write_text(".skillopt/\n")
    return root
