"""buildctl's modules parsed once per test process: the ast rule tests (parameters, printing, the environment,
the store's layout, layers, secrets) each walk the whole package, and parsing it is most of their time. Keyed
by the text, so a planted file rewritten in place is parsed again. No tests in here."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


def parsed(path: Path) -> ast.Module:
    """`path`'s module (the tree is shared between callers: read it, never change it)."""
    return _parse(Path(path).read_text(), str(path))


@functools.cache
def _parse(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)
