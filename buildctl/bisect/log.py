"""The bisect log: `<artifacts>/.bisect/<digest of the request>.json`, written whole and atomically after
every step, so an interrupted bisect resumes with the same command and a finished one replays in seconds.

A step is reused only for the same artifact key (what a build of it would be keyed by now: the recipe,
its files, buildctl's templates and the base image, computed again before the step is reused) and the
same criterion (`--until`, verification, the `--test` command's digest). A step another bisect recorded
(another log in the folder) counts too: a step built once is free the second time, failed or not.
Failures that say nothing of the change (the network, a full disk, memory) are not reused: they are
built again.

The logs are files in the store: read capped, each entry read into its record (record.py) or passed
over with a one-line note, never trusted in part. The entries' JSON is the shape version 1 always had:
logs written before the records were typed read as they are.
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

from buildctl.bisect.record import Entry, StepCriterion
from buildctl.errors import InputError
from buildctl.secrets import Masker, filtered, mask_data

FOLDER = ".bisect"
VERSION = 1
MAX_LOG_BYTES = 8 << 20
MAX_LOGS_READ = 200
# Diagnoses of the machine, not of the change: such a failure is built again rather than reused.
NOT_REUSED = frozenset({"network", "disk-full", "oom", "tls-untrusted"})
# A child build that printed no result (buildctl itself failed: the engine went away) says nothing either.
NOT_REUSED_STEPS = frozenset({"buildctl"})


def folder(root: Path) -> Path:
    return Path(root) / FOLDER


def digest(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_digest(command: str | None) -> str | None:
    return hashlib.sha256(command.encode()).hexdigest()[:16] if command else None


def entries(steps: list[Any]) -> list[Entry]:
    """The entries of a log's steps that read (record.Entry.from_json); the others are passed over."""
    read = []
    for data in steps:
        with contextlib.suppress(InputError):
            read.append(Entry.from_json(data))
    return read


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


def reusable_build(entry: Entry, key: str, criterion: StepCriterion) -> bool:
    """Whether a recorded step's build stands for a build of `key` under `criterion` now."""
    failure = entry.build.failure
    return (entry.key == key and entry.criterion == criterion
            and (failure is None or (failure.diagnosis not in NOT_REUSED and failure.step not in NOT_REUSED_STEPS)))


def _tested(entry: Entry, test: str | None) -> bool:
    return test is None or (entry.test is not None and entry.test.digest == test)


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
                                     "changes": [], "answer": None}
        self.steps: list[Entry] = []
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
        self.steps = entries(found["steps"])
        if len(self.steps) != len(found["steps"]):
            self.notes.append(f"{len(found['steps']) - len(self.steps)} entries of {self.path} do not read; passed over")
        self.data.update(state=found.get("state") if isinstance(found.get("state"), str) else "new")

    def recorded(self, position: int) -> Entry | None:
        return next((e for e in self.steps if e.position == position), None)

    def record(self, entry: Entry) -> None:
        """The step's entry (replacing one of its position), and the log written."""
        self.steps = [e for e in self.steps if e.position != entry.position] + [entry]
        self.save()

    def save(self, **fields: Any) -> None:
        self.data.update(fields)
        data = {**self.data, "steps": [e.to_json() for e in self.steps]}
        write_atomically(self.path, mask_data(data, self.masker))

    def mine(self, position: int, key: str, criterion: StepCriterion, test: str | None) -> Entry | None:
        """This log's entry of `position`, when it stands for a build of `key` under `criterion` now (and,
        when a test decides, was tested by it, or did not build)."""
        entry = self.recorded(position)
        if entry is None or not reusable_build(entry, key, criterion):
            return None
        return entry if _tested(entry, test) or not entry.build.ok else None

    def _others(self) -> Iterator[Entry]:
        for path in sorted(folder(self.root).glob("*.json"))[:MAX_LOGS_READ]:
            if path != self.path:
                yield from entries((_read(path) or {}).get("steps", []))

    def reusable_keys(self, position: int, criterion: StepCriterion, test: str | None) -> frozenset[str]:
        """The keys a step at `position` could be taken from the logs for: this log's entry of the position
        and every entry of another bisect, recorded under `criterion` (and, when a test decides, tested by
        it), not a failure of the machine. A child build given them reports its key and builds nothing."""
        mine = self.recorded(position)
        keys = {mine.key} if mine is not None and self.mine(position, mine.key, criterion, test) else set()
        keys.update(e.key for e in self._others() if reusable_build(e, e.key, criterion) and _tested(e, test))
        return frozenset(keys)

    def from_other_logs(self, key: str, criterion: StepCriterion, test: str | None) -> Entry | None:
        """A step of `key` recorded by another bisect, under the same criterion (and test, if any)."""
        return next((e for e in self._others() if reusable_build(e, key, criterion) and _tested(e, test)), None)


def write_atomically(path: Path, data: Any) -> None:
    """The file whole or not at all (a rename of a folder-local temporary file)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(filtered(data), indent=1, default=str) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
