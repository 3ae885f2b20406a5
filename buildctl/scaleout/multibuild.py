"""`invoke build` of several recipes (`--recipe a --recipe b`, `--label L`) over several engines
(`--engine URL`, repeatable, or BUILDCTL_ENGINES).

Every recipe is loaded and checked before anything starts. Each engine answers with its cores and
memory (`docker info`); `plan.plan` says which engine builds what. Each build is a process of its own
(pipeline/child_build.py, started as the command says: `python -m buildctl.cli.child`): its own signal
handling, key lock, clean-up and repro bundle, as `invoke build --recipe R --engine E` on its own. Its
job, the recipe, the --set values, this command's Settings with its one engine, comes on its stdin:
nothing on its command line (readable in /proc), nothing written back into its environment, which it
inherits as this command was given it and from which it reads no setting (a lowercase buildctl_engines
there once sent each child down this multi-engine path again, without end). Its steps and result come
back as events, never as display text. The engines run side by
side, each its queue one after the other; a failure on one engine stops nothing else. The artifacts
all land in the one local store. A CUDA recipe built where no GPU is is verified afterwards on an
engine with the NVIDIA runtime, when the list has one.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from buildctl import engine, settings
from buildctl.errors import BuildctlError, EngineError, InputError
from buildctl.pipeline import child_build
from buildctl.recipe.schema import Spec
from buildctl.scaleout import plan
from buildctl.store import artifacts
from buildctl.store.manifest import Manifest
from buildctl.terminal_text import strip_controls
from buildctl.ui import View


@dataclass
class RecipeOutcome:
    """One recipe's run, as the table shows it and --json prints it."""

    recipe: str
    engine: str
    verify_on: str | None
    step: str = "waiting"
    ok: bool | None = None
    started: float | None = None
    seconds: float | None = None
    artifact: str | None = None
    key: str | None = None
    error: str | None = None
    bundle: str | None = None
    log_tail: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "engine": self.engine, "verified_on": self.verify_on, "ok": bool(self.ok),
                "seconds": self.seconds, "key": self.key, "artifact": self.artifact, "error": self.error,
                "bundle": self.bundle}


def engine_capacity(url: str, environ: Mapping[str, str]) -> tuple[plan.EngineCapacity | None, str | None]:
    """An engine's cores, memory and GPU runtime; or why it cannot be used (one line). `environ`: the command's
    (the engine's DOCKER_TLS_* settings)."""
    name = engine.display_name(url)
    try:
        facts = engine.facts_at(url or None, environ=environ)
    except BuildctlError as e:
        return None, f"{name}: {str(e).splitlines()[0]}"
    verifies = frozenset({"cpu", "ascend", "rocm"} | ({"cuda"} if facts.get("nvidia_runtime") else set()))
    return plan.EngineCapacity(name, int(facts.get("cpus") or 1), int(facts.get("memory_bytes") or 0),
                                 verifies), None


def last_manifest(root: Path, recipe: str) -> Manifest | None:
    """The newest manifest of `recipe` in the artifacts folder (its compile time sizes the plan); None
    when there is none or it does not read. Reading it for the plan is not a use (invoke clean)."""
    newest = artifacts.newest(recipe, root)
    try:
        return Manifest.read(newest) if newest else None
    except InputError:
        return None


@dataclass(frozen=True)
class Fleet:
    """What every child of one multi-recipe build is given: the --set values, the engines by name, this
    command's settings, --no-preflight, and how a child is started (cli/child_command.py)."""

    sets: tuple[str, ...]
    urls: dict[str, str]
    chosen: settings.Settings
    child: child_build.Child
    no_preflight: bool = False


def verification_engine(placement: plan.Placement, chosen: settings.Settings) -> str | None:
    """The engine the placement's wheel is verified on; None with --no-verify (nowhere)."""
    return None if chosen.no_verify else placement.verify_on


