"""Pre-staged downloads: files an air-gapped host placed in a download cache, used only when their
sha256 matches the recipe. A file with the right name and the wrong hash stops the build: it is
never used and never silently replaced by a download.
"""

from __future__ import annotations

import json
from pathlib import Path

from .artifacts import sha256_of
from .engine import StepFailed
from .spec import Download


def sha256_file(path: Path) -> str:
    """sha256 of a file, remembered in a sidecar keyed by size and mtime (runfiles are GBs)."""
    st = path.stat()
    sidecar = path.with_name(f".{path.name}.sha256")
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        cached = json.loads(sidecar.read_text())
        if {k: cached.get(k) for k in stamp} == stamp:
            return cached["sha256"]
    except (OSError, ValueError, KeyError):
        pass
    digest = sha256_of(path)
    try:
        sidecar.write_text(json.dumps({**stamp, "sha256": digest}))
    except OSError:
        pass  # a read-only cache still works, just slower
    return digest


def stage(downloads: list[tuple[str, Download]], cache_dir: str | Path | None) -> tuple[dict[str, Path], list[str]]:
    """Map downloads/<stage>/<sha256> to verified files of the cache; also the log lines to show."""
    staged: dict[str, Path] = {}
    log: list[str] = []
    if not cache_dir:
        return staged, log
    cache = Path(cache_dir).expanduser()
    for stage_name, dl in downloads:
        candidate = cache / dl.name
        if not candidate.is_file():
            log.append(f"buildctl: {dl.name} not pre-staged in {cache}; the image build downloads it")
            continue
        got = sha256_file(candidate)
        if got != dl.sha256:
            msg = f"buildctl: sha256 mismatch for {dl.name}: expected {dl.sha256}, got {got} (pre-staged {candidate})"
            raise StepFailed("fetch", 1, "\n".join([*log, msg]), detail=msg)
        staged[f"downloads/{stage_name}/{dl.sha256}"] = candidate
        log.append(f"buildctl: using pre-staged {dl.name} (sha256 verified)")
    return staged, log
