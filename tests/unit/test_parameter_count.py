"""No function in buildctl/ takes more than 8 parameters (issue 37): a longer list beside an option object
made for it (VerifyOptions, BuildOptions, ContainerSpec) is passed as that object. Every parameter counts
but self/cls, keyword-only ones too; *args and **kwargs count one each."""

from __future__ import annotations

import ast
from pathlib import Path

from package_ast import parsed

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
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameter_count(node) > MAX_PARAMETERS:
                found[f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}"] = parameter_count(node)
    return found


def test_the_count_counts_every_kind_of_parameter():
    fn = ast.parse("def f(self, a, /, b, *args, c, d=1, **kw): pass").body[0]
    assert parameter_count(fn) == 6


def test_no_function_in_buildctl_takes_more_than_8_parameters():
    assert long_parameter_lists() == {}, "fix: pass the option object whole, or group the values in a frozen record"


# --- issue 42: short functions, option objects read where they are used -----------------------------------

MAX_LINES = 80
MAX_UNPACKED = 4


def unpacked_fields(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, int]:
    """{parameter: how many of its fields the function copies into locals} (`x = options.x`, also in a tuple
    assignment), for the parameters that have more than MAX_UNPACKED copied."""
    params = {p.arg for p in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)} - {"self", "cls"}
    fields: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign):
            continue
        pairs = []
        for target in node.targets:
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs += zip(target.elts, node.value.elts, strict=False)  # `a, b = *x`: as many as pair
            else:
                pairs.append((target, node.value))
        for target, value in pairs:
            if isinstance(target, ast.Name) and isinstance(value, ast.Attribute) \
                    and isinstance(value.value, ast.Name) and value.value.id in params:
                fields.setdefault(value.value.id, set()).add(value.attr)
    return {p: len(f) for p, f in fields.items() if len(f) > MAX_UNPACKED}


def functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}", node))
    return found


def test_the_checks_see_a_long_function_and_an_unpacked_option_object():
    body = "".join(f"    x{i} = options.f{i}\n" for i in range(5)) + "    y, z = spec.a, spec.b\n"
    fn = ast.parse(f"def f(options, spec):\n{body}" + "    pass\n" * 80).body[0]
    assert unpacked_fields(fn) == {"options": 5}
    assert fn.end_lineno - fn.lineno + 1 > MAX_LINES


def test_no_function_in_buildctl_is_longer_than_80_lines():
    long = {name: fn.end_lineno - fn.lineno + 1 for name, fn in functions() if fn.end_lineno - fn.lineno + 1 > MAX_LINES}
    assert long == {}, "fix: split it where its steps are, each part named for what it does"


def test_no_function_in_buildctl_unpacks_more_than_4_fields_of_an_option_object():
    unpacking = {name: found for name, fn in functions() if (found := unpacked_fields(fn))}
    assert unpacking == {}, "fix: read the option object's field where it is used (options.x), not into a local"