def build_job(placement: plan.Placement, recipe: str, fleet: Fleet) -> child_build.Job:
    """The placement's child build: verified where it is built, unless its verification goes to another
    engine (or nowhere: --no-verify)."""
    where = verification_engine(placement, fleet.chosen)
    return child_build.job_for("build", recipe, fleet.sets, fleet.chosen, fleet.urls[placement.engine],
                               verify=where == placement.engine, no_preflight=fleet.no_preflight)


class _OutcomeView(View):
    """A child's steps and last log lines, shown in its row of the table."""

    def __init__(self, outcome: RecipeOutcome, changed: Callable[[], None]) -> None:
        super().__init__()
        self.outcome, self.changed = outcome, changed

    def _changed(self, name: str) -> None:
        if self.status.get(name) == "running":
            self.outcome.step = name
            self.changed()

    def line(self, text: str) -> None:
        self.outcome.log_tail = [*self.outcome.log_tail[-4:], strip_controls(text)[:300]]


def _child(job: child_build.Job, fleet: Fleet, outcome: RecipeOutcome,
           changed: Callable[[], None]) -> child_build.Result:
    """One child run with `job`; its events move `outcome`; its result (a stream that does not read: a
    failure of buildctl's, with the reason)."""
    view = _OutcomeView(outcome, changed)
    name = f"{fleet.child.name} of {outcome.recipe} on {outcome.engine}"
    try:
        return child_build.follow(child_build.start(fleet.child, job), name,
                                  lambda event: child_build.replay(event, view)).result
    except child_build.ChildStreamError as e:
        return child_build.Result(ok=False, failure=child_build.Failure("buildctl", str(e)))


def run_one(placement: plan.Placement, recipe: str, fleet: Fleet, outcome: RecipeOutcome,
            changed: Callable[[], None]) -> None:
    """The placement's build (and, elsewhere, its verification) as child processes; fills `outcome`."""
    outcome.started = time.monotonic()
    result = _child(build_job(placement, recipe, fleet), fleet, outcome, changed)
    where = verification_engine(placement, fleet.chosen)
    if result.ok and where not in (None, placement.engine):
        outcome.step = f"verify on {where}"
        changed()
        job = child_build.job_for("verify", recipe, fleet.sets, fleet.chosen, fleet.urls[where],
                                  artifact=result.artifact, no_preflight=True)
        verified = _child(job, fleet, outcome, changed)
        if not verified.ok:
            error = verified.failure.error if verified.failure else f"verification on {where} failed"
            result = dataclasses.replace(result, ok=False, failure=child_build.Failure("verify", error))
    outcome.seconds = round(time.monotonic() - outcome.started, 1)
    outcome.ok = result.ok
    outcome.key, outcome.artifact = result.key, result.artifact
    if result.failure is not None:
        outcome.bundle = result.failure.bundle
        outcome.error = result.failure.error
    elif not outcome.ok:
        outcome.error = outcome.log_tail[-1] if outcome.log_tail else "failed"
    outcome.step = "done" if outcome.ok else "failed"
    changed()


def table(outcomes: list[RecipeOutcome]) -> Table:
    t = Table(title="Builds", title_justify="left")
    for col in ("recipe", "engine", "step", "time", "result"):
        t.add_column(col, overflow="fold")
    for o in outcomes:
        secs = o.seconds if o.seconds is not None else (time.monotonic() - o.started if o.started else None)
        result = "" if o.ok is None else ("[green]ok[/]" if o.ok else "[red]failed[/]")
        t.add_row(o.recipe, o.engine, o.step, f"{secs:.0f}s" if secs is not None else "", result)
    return t


