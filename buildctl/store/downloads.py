"""Pre-staged downloads: files an air-gapped host placed in a download cache, used only when their
sha256 matches the recipe. A file with the right name and the wrong hash stops the build: it is
never used and never silently replaced by a download.

The hash is computed afresh on every build, never taken from a remembered value: a value kept beside
the file is forged as easily as the file is changed, and a size+mtime stamp is restored with `touch -d`
(about 0.7 s per GB here, against minutes to hours of build).
"""

from __future__ import annotations

from pathlib import Path

from buildctl.errors import StepFailed
from buildctl.recipe.schema import Download
from buildctl.store.artifacts import sha256_of


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
        got = sha256_of(candidate)
        if got != dl.sha256:
            msg = f"buildctl: sha256 mismatch for {dl.name}: expected {dl.sha256}, got {got} (pre-staged {candidate})"
            raise StepFailed("fetch", 1, "\n".join([*log, msg]), detail=msg)
        staged[f"downloads/{stage_name}/{dl.sha256}"] = candidate
        log.append(f"buildctl: using pre-staged {dl.name} (sha256 verified)")
    return staged, log
