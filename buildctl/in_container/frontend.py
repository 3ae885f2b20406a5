#!/usr/bin/env python3
"""The build frontend of a source tree, from the tree itself (never a version table), and the PEP 517
calls buildctl's build script makes of it. Standard library only: it runs in the build container.

    python frontend.py detect              # prints: setuptools | scikit-build-core
    python frontend.py configure BUILD_DIR # scikit-build-core: CMake configured into BUILD_DIR, nothing built
    python frontend.py version             # the backend's name and version, e.g. "scikit-build-core 1.1.1"

The frontend is what `[build-system] build-backend` in pyproject.toml names: scikit-build-core (PyTorch
2.14 and later, pytorch/pytorch#180247) is built as PEP 517 asks (`pip wheel --no-build-isolation
--no-deps -C build-dir=...`); setuptools, or a tree with setup.py and no backend, through setup.py as
PyTorch up to 2.13. Any other backend is refused: buildctl cannot drive its configure and compile
steps apart.

scikit-build-core has no configure-only wheel step: its one path that configures and stops is an sdist
with `sdist.cmake = true` (scikit_build_core/build/sdist.py calls the wheel build with
exit_after_config), which configures into the wheel's own build-dir; the wheel build then continues
there. `configure` makes that call in this process (the hook, as pypa/build would), the sdist itself
going to a scratch folder.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

SCIKIT_BUILD_CORE = "scikit-build-core"
SETUPTOOLS = "setuptools"


def build_backend(pyproject_text: str) -> str | None:
    """`build-backend` of [build-system], or None (tomllib where the Python has it, a line read otherwise:
    Python 3.10 has no tomllib)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        section = re.search(r"^\[build-system\]\s*$(.*?)(?=^\[|\Z)", pyproject_text, re.M | re.S)
        m = section and re.search(r"""^\s*build-backend\s*=\s*["']([^"']+)["']""", section.group(1), re.M)
        return m.group(1) if m else None
    data = tomllib.loads(pyproject_text)
    backend = (data.get("build-system") or {}).get("build-backend")
    return backend if isinstance(backend, str) else None


def detect(tree: str = ".") -> str:
    """The frontend to build `tree` with; SystemExit naming the backend when buildctl has none for it."""
    pyproject = os.path.join(tree, "pyproject.toml")
    backend = None
    if os.path.isfile(pyproject):
        with open(pyproject, encoding="utf-8") as f:
            backend = build_backend(f.read())
    if backend and backend.split(":")[0].split(".")[0] == "scikit_build_core":
        return SCIKIT_BUILD_CORE
    if (backend is None or backend.startswith("setuptools")) and os.path.isfile(os.path.join(tree, "setup.py")):
        return SETUPTOOLS
    raise SystemExit(f"buildctl: the source's build backend is {backend or 'not named, and there is no setup.py'}; "
                     "buildctl builds setuptools (setup.py) and scikit-build-core trees; fix: check the source, "
                     "or build it with one of those")


def version(frontend: str) -> str:
    from importlib import metadata

    dist = "scikit_build_core" if frontend == SCIKIT_BUILD_CORE else "setuptools"
    try:
        return f"{frontend} {metadata.version(dist)}"
    except metadata.PackageNotFoundError:
        raise SystemExit(f"buildctl: the source builds with {frontend}, which is not in the build venv; fix: add "
                         f"{frontend} to python.packages") from None


def configure(build_dir: str) -> None:
    """CMake configured into `build_dir` through scikit-build-core's sdist hook (see the module doc)."""
    version(SCIKIT_BUILD_CORE)  # installed, or one line saying so
    from scikit_build_core import build as backend

    with tempfile.TemporaryDirectory() as scratch:
        backend.build_sdist(scratch, {"sdist.cmake": "true", "build-dir": build_dir})


def main(argv: list[str]) -> int:
    if argv[:1] == ["detect"] and len(argv) == 1:
        print(detect())
    elif argv[:1] == ["version"] and len(argv) == 1:
        print(version(detect()))
    elif argv[:1] == ["configure"] and len(argv) == 2:
        configure(argv[1])
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
