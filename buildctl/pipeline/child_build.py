"""A build run by another process (a multi-recipe build's recipes, `invoke bisect`'s steps, any later
worker): a typed, versioned job in, a JSON-lines event stream out. Both sides import this module; the
child's entry point is cli/child.py, and the parent is given its command line (`Child.command`) by the
command that starts it, so no layer below cli/ names cli/.

    job    (stdin, one JSON object): Job.to_json(). On stdin, so no --set value, password or token stands
           on a command line (readable in /proc) or in an environment.
    events (stdout, one JSON object a line, each {"v": SCHEMA, "event": NAME, ...}):
           step_started {step} · step_finished {step, seconds, status} · line {text} · warning {text} ·
           key {key, known} · result {ok, key, artifact, out_dir, cached, published, known, compile_cache,
           failure: {step, error, diagnosis: {id, title, cause, fix}, bundle, first_error}}.
           The result is the last event; a stream without one, a line that is not an event of this
           schema, or another version is a ChildStreamError naming the child and its last event.

The child's own view (EventView) writes the events; the parent reads records, never display text, and
hands them to an ordinary View (`replay`). Texts that came from a build are shown without terminal
controls by whoever shows them (the views)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import IO, TYPE_CHECKING, Any

from buildctl.errors import BuildctlError, InputError
from buildctl.settings import Settings
from buildctl.terminal_text import strip_controls
from buildctl.ui import View

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA = 1
TASKS = ("build", "verify", "key")
MAX_JOB_BYTES = 1 << 20
MAX_EVENT_BYTES = 1 << 20  # one event line; a build's log lines are far shorter
STDERR_TAIL = 20


class ChildStreamError(BuildctlError):
    """A child's event stream that does not read: malformed, of another schema, or ended without a result
    (`returncode`: the child's; 130 or a signal's: it was stopped)."""

    def __init__(self, message: str, *, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


def _version(data: Any, what: str) -> dict:
    if not isinstance(data, dict):
        raise InputError(f"{what}: not a JSON object; fix: write it with child_build's to_json")
    if data.get("v") != SCHEMA:
        raise InputError(f"{what}: schema version {data.get('v')!r}, this buildctl reads {SCHEMA}; fix: run the "
                         "parent and the child from the same buildctl")
    return data


# --- the job ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """What a child does. task "build": the recipe with `sets`, up to `until` (None: the whole build),
    verified when `verify`; "verify": the published `artifact` verified on the settings' engine; "key":
    the key a build would have (a dry run: nothing written, nothing pulled), nothing built. A build with
    `key_first` computes that key first and reports it (the key event); when it is one of `known_keys`
    (keys whose result the parent has: a bisect log) it builds nothing. `settings`: the parent's, with the
    one engine the child runs on; taken as they are, never read again from the child's environment."""

    task: str
    recipe: str
    settings: Settings
    sets: tuple[str, ...] = ()
    until: str | None = None
    verify: bool = True
    no_preflight: bool = False
    artifact: str | None = None
    key_first: bool = False
    known_keys: frozenset[str] = frozenset()

    def to_json(self) -> dict:
        return {"v": SCHEMA, "task": self.task, "recipe": self.recipe, "sets": list(self.sets),
                "until": self.until, "verify": self.verify, "no_preflight": self.no_preflight,
                "artifact": self.artifact, "key_first": self.key_first, "known_keys": sorted(self.known_keys),
                "settings": self.settings.model_dump(mode="json")}

    @classmethod
    def from_json(cls, data: Any, *, environ: Mapping[str, str]) -> Job:
        """The job `data` holds; its settings carry `environ`, the child's own environment (inherited from
        the parent, never written into the job: it holds secrets), and take none of their values from it."""
        data = _version(data, "the child's job")
        if data.get("task") not in TASKS or not isinstance(data.get("recipe"), str):
            raise InputError(f"the child's job: task {data.get('task')!r} or its recipe does not read; fix: "
                             f"task one of {', '.join(TASKS)}, with a recipe")
        # model_validate, not from_env: the values as the parent chose them, never the environment's
        settings = Settings.model_validate(data.get("settings") or {}).with_environ(environ)
        return cls(data["task"], data["recipe"], settings,
                   tuple(str(s) for s in data.get("sets") or ()), data.get("until"), bool(data.get("verify", True)),
                   bool(data.get("no_preflight")), data.get("artifact"), bool(data.get("key_first")),
                   frozenset(str(k) for k in data.get("known_keys") or ()))

    @property
    def engine_url(self) -> str | None:
        return self.settings.engines[0] if self.settings.engines else None


# --- the events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepStarted:
    step: str


@dataclass(frozen=True)
class StepFinished:
    step: str
    seconds: float | None
    status: str = "ok"


@dataclass(frozen=True)
class Line:
    text: str


@dataclass(frozen=True)
class Warned:
    text: str


@dataclass(frozen=True)
class KeyKnown:
    """The build's key, as its dry run computes it, before anything is built; `known`: one of the job's
    known_keys (the child builds nothing)."""

    key: str
    known: bool = False


@dataclass(frozen=True)
class Diagnosis:
    id: str
    title: str
    cause: str = ""
    fix: str = ""


@dataclass(frozen=True)
class Failure:
    """Why a child's build has no artifact: the step ("refused": the job was bad input; "buildctl": no
    result of the build at all, the engine went away), its one-line error, the diagnosis (None: no known
    cause), the repro bundle and the first error lines."""

    step: str
    error: str
    diagnosis: Diagnosis | None = None
    bundle: str | None = None
    first_error: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    ok: bool
    key: str | None = None
    artifact: str | None = None  # the published artifact (or, verification failed, the folder it is kept in)
    out_dir: str | None = None  # --until's outputs
    cached: bool = False
    published: bool = False
    known: bool = False  # the key was one of the job's known_keys: nothing built
    compile_cache: dict[str, int] | None = None  # {"hits", "misses"}
    failure: Failure | None = None


Event = StepStarted | StepFinished | Line | Warned | KeyKnown | Result
NAMES: dict[str, type] = {"step_started": StepStarted, "step_finished": StepFinished, "line": Line,
                          "warning": Warned, "key": KeyKnown, "result": Result}
_NAME_OF = {cls: name for name, cls in NAMES.items()}


def to_json(event: Event) -> dict:
    return {"v": SCHEMA, "event": _NAME_OF[type(event)], **asdict(event)}


def from_json(data: Any) -> Event:
    """An event from its JSON; InputError (one line) for anything else."""
    data = _version(data, "an event")
    cls = NAMES.get(data.get("event"))
    if cls is None:
        raise InputError(f"an event named {str(data.get('event'))[:40]!r}: not one of {', '.join(NAMES)}")
    fields = {k: v for k, v in data.items() if k not in ("v", "event")}
    try:
        if cls is Result:
            failure = fields.get("failure")
            if failure is not None:
                diagnosis = failure.get("diagnosis")
                failure = Failure(**{**failure, "diagnosis": Diagnosis(**diagnosis) if diagnosis else None,
                                     "first_error": tuple(failure.get("first_error") or ())})
            event = Result(**{**fields, "failure": failure})
        else:
            event = cls(**fields)
    except (TypeError, AttributeError) as e:
        raise InputError(f"a {data['event']} event does not read: {str(e)[:120]}") from None
    _check_types(event)
    return event


def _check_types(event: Event) -> None:
    texts = {StepStarted: ("step",), StepFinished: ("step", "status"), Line: ("text",), Warned: ("text",),
             KeyKnown: ("key",)}.get(type(event), ())
    if any(not isinstance(getattr(event, name), str) for name in texts):
        raise InputError(f"a {_NAME_OF[type(event)]} event does not read: a text field is not a string")
    if isinstance(event, Result) and not isinstance(event.ok, bool):
        raise InputError("a result event does not read: ok is not true or false")


# --- the child's side: a view that writes the stream ------------------------------------------------


class EventView(View):
    """The child's view: every step change and log line as an event on `stream` (the child's stdout);
    `console`: where a verification prints its report (the child's stderr, never the stream)."""

    def __init__(self, stream: IO[str], console: Console) -> None:
        super().__init__()
        self.stream, self.console = stream, console
        self._lock = threading.Lock()  # the pipeline reports from more than one thread

    def emit(self, event: Event) -> None:
        text = json.dumps(to_json(event), default=str)
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def step_started(self, name: str) -> None:
        super().step_started(name)
        self.emit(StepStarted(name))

    def step_finished(self, name: str, seconds: float | None, status: str = "ok") -> None:
        super().step_finished(name, seconds, status)
        self.emit(StepFinished(name, seconds, status))

    def line(self, text: str) -> None:
        self.emit(Line(text))


# --- the parent's side -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """How to start a child: its whole command line (the job goes on its stdin), given by the command
    that starts children (cli/child_command.py's CHILD), and a name for messages."""

    command: tuple[str, ...]
    name: str = "child build"


def start(child: Child, job: Job, *, own_session: bool = False) -> subprocess.Popen:
    """A child with `job` on its stdin (own_session: in a session of its own, so that a terminal's Ctrl-C
    reaches only the parent, which stops it)."""
    proc = subprocess.Popen(list(child.command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE, text=True, start_new_session=own_session)
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(job.to_json()))
        proc.stdin.close()
    except OSError:  # a child that ended at once: its result, or its stderr, says why
        pass
    return proc


@dataclass
class Followed:
    """What a finished child said: its result, exit code and the last lines of its stderr."""

    result: Result
    returncode: int
    stderr_tail: list[str] = field(default_factory=list)


def follow(proc: subprocess.Popen, name: str, on_event: Callable[[Event], None]) -> Followed:
    """Every event of a running child to `on_event` as it comes, then its result. A line that is not an
    event, or a stream that ends without a result (the child crashed or was killed), is a ChildStreamError
    naming the child and its last event; the child is stopped, never waited on while it writes."""
    assert proc.stdout is not None and proc.stderr is not None
    tail: deque[str] = deque(maxlen=STDERR_TAIL)
    drain = threading.Thread(target=lambda: tail.extend(strip_controls(ln.rstrip("\n"))[:300] for ln in proc.stderr),
                             daemon=True)
    drain.start()
    last: Event | None = None
    problem: str | None = None
    while True:
        line = proc.stdout.readline(MAX_EVENT_BYTES + 1)
        if not line:
            break
        try:
            if len(line) > MAX_EVENT_BYTES:
                raise InputError(f"a line of over {MAX_EVENT_BYTES} bytes")
            event = from_json(json.loads(line))
        except (ValueError, InputError) as e:
            problem = f"{str(e).splitlines()[0][:200]} ({line.strip()[:80]!r})"
            break
        if last is not None and isinstance(last, Result):
            problem = "an event after its result"
            break
        last = event
        on_event(event)
    if problem is not None:
        proc.kill()
    proc.wait()
    drain.join(timeout=5)
    said = f"its last event {describe(last)}" if last is not None else "no event"
    if problem is not None:
        raise ChildStreamError(f"{name}: its event stream does not read: {problem}, after {said}",
                               returncode=proc.returncode)
    if not isinstance(last, Result):
        why = next((ln for ln in reversed(tail) if ln.strip()), f"exit {proc.returncode}")
        raise ChildStreamError(f"{name}: its event stream ended without a result (exit {proc.returncode}: {why}), "
                               f"after {said}", returncode=proc.returncode)
    return Followed(last, proc.returncode, list(tail))


def describe(event: Event) -> str:
    """An event in a few words, for messages."""
    shown = {k: v for k, v in to_json(event).items() if k != "v"}
    return strip_controls(json.dumps(shown, default=str))[:160]


def replay(event: Event, view: View) -> None:
    """A step, log line or warning of a child, shown by an ordinary view (the key and the result are the
    parent's to read)."""
    if isinstance(event, StepStarted):
        view.step_started(event.step)
    elif isinstance(event, StepFinished):
        view.step_finished(event.step, event.seconds, event.status)
    elif isinstance(event, (Line, Warned)):
        view.line(("warning: " if isinstance(event, Warned) else "") + event.text)


def job_for(task: str, recipe: str, sets: Sequence[str], chosen: Settings, engine_url: str, **fields: Any) -> Job:
    """A job with the parent's settings and the one engine the child runs on (never the several-engines
    path again); verified unless the settings say --no-verify; `fields`: the Job's other fields."""
    own = chosen.model_copy(update={"engines": (engine_url,) if engine_url else ()})
    fields.setdefault("verify", not chosen.no_verify)
    return Job(task, recipe, own, tuple(sets), **fields)
