"""The builder venv's pip lock (`invoke lock`): every package pip installs into it, the build tools included,
as name==version with the sha256 of each file the index serves, installed with `pip install --require-hashes
--no-deps -r`. What pip installs then is what the lock names, whatever index serves it: a file whose hash is not
in the lock is refused by pip (failure/patterns.py names the package).

The lock's header records what it was made for (the requirements and constraints as the render gives them, the
Python version); it is used only for a request it covers (`covers`). A recipe without a lock, or a request its
lock does not cover (a --set that adds a package), lets pip choose: the build and --dry-run say so in one line
(`pip_line`), and the key then covers the index pip chooses from (pip.conf, store.key)."""

from __future__ import annotations

import hashlib
import json

from buildctl.errors import InputError

FILE = "pip.lock"  # the rendered file (keyed): where the Dockerfile installs it from
HEADER = "# buildctl lock: "
# The platform the builder images run on: manylinux_2_28 wheels install on every distro recipes name
# (bookworm's glibc is 2.36, jammy's 2.35); the lock holds every file's hash of each version it picks.
PLATFORM = "x86_64-manylinux_2_28"


def made_for(python_version: str, requirements: list[str], constraints: list[str]) -> dict:
    """What a lock is made for: the builder venv's requirements and constraints as rendered, and the Python."""
    return {"python": python_version, "requirements": sorted(requirements), "constraints": sorted(constraints)}


def header(facts: dict, index: str) -> str:
    """The lock's first lines: what it was made for (read back by `read`) and how to make it again."""
    return (f"{HEADER}{json.dumps(facts, sort_keys=True)}\n"
            f"# made by `invoke lock` with uv pip compile --generate-hashes against {index}, for CPython "
            f"{facts['python']} on {PLATFORM}; do not edit, make it again\n")


def covers(recorded: dict, wanted: dict) -> bool:
    """Whether a lock made for `recorded` covers a request for `wanted`: the same Python and constraints, and
    every requirement among those it was made for (a Debug build drops the wheel repair's tools: the lock made
    for the Release one still covers it, and installs them unused)."""
    return (recorded.get("python") == wanted["python"] and recorded.get("constraints") == wanted["constraints"]
            and isinstance(recorded.get("requirements"), list)
            and set(wanted["requirements"]) <= set(recorded["requirements"]))


def read(spec, requirements: list[str], constraints: list[str]) -> tuple[str, tuple[str, str]] | None:
    """(the lock's text, (its path, its sha256) for the no-op memo), or None when the recipe has none or its
    lock does not cover this request (a --set or an edit changed the requirements: pip chooses, and `pip_line`
    says so). InputError when the lock cannot be read or is no lock buildctl made."""
    path = spec.python.lock
    if not path:
        return None
    fix = f"fix: invoke lock --recipe {spec.name}"
    from buildctl.settings import REPO_ROOT

    full = REPO_ROOT / path  # relative: to buildctl's checkout (recipe.loader)
    try:
        raw = full.read_bytes()
        text = raw.decode()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"python.lock {path}: cannot read ({e.__class__.__name__}); {fix}") from None
    first = text.partition("\n")[0]
    try:
        recorded = json.loads(first[len(HEADER):]) if first.startswith(HEADER) else None
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        raise InputError(f"python.lock {path} is not a lock buildctl made; {fix}")
    if not covers(recorded, made_for(spec.python.version, requirements, constraints)):
        return None
    return text, (str(full), hashlib.sha256(raw).hexdigest())


def pip_line(spec, locked: bool) -> str:
    """The one line a build and --dry-run say about what pip installs into the builder venv."""
    if locked:
        return f"pip installs the builder venv from its lock {spec.python.lock} (--require-hashes)"
    if spec.python.lock:
        return (f"the lock {spec.python.lock} does not cover this request's requirements (a --set or an edit changed "
                f"them): pip chooses the builder venv's versions from {_index(spec)} (keyed); fix: invoke lock "
                f"--recipe {spec.name} (with the same --set)")
    return (f"no pip lock for {spec.name}: pip chooses the builder venv's versions from {_index(spec)} (keyed); "
            f"fix: invoke lock --recipe {spec.name}")


def _index(spec) -> str:
    from buildctl.secrets import mask_url

    return mask_url(spec.site.pip_index_url) if spec.site.pip_index_url else "https://pypi.org/simple"
