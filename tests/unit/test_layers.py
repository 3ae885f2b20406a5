"""The import graph shows the flow (issue 21): every import of buildctl, at module level, inside a function
or under TYPE_CHECKING, goes from a folder to one below it, the container-side files import nothing of
buildctl, and no two modules import each other, directly or round a longer cycle."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from package_ast import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
# Lowest first: what a folder may import is what stands before it.
LAYERS = ("errors", "urls", "git_env", "terminal_text", "ui", "archive", "secrets", "settings", "in_container", "recipe", "render",
          "engine", "store", "failure", "verify", "pipeline", "host", "scaleout", "bisect", "cli")
TOP_MODULES = {"__init__", "errors", "urls", "terminal_text", "ui", "archive", "secrets", "git_env", "settings"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imports() -> dict[str, set[str]]:
    """{module: the buildctl modules it imports} (`from buildctl import x` names module x); parsed once for
    the tests of this file, which only read it."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        out = graph.setdefault(name, set())
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "buildctl":
                assert node.level == 0, f"{path}:{node.lineno}: a relative import"
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    out.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.split(".")[0] == "buildctl")
        out.discard(name)
    return graph


def folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_top_of_the_package_holds_only_the_stage_folders_and_the_shared_modules():
    loose = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert set(loose) <= TOP_MODULES, loose
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} == \
        set(LAYERS) - TOP_MODULES


def test_every_import_goes_down_the_stages():
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = sorted(f"{m} -> {t}" for m, targets in imports().items() for t in targets
                    if folder(t) in rank and folder(m) in rank and rank[folder(t)] > rank[folder(m)])
    assert upward == []


def test_the_container_side_imports_nothing_of_buildctl():
    graph = imports()
    assert {m: t for m, t in graph.items() if m.startswith("buildctl.in_container") and t} == {}


def test_no_import_cycle():
    graph = imports()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[node] = 2

    for start in sorted(graph):
        if start not in seen:
            visit(start, [start])
    assert cycles == []


# The compatibility tables are data: a row per fact, and they grow with the releases.
DATA_TABLES = {"recipe/compat.py"}
MAX_LINES = 400


def test_no_module_over_400_lines_but_the_data_tables():
    """A module that outgrows 400 lines holds two jobs: split it where the jobs part (issue 21)."""
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) <= DATA_TABLES, long
