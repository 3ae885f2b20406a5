"""The environment is read once, by the CLI (issues 37, 42): os.environ and os.getenv only in the CLI
(buildctl/cli/, tasks.py outside the package, and a module's `if __name__ == "__main__":` block: its own command
line) and the container side (buildctl/in_container/, which runs in the containers and imports nothing of
buildctl). The CLI hands it down as a mapping: Settings keep
the one they were built from (`Settings.from_env(os.environ, ...)`; `environ()`, `docker_host`, `cache_dir`,
...), and library code takes a value from the settings it is handed, or a mapping, or a parameter.

settings.py's module functions that read the process environment themselves (ENV_FUNCTIONS) are on their
way out: each is kept only while a library module below still calls it (LEFT, which may only shrink), and
settings.py reads the environment nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
MAY_READ = ("cli/", "in_container/")
ENV_FUNCTIONS = ("from_environment",)
# The calls of ENV_FUNCTIONS left (issue 42): each one goes with a value handed down from the CLI, and the
# function with its last caller.
LEFT = {
    "store/artifacts.py": ["from_environment", "from_environment"],
}


def _is_main_block(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`: a module's command line (python -m ...), where a process starts, as the CLI."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Compare) \
        and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__" \
        and [type(c).__name__ for c in node.test.comparators] == ["Constant"] \
        and node.test.comparators[0].value == "__main__"


def environment_reads(path: Path, allowed_in: frozenset[str] = frozenset()) -> list[int]:
    """The lines of `path` that read the environment: os.environ, os.getenv, or either imported by name;
    none inside a module-level function named in `allowed_in`, nor in the module's `__main__` block (its
    command line)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = {id(n) for f in tree.body
               if (isinstance(f, ast.FunctionDef) and f.name in allowed_in) or _is_main_block(f) for n in ast.walk(f)}
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


class _SettingsCalls(ast.NodeVisitor):
    """Calls of settings.py's module functions named in ENV_FUNCTIONS, through the module (however it is
    imported and named, unless a parameter of that name hides it: a Settings object) or imported by name."""

    def __init__(self, tree: ast.Module) -> None:
        self.found: list[tuple[int, str]] = []
        self.modules: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "buildctl":
                self.modules |= {a.asname or a.name for a in node.names if a.name == "settings"}
            elif isinstance(node, ast.Import):
                self.modules |= {a.asname for a in node.names if a.name == "buildctl.settings" and a.asname}
            elif isinstance(node, ast.ImportFrom) and node.module == "buildctl.settings":
                self.found += [(node.lineno, a.name) for a in node.names if a.name in ENV_FUNCTIONS]
        self.hidden: list[set[str]] = [set()]
        self.visit(tree)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = node.args
        self.hidden.append(self.hidden[-1] | {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]})
        self.generic_visit(node)
        self.hidden.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ENV_FUNCTIONS and isinstance(f.value, ast.Name) \
                and f.value.id in self.modules and f.value.id not in self.hidden[-1]:
            self.found.append((node.lineno, f.attr))
        self.generic_visit(node)


def environment_function_calls(path: Path) -> list[str]:
    """The ENV_FUNCTIONS that `path` calls (or imports by name), in line order, once per call."""
    return [name for _, name in sorted(_SettingsCalls(ast.parse(path.read_text(), str(path))).found)]


def test_the_check_sees_every_way_of_reading_it(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nfrom os import getenv\na = os.environ['X']\nb = os.getenv('Y')\n"
                 "def environ():\n    return dict(os.environ)\n"
                 "if __name__ == '__main__':\n    print(os.environ)\nif __name__ == 'x':\n    print(os.environ)\n")
    assert environment_reads(f) == [2, 3, 4, 6, 10]
    assert environment_reads(f, frozenset({"environ"})) == [2, 3, 4, 10]


def test_only_the_cli_and_the_container_side_read_the_environment():
    readers = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        allowed = frozenset(ENV_FUNCTIONS) if rel == "settings.py" else frozenset()
        if not rel.startswith(MAY_READ) and (lines := environment_reads(path, allowed)):
            readers[rel] = lines
    assert readers == {}, "fix: read it in the CLI, and pass the value (or the Settings that hold it) in"


def test_the_call_check_sees_the_module_however_named_and_not_a_settings_object(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from buildctl import settings\nfrom buildctl import settings as s2\nimport buildctl.settings as s3\n"
                 "from buildctl.settings import from_environment, Settings\n"
                 "a = settings.from_environment()\nb = s2.from_environment()\nc = s3.from_environment()\n"
                 "d = settings.fields()\ndef f(settings):\n    return settings.from_environment()\n"
                 "def g(chosen):\n    return chosen.from_environment(), settings.from_environment()\n")
    assert environment_function_calls(f) == ["from_environment"] * 5


def test_no_module_calls_the_functions_that_read_the_environment_but_those_left():
    calls = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel != "settings.py" and (names := environment_function_calls(path)):
            calls[rel] = names
    assert calls == LEFT, ("fix: take the value from the Settings (or the mapping) the CLI hands down; a call "
                           "that went: drop it from LEFT")


def test_settings_keep_only_the_env_functions_that_are_still_called():
    """A function of ENV_FUNCTIONS goes from settings.py with its last caller (and from ENV_FUNCTIONS)."""
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    defined = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)} & set(ENV_FUNCTIONS)
    assert defined == {name for names in LEFT.values() for name in names} == set(ENV_FUNCTIONS)
