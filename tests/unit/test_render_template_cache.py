"""Rendering is pure (issue 42): its compiled-template cache is a folder the caller gives (the CLI: the user's
cache folder, from its environment), never one found from the process's environment at import; the files
rendered are the same with or without it."""

from __future__ import annotations

from buildctl import recipe
from buildctl.render import rendering


def test_the_compiled_templates_go_to_the_folder_given_and_nowhere_without_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    spec = recipe.load("demo-cpu")
    plain = rendering.render(spec)
    cached = rendering.render(spec, template_cache=tmp_path / "given")
    assert cached.files == plain.files
    assert any((tmp_path / "given").iterdir())
    assert not (tmp_path / "xdg").exists()
