"""Helpers of the hostile-bundle tests (tests/unit/test_hostile_archives.py and
tests/integration/test_hostile_archives_integration.py): `invoke repro` run as a user runs it (in a
process, or in this one for the refusals before any engine), and the check that a refusal is exit 2
with one line naming the bundle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from invoke_here import invoke_here

REPO = Path(__file__).resolve().parents[1]
INVOKE = Path(sys.executable).parent / "invoke"  # the venv's own entry point, as a user runs it


def run_repro(target: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(INVOKE), "repro", str(target), *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "BUILDCTL_DEBUG": "", "COLUMNS": "80", **(env or {})})


def repro_here(target: Path, *extra: str, env: dict | None = None):
    """run_repro in this process (tests/invoke_here.py)."""
    return invoke_here("repro", str(target), *extra, env={"BUILDCTL_DEBUG": "", "COLUMNS": "80", **(env or {})})


def one_line_exit_2(proc, *parts: str) -> str:
    """The refusal's line: exit 2, nothing on stdout, one line on stderr naming the bundle and `parts`."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bundle "), proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]
