"""`invoke verify --host` on hostile wheels: the probe runs in a fresh venv (a real pip install), and
what the wheel's own code does to the probe's output is refused or shown as text.

The cases without a venv (malformed probe.json and report.json, markup) are in
tests/unit/test_hostile_probe.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_zips import wheel

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "buildctl-test"  # the wheelhouse of the verify tests, shared


def invoke(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "BUILDCTL_DEBUG": "", "COLUMNS": "200", "BUILDCTL_CACHE": str(CACHE)}
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_cli_verify_with_a_markup_import_error_keeps_summary_and_json(tmp_path):
    """The issue's case through `invoke verify --host --json`: the wheel's import fails with
    `cannot load [/opt/venv/lib/libnccl.so.2]`. Before: MarkupError, 'internal error' instead of the
    summary and the failed check (exit 1 for the wrong reason). Now: the report, the summary line and a
    one-line error naming the check."""
    whl = wheel(tmp_path / "w", 'raise ImportError("cannot load [/opt/venv/lib/libnccl.so.2]")\n')
    proc = invoke("verify", "--host", "--json", "--wheel", str(whl))
    assert proc.returncode == 1, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["probe"]["import"]["error"] == "ImportError: cannot load [/opt/venv/lib/libnccl.so.2]"
    lines = proc.stderr.splitlines()
    assert lines[-2].startswith("FAILED: 1 of 1 checks failed: ImportError: cannot load [/opt/venv/lib/libnccl.so.2]")
    assert lines[-1].startswith("error: ") and "[/opt/venv/lib/libnccl.so.2]" in lines[-1]


HOSTILE_INIT = '''import atexit, sys
def _replace():  # runs after probe.py wrote its JSON
    out = sys.argv[sys.argv.index("--out") + 1]
    open(out, "w").write({payload!r})
atexit.register(_replace)
'''


@pytest.mark.parametrize("payload, words", [
    ('{"import": "yes", "framework": [1]}', ["import:"]),
    ("[" * 50_000, ["nested too deeply"]),
], ids=["wrong-types", "deep-nesting"])
def test_cli_verify_refuses_a_probe_json_replaced_by_the_wheel(tmp_path, payload, words):
    """A wheel whose import registers an atexit hook that overwrites probe.json after the probe wrote it.
    Before: AttributeError ('str' object has no attribute 'get') or RecursionError, 'internal error',
    exit 1. Now: one line naming probe.json and the field, exit 2, no report written."""
    whl = wheel(tmp_path / "w", HOSTILE_INIT.format(payload=payload))
    proc = invoke("verify", "--host", "--wheel", str(whl))
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"error: probe.json of {whl.name} (written in a fresh venv): "), last
    for w in words:
        assert w in last, last
    assert "Traceback" not in proc.stderr and not (tmp_path / "w" / "report.json").exists()
