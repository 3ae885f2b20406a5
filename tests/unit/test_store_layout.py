"""The store's layout is spelled only in store/ (issue 42): `<root>/<recipe>/<key>/` with manifest.json inside a
published artifact, the key lock `<root>/<recipe>/.<key>.lock`, the interrupted-build record
`<root>/<recipe>/.<key>.interrupted.json`. Every other module asks store.artifacts (artifact_dir, is_published,
manifest_path, key_lock_path, interrupted_record), so that a change of the layout is one change. in_container/
runs inside the build container with files of its own, and is not looked at."""

from __future__ import annotations

import ast
from pathlib import Path

from package_ast import parsed

PACKAGE = Path(__file__).resolve().parents[2] / "buildctl"
MAY_SPELL = ("store/", "in_container/")
# Justified: a dot-named lock that is not the store's.
EXCEPTIONS = {
    "bisect/log.py": "the bisect log's own lock, beside the log (.<digest>.lock), not a key's in the store",
}
# A key's file in a recipe's folder is `.<key>` and one of these; the name glued from the key in an f-string, or
# the suffix on its own ("." + key + ".lock", path.with_suffix(".lock")).
KEY_FILE_SUFFIXES = (".lock", ".interrupted.json")


def _literal(part) -> str | None:
    return part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else None


def layout_spelled(path: Path) -> list[int]:
    """The lines of `path` that spell the store's layout: the constant "manifest.json" (a message that mentions
    it is no path), a path f-string ending in "/manifest.json", an f-string that builds a key's `.<key>.lock` or
    `.<key>.interrupted.json`, or a constant that is such a suffix on its own."""
    tree = parsed(path)
    lines = []
    for node in ast.walk(tree):
        text = _literal(node)
        if text is not None and (text == "manifest.json" or text in KEY_FILE_SUFFIXES):
            lines.append(node.lineno)
        elif isinstance(node, ast.JoinedStr) and node.values:
            last = _literal(node.values[-1]) or ""
            if last.endswith("/manifest.json") or any(last.endswith(s) for s in KEY_FILE_SUFFIXES):
                lines.append(node.lineno)
    return sorted(set(lines))


def _checked_modules() -> list[Path]:
    def relative(p: Path) -> str:
        return p.relative_to(PACKAGE).as_posix()
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if not relative(p).startswith(MAY_SPELL) and relative(p) not in EXCEPTIONS]


def test_the_check_sees_each_way_of_spelling_the_layout(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text(
        "def f(folder, root, recipe, key):\n"
        "    a = folder / \"manifest.json\"\n"
        "    b = root / recipe / f\".{key}.lock\"\n"
        "    c = root / recipe / f\".{key}.interrupted.json\"\n"
        "    d = root / recipe / (\".\" + key + \".lock\")\n"
        "    e = f\"{folder}/manifest.json\"\n"
        "    g = open(folder / 'manifest.json')\n"
        "    return a, b, c, d, e, g\n")
    assert layout_spelled(planted) == [2, 3, 4, 5, 6, 7]


def test_what_is_not_the_layout_is_not_flagged(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text(
        "\"\"\"An artifact holds its manifest.json.\"\"\"\n"
        "def f(folder, digest):\n"
        "    x = f\"{folder}/manifest.json names no wheel\"\n"
        "    y = \"pip.lock\", \".*.lock\", \"ledger.lock\", \"python.lock\"\n"
        "    return x, y\n")
    assert layout_spelled(planted) == []


def test_only_the_store_spells_its_layout():
    found = [f"{p.relative_to(PACKAGE)}:{line}" for p in _checked_modules() for line in layout_spelled(p)]
    assert not found, (f"the store's layout spelled outside store/ at {', '.join(found)}; fix: ask store.artifacts "
                       "(is_published, manifest_path, key_lock_path, interrupted_record)")


def test_the_exceptions_still_hold_what_they_excuse():
    for name in EXCEPTIONS:
        assert layout_spelled(PACKAGE / name), f"{name} no longer spells a lock: drop it from EXCEPTIONS"


# The store's functions that take the artifacts root, with how many positional arguments come before it. A call
# without it means `artifacts/` of the current folder: a command run with BUILDCTL_ARTIFACTS (or --artifacts)
# stamped its images' use where `invoke clean` never looks (found by CI: invoke verify --wheel's base image).
ROOT_AFTER = {"artifact_dir": 2, "interrupted_record": 2, "lookup": 2, "newest": 1, "latest": 1, "record_use": 1,
              "record_images": 2, "record_inspected": 1, "is_own_image": 1, "last_use": 2, "key_lock": 2,
              "staging": 2, "publish": 3}


def calls_without_a_root(path: Path) -> list[int]:
    """The lines of `path` that call one of ROOT_AFTER through `artifacts.` without giving the root."""
    lines = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "artifacts" \
                and node.func.attr in ROOT_AFTER:
            given = len(node.args) > ROOT_AFTER[node.func.attr] or any(k.arg == "root" for k in node.keywords)
            if not given:
                lines.append(node.lineno)
    return lines


def test_the_root_check_sees_a_call_that_leaves_the_root_out(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("def f(client, image, root):\n"
                       "    artifacts.record_images(client, [image])\n"
                       "    artifacts.record_images(client, [image], root)\n"
                       "    artifacts.lookup('r', 'k', root=root)\n")
    assert calls_without_a_root(planted) == [2]


def test_every_call_of_the_store_outside_it_names_the_artifacts_root():
    found = {p.relative_to(PACKAGE).as_posix(): lines for p in sorted(PACKAGE.rglob("*.py"))
             if not p.relative_to(PACKAGE).as_posix().startswith("store/") and (lines := calls_without_a_root(p))}
    assert found == {}, f"give the root the command was given (options.artifacts_root, the artifact's): {found}"
