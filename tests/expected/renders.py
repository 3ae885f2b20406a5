"""The expected render of every shipped recipe: the Dockerfile and build script as text (a template
change shows in review), and the sha256 of every rendered file (what the artifact key is computed
from: equal digests mean existing keys and build-dir volumes stay valid).

Regenerate after a deliberate change to a template or a recipe, and review the diff:

    .venv/bin/python tests/expected/renders.py
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "renders"
TEXT_FILES = ("Dockerfile", "build.sh")


def rendered(name: str) -> dict[str, str]:
    """The files `invoke render --recipe NAME` writes (default settings), the checkout's path as <repo>."""
    sys.path.insert(0, str(ROOT))
    from buildctl import recipe, render

    files = render.render(recipe.load(name)).files
    return {path: text.replace(str(ROOT), "<repo>") for path, text in sorted(files.items())}


def recipes() -> list[str]:
    return sorted(p.stem for p in (ROOT / "recipes").glob("*.yaml"))


def expected(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(text of the TEXT_FILES, sha256 of every file) as checked in."""
    folder = HERE / name
    texts = {f: (folder / f).read_text() for f in TEXT_FILES if (folder / f).is_file()}
    return texts, json.loads((folder / "sha256.json").read_text())


def digests(files: dict[str, str]) -> dict[str, str]:
    return {path: hashlib.sha256(text.encode()).hexdigest() for path, text in files.items()}


def write(name: str) -> None:
    files = rendered(name)
    folder = HERE / name
    folder.mkdir(parents=True, exist_ok=True)
    for f in TEXT_FILES:
        (folder / f).write_text(files[f])
    (folder / "sha256.json").write_text(json.dumps(digests(files), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    for recipe_name in recipes():
        write(recipe_name)
    stale = sorted({p.name for p in HERE.iterdir() if p.is_dir()} - set(recipes()))
    for name in stale:
        for f in (HERE / name).iterdir():
            f.unlink()
        (HERE / name).rmdir()
    print(f"wrote {len(recipes())} expected renders under {HERE.relative_to(ROOT)}"
          + (f"; removed {', '.join(stale)}" if stale else ""))
