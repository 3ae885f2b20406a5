"""The verification's wheelhouse: every wheel that installing the wheel under test needs, fetched once
by the host's pip (its index, proxy and CA) per (requirements, Python, platforms) and copied into the
target, which then installs with no network and no index. The manylinux platforms pip asks for follow
the target's glibc.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from buildctl.secrets import checked_argv, filtered
from buildctl.store.wheel_facts import WheelFacts, requires_for_python
from buildctl.verify.report import VerificationFailed
from buildctl.verify.targets import LineSink

# glibc of each distro's own Python, for the wheelhouse's manylinux tags.
DISTRO_GLIBC = {"bookworm": (2, 36), "trixie": (2, 41), "jammy": (2, 35), "noble": (2, 39)}


# --------------------------------------------------------------------------- platforms


def manylinux_platforms(glibc: tuple[int, int], machine: str) -> list[str]:
    plats = [f"manylinux_2_{m}_{machine}" for m in range(glibc[1], 4, -1)] if glibc[0] == 2 else []
    legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
    plats += [f"{k}_{machine}" for k, m in legacy.items() if glibc >= (2, m)]
    return plats + [f"linux_{machine}"]


def host_glibc() -> tuple[int, int]:
    lib, ver = platform.libc_ver()
    m = re.match(r"(\d+)\.(\d+)", ver or "")
    return (int(m.group(1)), int(m.group(2))) if lib == "glibc" and m else (2, 17)


# --------------------------------------------------------------------------- wheelhouse


def _pip_download(dest: Path, reqs: Sequence[str], python: str, plats: Sequence[str],
                  on_line: LineSink) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--dest", str(dest),
           "--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for p in plats:
        cmd += ["--platform", p]
    cmd += list(reqs)
    on_line(f"pip download {' '.join(reqs)}")
    return subprocess.run(checked_argv(cmd), capture_output=True, text=True)


def prepare_wheelhouse(wheel: Path | WheelFacts | None, requirements: Sequence[str], optional: Sequence[str],
                       python: str, plats: Sequence[str], cache_dir: Path, on_line: LineSink) -> tuple[Path, list[str]]:
    """A directory with every wheel that installing `wheel` + `requirements` needs, except `wheel`
    itself (two different builds can share a file name); and the optional requirements it holds.
    No wheel: a prebuilt framework's extension set, only its requirements.

    Filled in a folder of its own, then renamed into place whole: a verification running beside this one
    (two builds, two `invoke verify`) never reads a wheelhouse still being filled, nor writes into one."""
    # pip download judges markers by the interpreter it runs on, not --python-version: name the
    # wheel's own requirements that hold for the target Python (torch: setuptools on >= 3.12).
    facts = WheelFacts.read(wheel) if isinstance(wheel, Path) else wheel  # read once: the caller's, when it has them
    requires = list(facts.requires) if facts is not None else []
    wheel = facts.path if facts is not None else None
    own = requires_for_python(requires, python)
    key_src = json.dumps({"requires": requires, "reqs": sorted([*own, *requirements]),
                          "optional": sorted(optional), "python": python, "platforms": list(plats),
                          "filled": "aside"},  # not the folders that older buildctl filled in place
                         sort_keys=True)
    wh = cache_dir / "wheelhouse" / hashlib.sha256(key_src.encode()).hexdigest()[:16]
    done = wh / ".complete.json"
    if not done.is_file():
        wh.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".tmp-{wh.name}-", dir=wh.parent))
        try:
            have = _fill(staging, wheel, [*own, *requirements], optional, python, plats, on_line)
            (staging / ".complete.json").write_text(json.dumps(filtered({"optional": have})))
            staging.chmod(0o755)  # mkdtemp's 0700 would hide it from the team sharing BUILDCTL_CACHE
            try:
                os.rename(staging, wh)
            except OSError:  # another verification placed it first: the same wheels, complete
                if not done.is_file():
                    raise VerificationFailed(f"{wh} is a wheelhouse that is not complete; fix: remove it") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return wh, json.loads(done.read_text())["optional"]


def _fill(dest: Path, wheel: Path | None, reqs: Sequence[str], optional: Sequence[str], python: str,
          plats: Sequence[str], on_line: LineSink) -> list[str]:
    """pip download of what `wheel` + `reqs` need into `dest` (the wheel itself left out), then of each
    optional requirement it can have; those it had."""
    wanted = [*([str(wheel)] if wheel is not None else []), *reqs]
    r = _pip_download(dest, wanted, python, plats, on_line) if wanted else None
    if r is not None and r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise VerificationFailed(f"cannot fetch the dependencies of {wheel.name if wheel else ' '.join(reqs)} for "
                                 f"Python {python}: {' '.join(tail)}; fix: check pip's index and proxy settings "
                                 "(pip config list)")
    have = []
    for req in optional:
        r = _pip_download(dest, [req], python, plats, on_line)
        if r.returncode == 0:
            have.append(req)
        else:
            on_line(f"optional {req} not available ({(r.stderr or '').strip().splitlines()[-1:]}); going on")
    if wheel is not None:
        (dest / wheel.name).unlink(missing_ok=True)
    return have
