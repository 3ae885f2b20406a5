"""The environment is read once, by the CLI (issues 37, 42): os.environ and os.getenv only in the CLI
(buildctl/cli/, tasks.py outside the package, and a module's `if __name__ == "__main__":` block: its own command
line) and the container side (buildctl/in_container/, which runs in the containers and imports nothing of
buildctl). The CLI hands it down as a mapping: Settings keep
the one they were built from (`Settings.from_env(os.environ, ...)`; `environ()`, `docker_host`, `cache_dir`,
...), and library code takes a value from the settings it is handed, or a mapping, or a parameter: the
artifacts root and the engine objects' namespace too (`BuildOptions.artifacts_root`, `.namespace`; issue 42
removed settings.py's last function that read them itself). settings.py is checked as every library module:
it reads the environment nowhere."""

from __future__ import annotations

import ast
from pathlib import Path

from package_ast import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
MAY_READ = ("cli/", "in_container/")


def _is_main_block(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`: a module's command line (python -m ...), where a process starts, as the CLI."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Compare) \
        and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__" \
        and [type(c).__name__ for c in node.test.comparators] == ["Constant"] \
        and node.test.comparators[0].value == "__main__"


def environment_reads(path: Path) -> list[int]:
    """The lines of `path` that read the environment: os.environ, os.getenv, or either imported by name;
    none in the module's `__main__` block (its command line)."""
    tree = parsed(path)
    skipped = {id(n) for f in tree.body if _is_main_block(f) for n in ast.walk(f)}
    lines = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb", "getenvb") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" \
                and any(a.name in ("environ", "getenv", "environb", "getenvb") for a in node.names):
            lines.append(node.lineno)
    return lines


def test_the_check_sees_every_way_of_reading_it(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom os import getenv\na = os.environ['X']\nb = os.getenv('Y')\n"
                 "def environ():\n    return dict(os.environ)\n"
                 "if __name__ == '__main__':\n    print(os.environ)\nif __name__ == 'x':\n    print(os.environ)\n")
    assert environment_reads(f) == [2, 3, 4, 6, 10]


def test_a_settings_function_that_reads_the_process_environment_is_seen(tmp_path):
    """settings.py as it is, with a module function that reads os.environ itself (as from_environment did)."""
    f = tmp_path / "settings.py"
    text = (PACKAGE / "settings.py").read_text()
    f.write_text(text + "\n\ndef from_environment():\n    return Settings.from_env(os.environ)\n")
    assert environment_reads(f) == [len(text.splitlines()) + 4]


def test_only_the_cli_and_the_container_side_read_the_environment():
    readers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(MAY_READ) and (lines := environment_reads(path)):
            readers[rel] = lines
    assert readers == {}, "fix: read it in the CLI, and pass the value (or the Settings that hold it) in"
