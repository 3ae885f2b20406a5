"""`invoke --list` is what a newcomer reads first (issue 37): each task's line is its docstring's first line,
which must be a whole sentence (it was cut mid-sentence: "..., then what was")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def listed_help() -> dict[str, str]:
    """{task: its help line} as `invoke --list` prints them, wrapped lines joined."""
    proc = subprocess.run([str(Path(sys.executable).with_name("invoke")), "-r", str(REPO), "--list"],
                          capture_output=True, text=True, timeout=60, check=True)
    tasks: dict[str, str] = {}
    name = None
    for line in proc.stdout.splitlines()[1:]:
        row = re.match(r"^  (\S+)\s{2,}(.*)$", line)
        if row:
            name = row.group(1)
            tasks[name] = row.group(2).strip()
        elif line.strip() and name:
            tasks[name] += " " + line.strip()
    return tasks


def test_every_task_in_invoke_list_is_described_in_a_whole_sentence():
    tasks = listed_help()
    assert {"build", "verify", "doctor", "clean", "bisect", "debug"} <= tasks.keys(), tasks
    cut = {name: text for name, text in tasks.items()
           if not text.endswith(".") or text.endswith(("...", "…"))}
    assert cut == {}, "fix: make the task's first docstring line a whole, short sentence"
