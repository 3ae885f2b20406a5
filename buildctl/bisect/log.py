"""The bisect log: `<artifacts>/.bisect/<digest of the request>.json`, written whole and atomically after
every step, so an interrupted bisect resumes with the same command and a finished one replays in seconds.

A step is reused only for the same artifact key (what a build of it would be keyed by now: the recipe,
its files, buildctl's templates and the base image, computed again before the step is reused) and the
same criterion (`--until`, verification, the `--test` command's digest). A step another bisect recorded
(another log in the folder) counts too: a step built once is free the second time, failed or not.
Failures that say nothing of the change (the network, a full disk, memory) are not reused: they are
built again.

The logs are files in the store: read capped, each entry checked for its shape; one that does not read
is passed over with a one-line note, never trusted in part.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from buildctl.errors import InputError
from buildctl.secrets import Masker, mask_data

FOLDER = ".bisect"
VERSION = 1
MAX_LOG_BYTES = 8 << 20
MAX_LOGS_READ = 200
# Diagnoses of the machine, not of the change: such a failure is built again rather than reused.
NOT_REUSED = frozenset({"network", "disk-full", "oom", "tls-untrusted"})
# A child build that printed no result (buildctl itself failed: the engine went away) says nothing either.
NOT_REUSED_STEPS = frozenset({"buildctl"})
RESULTS = ("pass", "fail", "skip")


def folder(root: Path) -> Path:
    return Path(root) / FOLDER


def digest(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_digest(command: str | None) -> str | None:
    return hashlib.sha256(command.encode()).hexdigest()[:16] if command else None


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def entry_ok(entry: Any) -> bool:
    """An entry of the shape this module writes (the reader trusts nothing else)."""
    if not isinstance(entry, dict):
        return False
    build, test = entry.get("build"), entry.get("test")
    if not (isinstance(entry.get("position"), int) and isinstance(entry.get("label"), str)
            and isinstance(entry.get("key"), str) and entry.get("result") in RESULTS
            and isinstance(entry.get("why"), str) and isinstance(entry.get("criterion"), dict)
            and isinstance(build, dict) and isinstance(build.get("ok"), bool)):
        return False
    failure = build.get("failure")
    if failure is not None and not (isinstance(failure, dict) and isinstance(failure.get("step"), str)):
        return False
    if not _is_str_list(build.get("first_error", [])):
        return False
    if test is not None and not (isinstance(test, dict) and isinstance(test.get("exit_code"), int)
                                 and isinstance(test.get("digest"), str)):
        return False
    return True


def _read(path: Path) -> dict | None:
    """A log as written, or None when it does not read (too big, not JSON, another shape)."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_LOG_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_LOG_BYTES:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("steps"), list)):
        return None
    return data


def reusable_build(entry: dict, key: str, criterion: dict) -> bool:
    """Whether a recorded step's build stands for a build of `key` under `criterion` now."""
    failure = entry["build"].get("failure") or {}
    return (entry["key"] == key and entry["criterion"].get("until") == criterion.get("until")
            and entry["criterion"].get("verify") == criterion.get("verify")
            and failure.get("diagnosis") not in NOT_REUSED and failure.get("step") not in NOT_REUSED_STEPS)


class BisectLog:
    """One request's log; held (a file lock) while its bisect runs: the same bisect started twice waits
    for nothing, it is refused."""

    def __init__(self, root: Path, request: dict[str, Any], masker: Masker | None = None) -> None:
        self.root = Path(root)
        self.masker = masker or Masker()  # every credential the bisect knows of: none is written
        self.request = request
        self.digest = digest(request)
        self.path = folder(root) / f"{self.digest}.json"
        self.notes: list[str] = []
        self.data: dict[str, Any] = {"version": VERSION, "digest": self.digest, "request": request, "state": "new",
                                     "changes": [], "steps": [], "answer": None}
        self._lock: Any = None

    @contextlib.contextmanager
    def held(self) -> Iterator[BisectLog]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = (self.path.parent / f".{self.digest}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise InputError(f"this bisect is running already (its log {self.path} is held); fix: wait for it, or "
                             "change the request") from None
        try:
            self._load()
            yield self
        finally:
            lock.close()

    def _load(self) -> None:
        if not self.path.exists():
            return
        found = _read(self.path)
        if found is None or found.get("digest") != self.digest:
            self.notes.append(f"the log {self.path} does not read; starting over (it is replaced)")
            return
        steps = [e for e in found["steps"] if entry_ok(e)]
        if len(steps) != len(found["steps"]):
            self.notes.append(f"{len(found['steps']) - len(steps)} entries of {self.path} do not read; passed over")
        self.data.update(state=found.get("state") if isinstance(found.get("state"), str) else "new", steps=steps)

    @property
    def steps(self) -> list[dict]:
        return self.data["steps"]

    def recorded(self, position: int) -> dict | None:
        return next((e for e in self.steps if e["position"] == position), None)

    def record(self, entry: dict) -> None:
        """The step's entry (replacing one of its position), and the log written."""
        self.data["steps"] = [e for e in self.steps if e["position"] != entry["position"]] + [entry]
        self.save()

    def save(self, **fields: Any) -> None:
        self.data.update(fields)
        write_atomically(self.path, mask_data(self.data, self.masker))

    def from_other_logs(self, key: str, criterion: dict, test: str | None) -> dict | None:
        """A step of `key` recorded by another bisect, under the same criterion (and test, if any)."""
        for path in sorted(folder(self.root).glob("*.json"))[:MAX_LOGS_READ]:
            if path == self.path:
                continue
            data = _read(path)
            for entry in (data or {}).get("steps", []):
                if entry_ok(entry) and reusable_build(entry, key, criterion) and \
                        (test is None or (entry.get("test") or {}).get("digest") == test):
                    return entry
        return None


def write_atomically(path: Path, data: Any) -> None:
    """The file whole or not at all (a rename of a folder-local temporary file)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=1, default=str) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
