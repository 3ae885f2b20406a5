"""The environment is read once (issue 37): os.environ and os.getenv only in buildctl/settings.py, the CLI
(buildctl/cli/, and tasks.py outside the package) and the container side (buildctl/in_container/, which
runs in the containers and imports nothing of buildctl). Library code takes what it needs from
settings.py's functions (cache_dir, docker_host, environ: a copy, also what a child process starts
from) or is handed a mapping."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
MAY_READ = ("settings.py", "cli/", "in_container/")


def environment_reads(path: Path) -> list[int]:
    """The lines of `path` that read the environment: os.environ, os.getenv, or either imported by name."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb", "getenvb") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os" \
                and any(a.name in ("environ", "getenv", "environb", "getenvb") for a in node.names):
            lines.append(node.lineno)
    return lines


def test_the_check_sees_every_way_of_reading_it(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom os import getenv\na = os.environ['X']\nb = os.getenv('Y')\n")
    assert environment_reads(f) == [2, 3, 4]


def test_only_settings_the_cli_and_the_container_side_read_the_environment():
    readers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(MAY_READ) and (lines := environment_reads(path)):
            readers[rel] = lines
    assert readers == {}, "fix: read it in buildctl/settings.py (a function there) and pass the value in"
