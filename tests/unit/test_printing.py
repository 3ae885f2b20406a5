"""Printing only through the view and the CLI (issue 37): no module outside buildctl/cli/ and buildctl/ui.py
makes a rich Console, calls print() or writes to sys.stdout/sys.stderr itself; a library call reports
through the callbacks (on_line) and the console its caller gives. Nor does it choose a console through ui.py's
view factory or print JSON (issue 42): what prints JSON or a report, and where, is the CLI's to say."""

from __future__ import annotations

import ast
from pathlib import Path

from package_ast import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
MAY_PRINT = ("cli/", "ui.py")
# Justified: each is a program's own output, not a library's.
EXCEPTIONS = {
    "in_container/": "runs inside the containers as its own program; its stdout is what the build or the probe reads",
    "host/base_images.py": "its main() is `python -m buildctl.host.base_images`, .ci/bootstrap's command line",
}
# ui.py's view factory (it picks the console by the terminal) and the CLI's JSON printer: called or handed on,
# each chooses where output goes.
CONSOLE_CHOOSERS = ("make_view", "print_json")


def printing(path: Path) -> list[int]:
    """The lines of `path` that print: Console(...), print(...), sys.stdout/sys.stderr .write(), and `print`
    handed on as a value (a callback's default or argument: the day a caller gives none, it prints into
    --json's stdout where no test sees it)."""
    tree = parsed(path)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    lines = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Name) and node.id == "print" and id(node) not in called]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name in ("print", "Console") and (isinstance(f, ast.Name) or name == "Console"):
            lines.append(node.lineno)
        elif name == "write" and isinstance(f.value, ast.Attribute) and f.value.attr in ("stdout", "stderr") \
                and isinstance(f.value.value, ast.Name) and f.value.value.id == "sys":
            lines.append(node.lineno)
    return sorted(lines)


def choosing_a_console(path: Path) -> list[int]:
    """The lines of `path` that name one of the CONSOLE_CHOOSERS: called (`view or ui.make_view(False)`, a
    default argument's value) or handed on as a value (`on_json=print_json`)."""
    tree = parsed(path)
    return sorted(node.lineno for node in ast.walk(tree)
                  if (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                      else None) in CONSOLE_CHOOSERS)


# What a module outside cli/ may import from ui.py: the view types it is handed (a subclass is made of View), and
# the build's step names in the order the view shows them (the failure bundle's steps are these). Terminal text
# (strip_controls, print_detail) is terminal_text.py's; make_view and the views themselves are the CLI's to pick.
MAY_IMPORT_FROM_UI = {"View", "TimeLeft", "STAGES"}


def ui_imports(path: Path) -> list[tuple[int, str]]:
    """(line, name) of what `path` imports from buildctl.ui beyond MAY_IMPORT_FROM_UI; the whole module
    (`from buildctl import ui`, `import buildctl.ui`) counts as all of it."""
    tree = parsed(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "buildctl.ui":
            found += [(node.lineno, a.name) for a in node.names if a.name not in MAY_IMPORT_FROM_UI]
        elif isinstance(node, ast.ImportFrom) and node.module == "buildctl":
            found += [(node.lineno, "ui") for a in node.names if a.name == "ui"]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("buildctl.ui")]
    return found


def test_the_check_sees_each_way_of_importing_from_ui(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from buildctl.ui import TimeLeft, View\nfrom buildctl.ui import View, strip_controls\n"
                 "from buildctl import errors, ui\nimport buildctl.ui\ndef f():\n    from buildctl.ui import make_view\n"
                 "from buildctl.terminal_text import strip_controls\n")
    assert ui_imports(f) == [(2, "strip_controls"), (3, "ui"), (4, "buildctl.ui"), (6, "make_view")]


def test_outside_the_cli_ui_is_imported_only_for_the_view_types():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(MAY_PRINT) and (names := ui_imports(path)):
            found[rel] = names
    assert found == {}, "fix: strip_controls and print_detail from buildctl.terminal_text; a view from the caller"


def test_the_check_sees_each_way_of_printing(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import sys, rich.console\nprint(1)\nrich.console.Console()\nsys.stderr.write('x')\n"
                 "console.print('fine: a console given')\ndef f(on_line=print): pass\nrun(on_note=print)\n")
    assert printing(f) == [2, 3, 4, 6, 7]


def test_only_the_cli_and_the_view_print():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(MAY_PRINT) or rel.startswith(tuple(EXCEPTIONS)):
            continue
        if lines := printing(path):
            found[rel] = lines
    assert found == {}, "fix: report through on_line or the console the caller gives (ui.py's by default)"


def test_the_check_sees_each_way_of_choosing_a_console(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from buildctl import ui\nview = view or ui.make_view(False)\n"
                 "def f(view=make_view(True)): pass\ndef g(on_json=print_json): pass\nprint_json(data)\n"
                 "console.print('fine: a console given')\n")
    assert choosing_a_console(f) == [2, 3, 4, 5]


def test_only_the_cli_chooses_a_console():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(MAY_PRINT) and (lines := choosing_a_console(path)):
            found[rel] = lines
    assert found == {}, "fix: take a console, a view or an on_... callback from the caller (the CLI), with no default"
