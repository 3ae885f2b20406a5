"""A bisect log's entries as frozen records (log.py writes and reads them; bisector.py makes them; report.py
shows them), each with to_json/from_json as store/key.py's KeyInputs has.

The JSON is the shape the log has always had (version 1): a log written before these records is read
as it is. A log is a file in the store, so `from_json` trusts nothing: an entry of another shape is an
InputError (one line), and the log passes it over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from buildctl.bisect.search import FAIL, PASS, SKIP, Failure
from buildctl.errors import InputError
from buildctl.pipeline import child_build

RESULTS = (PASS, FAIL, SKIP)


def _texts(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
        raise InputError(f"a bisect log entry's {what} is not a list of texts")
    return tuple(value)


def _text(value: Any, what: str, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"a bisect log entry's {what} is not a text")
    return value


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"a bisect log entry's {what} is not a number")
    return float(value)


def _object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"a bisect log entry's {what} is not an object")
    return value


@dataclass(frozen=True)
class StepCriterion:
    """What a recorded step was judged by: built up to `until` (None: the whole build), verified or not."""

    until: str | None = None
    verify: bool = True

    def to_json(self) -> dict:
        return {"until": self.until, "verify": self.verify}

    @classmethod
    def from_json(cls, data: Any) -> StepCriterion:
        data = _object(data, "criterion")
        return cls(_text(data.get("until"), "criterion's until"), bool(data.get("verify")))


@dataclass(frozen=True)
class Diagnosis(child_build.Diagnosis):
    """A step's diagnosis as its child build sent it (child_build.Diagnosis), as the bisect log keeps it."""

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "cause": self.cause, "fix": self.fix}

    @classmethod
    def from_json(cls, data: Any) -> Diagnosis:
        data = _object(data, "diagnosis")
        return cls(*(str(data.get(k) or "") for k in ("id", "title", "cause", "fix")))


@dataclass(frozen=True)
class CacheFigures:
    """The compile cache's hits and misses of a step's build."""

    hits: int
    misses: int

    def to_json(self) -> dict:
        return {"hits": self.hits, "misses": self.misses}

    @classmethod
    def from_json(cls, data: Any) -> CacheFigures | None:
        if not (isinstance(data, dict) and isinstance(data.get("hits"), int) and isinstance(data.get("misses"), int)):
            return None
        return cls(data["hits"], data["misses"])


def failure_json(failure: Failure | None) -> dict | None:
    if failure is None:
        return None
    return {"step": failure.step, "diagnosis": failure.diagnosis, "title": failure.title}


def _failure(data: Any) -> Failure | None:
    if data is None:
        return None
    data = _object(data, "failure")
    return Failure(str(_text(data.get("step"), "failure's step", optional=False)),
                   _text(data.get("diagnosis"), "failure's diagnosis"), _text(data.get("title"), "failure's title"))


@dataclass(frozen=True)
class BuildRecord:
    """A step's build: whether it worked, its time, where its artifact (or --until's outputs) went, the
    compile cache's figures; when it failed, the failure the search compares, the one-line error, the repro
    bundle, the first error lines and the diagnosis."""

    ok: bool
    seconds: float | None = None
    cached: bool = False
    artifact: str | None = None
    out_dir: str | None = None
    cache: CacheFigures | None = None
    failure: Failure | None = None
    error: str | None = None
    bundle: str | None = None
    first_error: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None

    def to_json(self) -> dict:
        return {"ok": self.ok, "seconds": self.seconds, "cached": self.cached, "artifact": self.artifact,
                "out_dir": self.out_dir, "cache": self.cache.to_json() if self.cache else None,
                "failure": failure_json(self.failure), "error": self.error, "bundle": self.bundle,
                "first_error": list(self.first_error),
                "diagnosis": self.diagnosis.to_json() if self.diagnosis else None}

    @classmethod
    def from_json(cls, data: Any) -> BuildRecord:
        data = _object(data, "build")
        if not isinstance(data.get("ok"), bool):
            raise InputError("a bisect log entry's build says neither ok nor failed")
        return cls(data["ok"], _number(data.get("seconds"), "build's seconds"), bool(data.get("cached")),
                   _text(data.get("artifact"), "artifact"), _text(data.get("out_dir"), "out_dir"),
                   CacheFigures.from_json(data.get("cache")), _failure(data.get("failure")),
                   _text(data.get("error"), "error"), _text(data.get("bundle"), "bundle"),
                   _texts(data.get("first_error"), "first error lines"),
                   Diagnosis.from_json(data["diagnosis"]) if data.get("diagnosis") else None)


@dataclass(frozen=True)
class TestRecord:
    """`--test` against a step's artifact: the command's digest, its exit code, its last lines, its time."""

    digest: str
    exit_code: int
    tail: tuple[str, ...] = ()
    seconds: float | None = None

    def to_json(self) -> dict:
        return {"digest": self.digest, "exit_code": self.exit_code, "tail": list(self.tail), "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: Any) -> TestRecord | None:
        if data is None:
            return None
        data = _object(data, "test")
        if isinstance(data.get("exit_code"), bool) or not isinstance(data.get("exit_code"), int):
            raise InputError("a bisect log entry's test has no exit code")
        return cls(str(_text(data.get("digest"), "test's digest", optional=False)), data["exit_code"],
                   _texts(data.get("tail"), "test's last lines"), _number(data.get("seconds"), "test's seconds"))


@dataclass(frozen=True)
class Entry:
    """One step of a bisect: the position and its label, the artifact key it was built (or found) under,
    the criterion, the step's own --set overrides, its build, its test, and how it was judged (pass, fail,
    skip, and why). `source` is where it came from this run; the log does not keep it."""

    position: int
    label: str
    key: str
    criterion: StepCriterion
    build: BuildRecord
    engine: str | None = None
    sets: tuple[str, ...] = ()
    test: TestRecord | None = None
    result: str = "skip"
    why: str = ""
    source: str = "built"  # built now, "logged" (this log's) or "found" (another bisect's)

    def to_json(self) -> dict:
        return {"position": self.position, "label": self.label, "key": self.key, "engine": self.engine,
                "criterion": self.criterion.to_json(), "sets": list(self.sets), "build": self.build.to_json(),
                "test": self.test.to_json() if self.test else None, "result": self.result, "why": self.why}

    @classmethod
    def from_json(cls, data: Any) -> Entry:
        data = _object(data, "entry")
        if isinstance(data.get("position"), bool) or not isinstance(data.get("position"), int):
            raise InputError("a bisect log entry has no position")
        if data.get("result") not in RESULTS:
            raise InputError(f"a bisect log entry's result is not one of {', '.join(RESULTS)}")
        return cls(data["position"], str(_text(data.get("label"), "label", optional=False)),
                   str(_text(data.get("key"), "key", optional=False)), StepCriterion.from_json(data.get("criterion")),
                   BuildRecord.from_json(data.get("build")), _text(data.get("engine"), "engine"),
                   _texts(data.get("sets"), "sets"), TestRecord.from_json(data.get("test")), data["result"],
                   str(_text(data.get("why"), "why", optional=False)))

    @property
    def failure(self) -> Failure | None:
        """The build's failure, as the search compares it (None: it built)."""
        return None if self.build.ok else self.build.failure
