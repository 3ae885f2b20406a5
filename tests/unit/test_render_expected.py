"""Every shipped recipe renders exactly as checked in (tests/expected/renders/): the Dockerfile and build
script as text, every rendered file by sha256 (so artifact keys and build-dir volumes survive a change
that means to change nothing). After a deliberate change: `.venv/bin/python tests/expected/renders.py`
and review the diff."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "expected"))
import renders  # noqa: E402

REGENERATE = "regenerate with `.venv/bin/python tests/expected/renders.py` if the change is meant"


def test_every_shipped_recipe_has_an_expected_render():
    assert sorted(p.name for p in renders.HERE.iterdir() if p.is_dir()) == renders.recipes(), REGENERATE


@pytest.mark.parametrize("name", renders.recipes())
def test_render_is_as_expected(name):
    files = renders.rendered(name)
    texts, digests = renders.expected(name)
    for f, text in texts.items():
        assert files[f] == text, f"{name}/{f} differs from tests/expected/renders/{name}/{f}; {REGENERATE}"
    assert renders.digests(files) == digests, f"{name}: a rendered file differs; {REGENERATE}"
