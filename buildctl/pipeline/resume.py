"""Where a stopped build resumes, and what the stop cost.

A compile interrupted by Ctrl-C or SIGTERM leaves its build tree in the key's volume; the next
`invoke build` of that key resumes it. Two records say how that went:

* at the interrupt, the compilers still running in the container (`docker top`) and ninja's last
  `[N/M]`: their elapsed seconds are the work lost (done again after the resume). Written next to the
  key's lock as `artifacts/<recipe>/.<key>.interrupted.json` (store.artifacts.interrupted_record);
* at the resume, the build script's count of the steps already built (`resumed.txt`: ninja's dry run
  against the whole graph).

The manifest of the build that finishes carries both as `resumed`, and the summary says where it
resumed. The record file is ours, but it sits in a folder others can write: it is read with a size cap
and checked, and a bad one is ignored with a warning, never trusted.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from buildctl.store import artifacts

# Processes whose running time is compile work (gcc's and clang's back ends, CUDA's and HIP's drivers).
COMPILERS = frozenset({"cc1", "cc1plus", "cc1obj", "clang", "clang++", "nvcc", "cicc", "ptxas", "fatbinary",
                       "nvlink", "hipcc", "lld", "ld", "collect2"})
NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")
MAX_RECORD_BYTES = 64 * 1024


def last_progress(log_lines: list[str]) -> str | None:
    """ninja's last `[N/M]` in the log, or None."""
    for line in reversed(log_lines):
        m = NINJA_PROGRESS.match(line)
        if m:
            return f"[{m.group(1)}/{m.group(2)}]"
    return None


def _count(text: str) -> int | None:
    """A whole number the container reported, or None (ASCII digits only, and few: see artifact.count)."""
    text = text.strip()
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else None


def interrupt_record(top: dict, log_lines: list[str], how: str) -> dict:
    """The record of an interrupt from `docker top -eo pid,etimes,comm` of the compile container."""
    titles = [str(t).upper() for t in top.get("Titles") or []]
    in_flight = []
    if {"PID", "ELAPSED", "COMMAND"} <= set(titles):
        pid_i, el_i, cmd_i = titles.index("PID"), titles.index("ELAPSED"), titles.index("COMMAND")
        for row in top.get("Processes") or []:
            command = str(row[cmd_i]).strip()
            elapsed, pid = _count(str(row[el_i])), _count(str(row[pid_i]))
            if command in COMPILERS and elapsed is not None and pid is not None:
                in_flight.append({"pid": pid, "command": command, "elapsed_s": elapsed})
    return {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "how": how,
            "at_step": last_progress(log_lines), "in_flight": in_flight,
            "lost_core_s": sum(p["elapsed_s"] for p in in_flight)}


def write(recipe: str, key: str, record: dict, root: Path | None = None) -> Path:
    path = artifacts.interrupted_record(recipe, key, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    artifacts.write_json(path, record)
    return path


def read(recipe: str, key: str, root: Path | None = None) -> tuple[dict | None, str | None]:
    """(record, warning): the interrupt record of this key if there is a sound one."""
    path = artifacts.interrupted_record(recipe, key, root)
    if not path.is_file():
        return None, None
    try:
        if path.is_symlink() or path.stat().st_size > MAX_RECORD_BYTES:
            raise ValueError("not a small regular file")
        data = json.loads(path.read_text())
        lost = data["lost_core_s"]
        if not (isinstance(data, dict) and isinstance(lost, int) and lost >= 0
                and isinstance(data.get("in_flight"), list) and (data.get("at_step") is None
                                                                 or NINJA_PROGRESS.match(str(data["at_step"])))):
            raise ValueError("unexpected fields")
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"ignored the interrupt record {path} ({e}); fix: remove it"
    return {k: data[k] for k in ("at", "how", "at_step", "in_flight", "lost_core_s") if k in data}, None


def discard(recipe: str, key: str, root: Path | None = None) -> None:
    artifacts.interrupted_record(recipe, key, root).unlink(missing_ok=True)


def resumed_section(counts: dict[str, str], record: dict | None) -> dict | None:
    """The manifest's `resumed`: steps built before this run (from resumed.txt) and the interrupt."""
    built, total = _count(counts.get("built", "")), _count(counts.get("total", ""))
    if (built is None or total is None) and record is None:
        return None
    section: dict[str, Any] = {}
    if built is not None and total is not None:
        section.update(steps_built_before=built, steps_total=total)
    if record is not None:
        section["interrupted"] = record
    return section


def summary(section: dict | None) -> str | None:
    """One line for the build summary, e.g. 'from step 504 of 1454 (interrupted at [501/1454], 32 core-s lost)'."""
    if not section:
        return None
    parts = []
    if "steps_built_before" in section:
        parts.append(f"{section['steps_built_before']} of {section['steps_total']} steps were built already")
    rec = section.get("interrupted")
    if rec:
        parts.append(f"interrupted at {rec.get('at_step') or 'an unknown step'}, "
                     f"{rec['lost_core_s']} core-s of compiles in flight lost")
    return "; ".join(parts)
