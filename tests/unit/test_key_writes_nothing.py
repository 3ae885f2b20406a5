"""Computing a key has no side effects (issue 42): the key of every shipped recipe, as `invoke build --dry-run`
and a bisect step compute it, writes nothing anywhere: not in the checkout (recipes, templates, examples, fixtures, a
local source's tree), not in the artifacts root, the current folder or the user's cache. The engine is a
stand-in that answers the base image's inspection only; git refs are answered by tests/unit/conftest.py. It
found one: the resolve step recorded each git answer (for --offline) in the artifacts root; a build records
them now (store/git_refs.record).

As root a read-only tree stops nothing, so the test compares every file's name, size and modification time
before and after (and the folders' listings: an added or removed entry)."""

from __future__ import annotations

import os
from pathlib import Path

from buildctl import engine, recipe
from buildctl.pipeline import stages
from buildctl.pipeline.dry_run import dry_run

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {".git", ".venv", ".cache", "__pycache__", ".pytest_cache", ".ruff_cache"}
BASE_ID = "sha256:" + "c" * 64


class BaseOnly(engine.EngineConnection):
    """An engine that answers the base image's inspection and nothing else."""

    def __init__(self) -> None:
        super().__init__(client="no engine here")

    def inspect_image(self, ref: str) -> dict | None:
        return {"Id": BASE_ID, "Config": {"Labels": {}}}


def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every entry under `roots` (but caches and the git folder): a file's size and mtime, a folder's listing."""
    seen: dict[str, tuple] = {}
    for top in roots:
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
            seen[folder] = ("folder", tuple(sorted(dirs + files)))
            for name in files:
                path = os.path.join(folder, name)
                st = os.lstat(path)
                seen[path] = ("file", st.st_size, st.st_mtime_ns)
    return seen


def test_every_shipped_recipes_key_is_computed_without_writing_anything(tmp_path, monkeypatch):
    cwd, artifacts, cache = tmp_path / "cwd", tmp_path / "artifacts", tmp_path / "cache"
    for folder in (cwd, artifacts, cache):
        folder.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(engine.EngineConnection, "open", staticmethod(lambda url=None, environ=None: BaseOnly()))
    environ = {**os.environ, "XDG_CACHE_HOME": str(cache), "HOME": str(tmp_path / "home")}
    names = recipe.list_recipes()
    assert len(names) >= 20  # every shipped recipe, not a few
    # what a key reads in the checkout (the recipes, the templates, the local sources: examples/, fixtures), and
    # this test's own folders; not the rest of the checkout, where the other unit-test process may write
    read = (ROOT / "recipes", ROOT / "templates", ROOT / "examples", ROOT / "tests" / "fixtures", tmp_path)
    before = snapshot(*read)
    keys = {name: dry_run(recipe.load(name), stages.BuildOptions(environ=environ, artifacts_root=artifacts)).key
            for name in names}
    after = snapshot(*read)
    assert len(set(keys.values())) == len(names)
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    assert changed == [], f"computing the keys wrote: {changed[:10]}"
