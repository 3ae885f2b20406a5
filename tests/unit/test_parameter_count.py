"""No function in buildctl/ takes more than 8 parameters (issue 37): a longer list beside an option object
made for it (VerifyOptions, BuildOptions, ContainerSpec) is passed as that object. Every parameter counts
but self/cls, keyword-only ones too; *args and **kwargs count one each."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
MAX_PARAMETERS = 8


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def long_parameter_lists() -> dict[str, int]:
    """{module:line function: its parameter count} for every function over MAX_PARAMETERS."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameter_count(node) > MAX_PARAMETERS:
                found[f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}"] = parameter_count(node)
    return found


def test_the_count_counts_every_kind_of_parameter():
    fn = ast.parse("def f(self, a, /, b, *args, c, d=1, **kw): pass").body[0]
    assert parameter_count(fn) == 6


def test_no_function_in_buildctl_takes_more_than_8_parameters():
    assert long_parameter_lists() == {}, "fix: pass the option object whole, or group the values in a frozen record"
