"""One step of `invoke bisect` as a child build (`python -m buildctl.cli.child`, its job on stdin, as scale-out
runs its builds: its own signal handling, key lock, clean-up, artifact or repro bundle): its job, and
what its JSON, its exit code and its repro bundle say, as the `build` part of a bisect log entry. The
bundle's and the payload's texts are a build's output: read capped, shown without terminal controls."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildctl import settings
from buildctl.bisect import search
from buildctl.scaleout.multibuild import child_job
from buildctl.ui import strip_controls

MAX_BUNDLE_JSON = 4 << 20
FIRST_ERROR_LINES = 12


@dataclass(frozen=True)
class Criterion:
    """What makes a step pass or fail: a step of the build (--until), the whole build with or without its
    verification, or a test command against its wheels."""

    until: str | None = None
    verify: bool = True
    test: str | None = None
    test_timeout: float = 1800

    def as_dict(self) -> dict:
        return {"until": self.until, "verify": self.verify and self.until is None and self.test is None}

    def describe(self) -> str:
        if self.test:
            return f"the test `{self.test}` (exit 0 good, 125 skip, 1-127 bad)"
        if self.until:
            return f"the build up to its {self.until} step"
        return "the build and its verification" if self.verify else "the build"


def build_job(recipe: str, sets: Sequence[str], criterion: Criterion, chosen: settings.Settings, engine_url: str,
              *, no_preflight: bool = False) -> dict:
    """The child build of one step (scale-out's child job, written to its stdin): the command's --set
    overrides, then the step's own; --no-verify when a test decides or the command said so. On stdin, no
    --set value or password stands on a command line."""
    no_verify = chosen.no_verify or (not criterion.until and (bool(criterion.test) or not criterion.verify))
    job = child_job("build", recipe, sets, chosen, engine_url, no_preflight=no_preflight, no_verify=no_verify)
    return {**job, "until": criterion.until or None}


def _read_bundle(bundle: str | None) -> dict:
    """bundle.json of a failed step (step, diagnosis, first error lines), read capped; {} when it does not read."""
    if not bundle:
        return {}
    path = Path(bundle) / "bundle.json"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BUNDLE_JSON + 1)
        data = json.loads(raw) if len(raw) <= MAX_BUNDLE_JSON else None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cache_of(payload: dict) -> dict | None:
    """Compile cache hits and misses: the manifest's (a published build), or ccache's figures the build
    left in --until's output folder."""
    cc = ((payload.get("manifest") or {}).get("compile_cache") or {}) if isinstance(payload.get("manifest"), dict) else {}
    if isinstance(cc.get("hits"), int) and isinstance(cc.get("misses"), int):
        return {"hits": cc["hits"], "misses": cc["misses"]}
    stats_file = Path(payload["out_dir"]) / "cache-stats.txt" if isinstance(payload.get("out_dir"), str) else None
    if stats_file is None or not stats_file.is_file():
        return None
    stats = {}
    for line in stats_file.read_text(errors="replace")[:100_000].splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1].strip().isdigit():
            stats[parts[0].strip()] = int(parts[1])
    return {"hits": stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0),
            "misses": stats.get("cache_miss", 0)}


def clip_lines(lines: Any, n: int = FIRST_ERROR_LINES) -> list[str]:
    return [strip_controls(str(x))[:300] for x in (lines if isinstance(lines, list) else [])][:n]


def build_record(payload: dict | None, returncode: int, stderr_tail: Sequence[str], seconds: float) -> dict:
    """The `build` part of a log entry from a child build's JSON (None: it printed none) and exit code."""
    if payload is None:
        last = next((ln for ln in reversed(stderr_tail) if ln.strip()), f"exit {returncode}")
        last = strip_controls(last).removeprefix("error: ")[:300]
        step = "refused" if returncode == 2 else "buildctl"
        return {"ok": False, "failure": {"step": step, "diagnosis": None, "title": last}, "first_error": [last],
                "error": last, "seconds": seconds}
    record: dict[str, Any] = {"ok": bool(payload.get("ok")), "seconds": seconds, "cached": bool(payload.get("cached")),
                              "artifact": payload.get("artifact"), "out_dir": payload.get("out_dir"),
                              "cache": _cache_of(payload)}
    if record["ok"]:
        record["failure"] = None
        return record
    diagnosis = payload.get("diagnosis") if isinstance(payload.get("diagnosis"), dict) else None
    record["error"] = strip_controls(str(payload.get("error") or ""))[:300]
    record["bundle"] = payload.get("bundle")
    if payload.get("bundle"):
        data = _read_bundle(payload["bundle"])
        step = str(data.get("step") or "build")
        record["first_error"] = clip_lines(data.get("first_error"))
    else:  # built and published, but its verification did not hold
        step = "verify"
        checks = ((payload.get("verification") or {}).get("checks") or []) if isinstance(payload.get("verification"), dict) else []
        failed = sorted(str(c.get("name")) for c in checks if isinstance(c, dict) and c.get("ok") is False)
        record["first_error"] = [strip_controls(str(c.get("detail") or c.get("name")))[:300]
                                 for c in checks if isinstance(c, dict) and c.get("ok") is False][:FIRST_ERROR_LINES]
        if diagnosis is None and failed:
            diagnosis = {"id": "checks:" + ",".join(failed)[:200], "title": "verification: " + ", ".join(failed)[:200]}
    record["failure"] = {"step": step, "diagnosis": (diagnosis or {}).get("id"), "title": (diagnosis or {}).get("title")}
    if diagnosis:
        record["diagnosis"] = {k: strip_controls(str(diagnosis.get(k) or ""))[:500] for k in ("id", "title", "cause", "fix")}
    return record


def failure_of(entry: dict) -> search.Failure | None:
    f = entry["build"].get("failure")
    if entry["build"].get("ok") or not isinstance(f, dict):
        return None
    return search.Failure(str(f.get("step")), f.get("diagnosis") if isinstance(f.get("diagnosis"), str) else None,
                          strip_controls(str(f.get("title")))[:200] if f.get("title") else None)