def run(specs: list[tuple[str, Spec]], sets: list[str], chosen: settings.Settings, *, child: child_build.Child,
        console: Console, as_json: bool, no_preflight: bool = False) -> list[RecipeOutcome]:
    """Build `specs` ((recipe argument, spec) pairs) over the chosen engines, each a child process started
    as `child` says; the outcomes, in plan order. The warnings and the progress (a live table on a terminal,
    else a line per step) go to `console`, the caller's (stderr: --json's stdout carries the JSON)."""
    urls_given = list(chosen.engines) or [chosen.docker_host]
    capacities, urls = [], {}
    for url in urls_given:
        cap, why = engine_capacity(url, chosen.environ())
        if cap is None:
            console.print(f"warning: engine {why}; building on the others", markup=False)
            continue
        if cap.name in urls:
            raise InputError(f"--engine {cap.name} is given twice; fix: give each engine once")
        capacities.append(cap)
        urls[cap.name] = url
    if not capacities:
        raise EngineError("no engine answered; fix: check each --engine with `DOCKER_HOST=URL docker info`")
    by_name = {spec.name: (arg, spec) for arg, spec in specs}
    work = [plan.Job(spec.name, spec.accelerator,
                       plan.cost(spec.framework.name, spec.accelerator, last_manifest(chosen.artifacts, spec.name)),
                       spec.build.type)
            for _, spec in specs]
    placements = plan.plan(work, capacities)
    fleet = Fleet(tuple(sets), urls, chosen, child, no_preflight)
    outcomes = {p.job.recipe: RecipeOutcome(p.job.recipe, p.engine, verification_engine(p, chosen))
                for p in placements}
    ordered = [outcomes[p.job.recipe] for p in placements]
    lock = threading.Lock()
    live = Live(table(ordered), console=console, refresh_per_second=2, transient=False) \
        if console.is_terminal and not as_json else None
    printed: dict[str, str] = {}

    def changed() -> None:
        with lock:
            if live is not None:
                live.update(table(ordered))
                return
            for o in ordered:  # plain lines (CI logs): one per step change
                if printed.get(o.recipe) != o.step:
                    printed[o.recipe] = o.step
                    console.print(f"==> {o.recipe} on {o.engine}: {o.step}", markup=False)

    def engine_queue(queue: list[plan.Placement]) -> None:
        for p in queue:
            arg, _ = by_name[p.job.recipe]
            run_one(p, arg, fleet, outcomes[p.job.recipe], changed)

    threads = [threading.Thread(target=engine_queue, args=(q,), daemon=True)
               for q in plan.per_engine(placements).values()]
    if live is not None:
        live.start()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        if live is not None:
            live.stop()
    return ordered


def outcomes_json(outcomes: list[RecipeOutcome]) -> dict:
    """What --json prints: whether every build worked, and each build."""
    return {"ok": all(o.ok for o in outcomes), "builds": [o.to_dict() for o in outcomes]}


def print_outcomes(outcomes: list[RecipeOutcome], out: Console) -> None:
    out.print(table(outcomes))
    for o in outcomes:
        if not o.ok:
            out.print(Text(f"{o.recipe} on {o.engine}: {o.error}" + (f" (repro bundle: {o.bundle})" if o.bundle else "")))


def select(recipes: list[str], labels: list[str], recipes_dir: Path | None = None) -> list[str]:
    """The recipes --recipe names and those --label selects, each once: a recipe is the file it resolves
    to, however it was named (a name from `recipes_dir`, the settings': default recipes/; or a path). A --label
    no recipe has is an InputError."""
    from buildctl import recipe as recipe_mod

    chosen: dict[Path, str] = {}
    for arg in recipes:
        chosen.setdefault(recipe_mod.recipe_path(arg, recipes_dir).resolve(), arg)
    if labels:
        labelled = [path for path in recipe_mod.list_recipes(recipes_dir)
                    if set(labels) & set(recipe_mod.load(str(path)).labels)]
        if not labelled:
            raise InputError(f"--label {','.join(labels)}: no recipe has it; fix: see `invoke recipes` for labels")
        for path in labelled:
            chosen.setdefault(path.resolve(), str(path))
    return list(chosen.values())
