"""`invoke verify --host` on a wheel whose import prints escape sequences: the probe log reaches a
person without terminal control sequences, the stored report keeps them. A fresh venv and a real pip
install; the views without one are in tests/unit/test_terminal_text.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hostile_zips import wheel

ROOT = Path(__file__).resolve().parents[2]


def _has_controls(text: str) -> bool:
    return any(c in text for c in ("\x1b", "\x9b", "\x07", "\u202e"))


def test_cli_verify_shows_the_probe_log_without_controls(tmp_path):
    """`invoke verify --host` on a wheel whose import prints escape sequences and fails with one.
    Before: 5 ESC bytes reached the terminal (the pip/probe log lines and the final error line)."""
    whl = wheel(tmp_path / "w", 'import sys\nprint("\\x1b]0;owned\\x07\\x1b[2J hello", file=sys.stderr)\n'
                                'raise ImportError("x\\x1b[31mred")\n')
    env = {**os.environ, "BUILDCTL_DEBUG": "", "BUILDCTL_CACHE": str(ROOT / ".cache" / "buildctl-test")}
    proc = subprocess.run([sys.executable, "-m", "invoke", "verify", "--host", "--wheel", str(whl)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stderr
    both = proc.stdout + proc.stderr
    assert not _has_controls(both)
    assert "ImportError: xred" in proc.stderr.splitlines()[-1]
    stored = (tmp_path / "w" / "report.json").read_text()
    assert "\\u001b[31m" in stored  # the report keeps what the probe saw
