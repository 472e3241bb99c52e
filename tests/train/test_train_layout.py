"""The training package stays readable: no module over 400 lines, no function over 60."""

from __future__ import annotations

import ast
from pathlib import Path

import skillopt_ci.train

TRAIN = Path(skillopt_ci.train.__file__).parent


def test_no_training_module_over_400_lines_and_no_function_over_60():
    too_long = []
    for path in sorted(TRAIN.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if len(source.splitlines()) > 400:
            too_long.append(f"{path.name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 60:
                    too_long.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []
