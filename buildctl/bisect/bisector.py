"""The driver of `invoke bisect` (Bisector): its steps, each an ordinary build (`invoke build --recipe R
--set ... --json`, a child command as scale-out runs them: its own signal handling, key lock, clean-up,
artifact or repro bundle), on one engine or several side by side; with --test, the test in the artifact's
runtime image.

The run: the two ends first (the passing one must pass, the failing one fail: else one line and exit 2,
naming the end and its diagnosis), then the middle of what is left, until the search has its answer.
Each step's result is recorded in the bisect log as soon as it is known (log.py); a step already
recorded, here or by another bisect, for the same key and criterion is taken from there.

Ctrl-C (or SIGTERM): the children, each in a session of its own, get one SIGTERM from here and stop
as a build does (container removed, the build directory kept for the next run); the log keeps every
finished step; the same command resumes.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from buildctl import engine, settings
from buildctl.bisect import search
from buildctl.bisect.axes import Axis
from buildctl.bisect.child import Criterion, build_job, build_record, clip_lines, failure_of
from buildctl.bisect.log import NOT_REUSED_STEPS, BisectLog, test_digest
from buildctl.bisect.record import Entry, TestRecord
from buildctl.errors import BuildctlError, InputError
from buildctl.pipeline import child_build
from buildctl.pipeline.published import test_artifact
from buildctl.recipe.schema import Spec
from buildctl.terminal_text import strip_controls
from buildctl.ui import View

WORD = {search.PASS: "good", search.FAIL: "bad", search.SKIP: "skip"}
STOP_WAIT_S = 300  # a child stopping after Ctrl-C removes its container; it gets this long


@dataclass
class Running:
    position: int
    engine_url: str
    proc: subprocess.Popen
    started: float
    key: str | None = None  # once the child said it


class _StepView(View):
    """A step's child build as the bisect shows it: a line per step of the build it starts."""

    def __init__(self, say: Callable[[str], None]) -> None:
        super().__init__()
        self.say = say

    def _changed(self, name: str) -> None:
        if self.status.get(name) == "running":
            self.say(name)


@dataclass(frozen=True)
class Outcome:
    """A finished search: the answer (None only when interrupted first), the failing end's signature."""

    answer: search.Answer
    reference: str | None
    entries: dict[int, Entry]
    states: dict[int, str]
    seconds: float


@dataclass(frozen=True)
class StepBuilds:
    """What each step builds: the recipe with its base overrides (a step's change goes on top), the spec
    of each position (read here only for --test: the child build loads its own), how a child build is
    started (cli/child_command.py) and what it is given besides."""

    recipe: str
    sets: Sequence[str]
    spec_for: Callable[[int], Spec]
    child: child_build.Child
    no_preflight: bool = False


