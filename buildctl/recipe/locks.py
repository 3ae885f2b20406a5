"""Where a recipe's pip lock is (`invoke lock` writes it, render/pip_lock.py reads it): python.lock as a
recipe file gives it, else locks/<the file's name>.txt beside it when that file is there."""

from __future__ import annotations

import os
from pathlib import Path

from buildctl import settings

LOCKS_DIR = "locks"  # beside the recipe: locks/<recipe file's name>.txt (`invoke lock`)


def lock_path(recipe_file: Path) -> Path:
    """Where `invoke lock` writes a recipe's lock, and where the loader looks for it."""
    return recipe_file.parent / LOCKS_DIR / f"{recipe_file.stem}.txt"


def default_lock(data: dict, recipe_file: Path) -> None:
    """python.lock as this file gives it (relative to it), else locks/<its name>.txt beside it when that file is
    there; the render reads it, and uses it only for a request it covers (render/pip_lock.py)."""
    python = data.get("python")
    lock = python.get("lock") if isinstance(python, dict) else None
    if isinstance(lock, str) and lock and not os.path.isabs(lock):
        python["lock"] = _checkout_relative(recipe_file.parent / lock)
    elif lock is None and lock_path(recipe_file).is_file():
        if python is None:
            data["python"] = python = {}
        if isinstance(python, dict):
            python["lock"] = _checkout_relative(lock_path(recipe_file))


def _checkout_relative(path: Path) -> str:
    """A lock inside buildctl's checkout as a path relative to it (the resolved recipe reads alike in every
    checkout; render/pip_lock.py reads it from there), any other absolute."""
    full = Path(os.path.abspath(path))
    return full.relative_to(settings.REPO_ROOT).as_posix() if full.is_relative_to(settings.REPO_ROOT) else str(full)
