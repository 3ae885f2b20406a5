"""Helpers of the demofw host tests (tests/unit/test_demofw_host.py: setup.py's contract without
compiling; tests/integration/test_demofw_host_integration.py: a real CPU build): examples/demofw run on
this host, in a clean environment, without Docker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMOFW = REPO / "examples" / "demofw"


def clean_env(**extra: str) -> dict:
    """The host environment without build switches that would leak into setup.py."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BUILD_", "USE_", "CMAKE_", "TORCH_", "NCCL_", "PYTORCH_", "CUDA"))
           and k not in ("DEBUG", "REL_WITH_DEB_INFO", "MAX_JOBS", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(extra)
    return env


def run_cmd(cmd, cwd=None, env=None, check=True, timeout=600) -> subprocess.CompletedProcess:
    """Run `cmd` (output and errors together); with `check`, an exit other than 0 fails with its output."""
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}:\n{p.stdout[-6000:]}")
    return p


def make_venv(path: Path, packages: list[str]) -> Path:
    """A venv at `path` with `packages`; its python."""
    run_cmd([sys.executable, "-m", "venv", path])
    py = path / "bin" / "python"
    if packages:
        run_cmd([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages], timeout=900)
    return py


def copy_demofw(dst: Path) -> Path:
    """examples/demofw copied to `dst` without anything a build left in it."""
    shutil.copytree(DEMOFW, dst, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__",
                                                               "_C*.so", "version.py"))
    return dst