class Bisector:
    """One bisect: its axis, the spec of each position, the log, the engines; `run()` the search."""

    def __init__(self, *, builds: StepBuilds, axis: Axis, criterion: Criterion, first_good: bool,
                 chosen: settings.Settings, log: BisectLog, say: Callable[[str], None]) -> None:
        self.builds, self.axis, self.spec_for = builds, axis, builds.spec_for
        self.criterion, self.first_good, self.chosen = criterion, first_good, chosen
        self.log, self.say = log, say
        self.engines = list(chosen.engines) or [""]  # "": DOCKER_HOST's engine, as a build takes it
        self.entries: dict[int, Entry] = {}
        self.states: dict[int, str] = {}
        self.reference: str | None = None
        self.running: dict[int, Running] = {}
        self.pending: set[int] = set()  # being built, or taken from a log and not yet judged
        self.done: queue.Queue = queue.Queue()
        self.test = test_digest(criterion.test)
        self.cache_dir = chosen.cache_dir

    @property
    def n(self) -> int:
        return len(self.axis.changes)

    def _label(self, position: int) -> str:
        change = self.axis.changes[position]
        return f"{change.label} {change.subject}".strip()[:70]

    # --- one step -----------------------------------------------------------------------------

    def _reused(self, position: int, key: str) -> Entry | None:
        """This position's entry from this log or another bisect's, when it holds for `key` now (one built
        but not tested this way is built again, a no-op, and tested)."""
        criterion = self.criterion.logged()
        mine = self.log.mine(position, key, criterion, self.test)
        if mine is not None:
            return replace(mine, source="logged")
        found = self.log.from_other_logs(key, criterion, self.test)
        if found is None:
            return None
        return replace(found, position=position, label=self.axis.changes[position].label, source="found")

    def _start(self, position: int, engine_url: str) -> None:
        """The step's child build: it computes the spec and the key (a dry run), and builds unless the key is
        one the logs hold a result for."""
        self.pending.add(position)
        known = self.log.reusable_keys(position, self.criterion.logged(), self.test)
        job = build_job(self.builds.recipe, [*self.builds.sets, *self.axis.changes[position].sets], self.criterion,
                        self.chosen, engine_url, no_preflight=self.builds.no_preflight, known_keys=known)
        run = Running(position, engine_url, child_build.start(self.builds.child, job, own_session=True),
                      time.monotonic())
        self.running[position] = run
        threading.Thread(target=self._follow, args=(run,), daemon=True).start()

    def _on(self, engine_url: str) -> str:
        return f", on {engine.display_name(engine_url or self.chosen.docker_host)}" if len(self.engines) > 1 else ""

    def _where(self, position: int) -> str:
        return f"[{position}/{self.n - 1}] {self._label(position)}"

    def _follow(self, run: Running) -> None:
        """The child's events as it runs (its key, its steps), then its result; the step's entry goes to the
        queue (None: it was stopped)."""
        where = self._where(run.position)
        view = _StepView(lambda step: self.say(f"{where}: {step}"))

        def on_event(event: child_build.Event) -> None:
            if isinstance(event, child_build.KeyKnown):
                run.key = event.key
                if not event.known:
                    self.say(f"{where}: building (key {event.key}{self._on(run.engine_url)})")
            else:
                child_build.replay(event, view)

        try:
            result = child_build.follow(run.proc, f"the build of {where}", on_event).result
        except child_build.ChildStreamError as e:
            if e.returncode is not None and (e.returncode == 130 or e.returncode < 0):
                self.done.put((run.position, None))  # interrupted: nothing to record
                return
            result = child_build.Result(ok=False, key=run.key, failure=child_build.Failure("buildctl", str(e)))
        key = result.key or run.key or ""
        reused = self._reused(run.position, key) if result.known else None
        if reused is not None:
            self.say(f"{where}: {reused.source} (key {key}), not built again")
            self.done.put((run.position, reused))
            return
        if result.known:  # the log changed under it: not expected, and built next time
            result = child_build.Result(ok=False, key=key, failure=child_build.Failure(
                "buildctl", f"the logs no longer hold the step of key {key}"))
        change = self.axis.changes[run.position]
        entry = Entry(run.position, change.label, key, self.criterion.logged(),
                      build_record(result, round(time.monotonic() - run.started, 1)),
                      engine=engine.display_name(run.engine_url or self.chosen.docker_host), sets=tuple(change.sets))
        self.done.put((run.position, entry))

    def _tested(self, entry: Entry) -> Entry:
        """The test against this step's artifact (in the main thread: Ctrl-C removes its container)."""
        if not self.criterion.test or not entry.build.ok or entry.test is not None or self.test is None:
            return entry
        position = entry.position
        self.say(f"{self._where(position)}: testing")
        t0 = time.monotonic()
        lines: list[str] = []
        try:
            res = test_artifact(self.spec_for(position), Path(str(entry.build.artifact)), self.criterion.test,
                               on_line=lines.append, cache_dir=self.cache_dir,
                               timeout=self.criterion.test_timeout, engine_url=self.engines[0] or None,
                               environ=self.chosen.environ())
            code, tail = res.exit_code, list(res.tail)
        except BuildctlError as e:  # the runtime image or the wheelhouse: the test never ran
            code, tail = 125, [str(e).splitlines()[0]]
        return replace(entry, test=TestRecord(self.test, code, tuple(clip_lines(tail)), round(time.monotonic() - t0, 1)))

    def _judge(self, entry: Entry) -> Entry:
        result, why = search.judge(failure_of(entry), reference=self.reference,
                                   test_exit=entry.test.exit_code if entry.test else None,
                                   testing=bool(self.criterion.test))
        return replace(entry, result=result, why=why)

    # --- the search ---------------------------------------------------------------------------

    def _free_engines(self) -> list[str]:
        busy = [r.engine_url for r in self.running.values()]
        free = list(self.engines)
        for url in busy:
            free.remove(url)
        return free

    def _wait(self) -> Entry:
        position, entry = self.done.get()
        self.running.pop(position, None)
        self.pending.discard(position)
        if entry is None:
            raise KeyboardInterrupt
        failure = entry.failure
        if failure is not None and failure.step in NOT_REUSED_STEPS:  # no result: the engine or buildctl, not the change
            raise BuildctlError(f"{self._where(position)}: its build ended without a result ({failure.title}); "
                                f"the log keeps {len(self.log.steps)} steps; fix: that, then the same command resumes")
        entry = self._judge(self._tested(entry))
        if entry.source != "logged":
            self.log.record(entry)
        self.entries[position] = entry
        took = entry.build.seconds
        self.say(f"{self._where(position)}: {WORD[entry.result]}" + (f" ({entry.why})" if entry.why else "")
                 + (f", {took:.0f} s" if took is not None and entry.source == "built" else ""))
        return entry

    def _run_positions(self, positions: list[int]) -> None:
        """Build these positions (side by side on the engines) and wait for all of them."""
        todo = list(positions)
        while todo or self.pending:
            for url in self._free_engines():
                if not todo:
                    break
                self._start(todo.pop(0), url)
            if self.pending:
                self._wait()

    def _check_ends(self) -> None:
        old, new = 0, self.n - 1
        self._run_positions([old, new])
        failing, passing = (old, new) if self.first_good else (new, old)
        names = {failing: "--bad", passing: "--good"}
        for position in (passing, failing):  # judged on their own: no reference yet
            self.entries[position] = self._judge(self.entries[position])
        passed, failed = self.entries[passing], self.entries[failing]
        if passed.result != search.PASS:
            raise InputError(f"{names[passing]} {self.axis.changes[passing].label} does not pass: "
                             f"{_reason(passed)}; fix: give a {names[passing]} end that passes "
                             f"{self.criterion.describe()}")
        if failed.result != search.FAIL:
            what = "passes" if failed.result == search.PASS else f"cannot say ({failed.why})"
            raise InputError(f"{names[failing]} {self.axis.changes[failing].label} does not fail: it {what}; fix: give a "
                             f"{names[failing]} end that fails {self.criterion.describe()}")
        f = failure_of(failed)
        self.reference = f.signature if f is not None and not self.criterion.test else None
        for position in (old, new):
            self.entries[position] = self._judge(self.entries[position])
            self.states[position] = search.position_state(self.entries[position].result, first_good=self.first_good)

    def run(self) -> Outcome:
        t0 = time.monotonic()
        self.log.save(state="running", changes=[c.label for c in self.axis.changes])
        try:
            self._check_ends()
            while (found := search.answer(self.states)) is None:
                free = len(self._free_engines())
                for position in search.next_steps(self.states, self.pending, free):
                    self._start(position, self._free_engines()[0])
                entry = self._wait()
                self.states[entry.position] = search.position_state(entry.result, first_good=self.first_good)
            while self.pending:  # a step started beside the last one: its result is recorded, not needed
                self._wait()
        except KeyboardInterrupt:
            self._stop_children()
            self.log.save(state="interrupted")
            raise
        except BaseException:  # an end that does not hold, an engine gone: the steps done stay usable
            self._stop_children()
            self.log.save(state="stopped")
            raise
        self.log.save(state="finished", answer={"last_old": found.last_old, "first_new": found.first_new,
                                                "skipped": list(found.skipped)})
        return Outcome(found, self.reference, self.entries, self.states, round(time.monotonic() - t0, 1))

    def _stop_children(self) -> None:
        """One SIGTERM each (they run in sessions of their own; a build takes SIGTERM as Ctrl-C, and no
        shell leaves it ignored as a background job leaves SIGINT), then wait for them to clean up."""
        for run in self.running.values():
            if run.proc.poll() is None:
                run.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for run in self.running.values():
            try:
                run.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                run.proc.kill()
                self.say(f"{self._where(run.position)}: its build did not stop in {STOP_WAIT_S} s and was killed; its "
                         "container may still run (invoke clean removes it once it stops)")


def _reason(entry: Entry) -> str:
    """Why an end does not hold, with its first error line when no diagnosis names the cause."""
    f = failure_of(entry)
    why = entry.why or (f.describe() if f else "it passes")
    first = entry.build.first_error or (entry.test.tail if entry.test else ())
    if f is not None and not f.diagnosis and first:  # the block starts with context lines: its error line
        line = next((x for x in first if any(w in x.lower() for w in ("error", "fatal", "failed"))), first[0])
        why += f" ({strip_controls(line)[:160]})"
    return why

