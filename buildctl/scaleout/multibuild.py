"""`invoke build` of several recipes (`--recipe a --recipe b`, `--label L`) over several engines
(`--engine URL`, repeatable, or BUILDCTL_ENGINES).

Every recipe is loaded and checked before anything starts. Each engine answers with its cores and
memory (`docker info`); `fanout.plan` says which engine builds what. Each build is a process of its own
(`python -m buildctl.cli.child`): its own signal handling, key lock, clean-up and repro bundle, exactly as
`invoke build --recipe R --engine E --json` on its own. Its job, the recipe, the --set values, this
command's Settings with its one engine, comes on its stdin: nothing on its command line (readable in
/proc), nothing written back into its environment, which it inherits as this command was given it and
from which it reads no setting (a lowercase buildctl_engines there once sent each child down this
multi-engine path again, without end). The engines run side by
side, each its queue one after the other; a failure on one engine stops nothing else. The artifacts
all land in the one local store. A CUDA recipe built where no GPU is is verified afterwards on an
engine with the NVIDIA runtime, when the list has one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from buildctl import engine, settings
from buildctl.errors import BuildctlError, EngineError, InputError
from buildctl.recipe.schema import Spec
from buildctl.scaleout import plan
from buildctl.store import artifacts
from buildctl.store.manifest import Manifest
from buildctl.ui import print_json, strip_controls, warning_console


@dataclass
class Outcome:
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


def engine_capacity(url: str) -> tuple[plan.EngineCapacity | None, str | None]:
    """An engine's cores, memory and GPU runtime; or why it cannot be used (one line)."""
    name = engine.display_name(url)
    try:
        facts = engine.facts_at(url or None)
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


CHILD = [sys.executable, "-m", "buildctl.cli.child"]  # the whole command line of a child: its job is on stdin


def start_child(job: dict, *, own_session: bool = False) -> subprocess.Popen:
    """A child build with `job` on its stdin (own_session: in a session of its own, so that a terminal's
    Ctrl-C reaches only the parent, which stops it)."""
    proc = subprocess.Popen(CHILD, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
                            start_new_session=own_session)
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
    except OSError:  # a child that ended at once: its stderr says why
        pass
    return proc


def follow_child(proc: subprocess.Popen, on_step: Callable[[str], None], on_line: Callable[[str], None]) -> dict | None:
    """A running child's stderr, without terminal controls, as it comes: the name of each step it starts
    ("[configure] ...") to on_step, every other non-blank line to on_line; then, once it ended, its JSON
    (stdout) when that is an object, else None."""
    assert proc.stdout is not None and proc.stderr is not None
    stdout_chunks: list[str] = []
    reader = threading.Thread(target=lambda: stdout_chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    for line in proc.stderr:
        line = strip_controls(line.rstrip("\n"))
        if line.startswith("[") and line.endswith("] ..."):
            on_step(line[1:-5])
        elif line.strip():
            on_line(line)
    proc.wait()
    reader.join()
    try:
        payload = json.loads("".join(stdout_chunks) or "null")
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def verification_engine(placement: plan.Placement, chosen: settings.Settings) -> str | None:
    """The engine the placement's wheel is verified on; None with --no-verify (nowhere)."""
    return None if chosen.no_verify else placement.verify_on


def child_jobs(placement: plan.Placement, recipe: str, sets: list[str], urls: dict[str, str],
               chosen: settings.Settings, no_preflight: bool = False) -> tuple[dict, dict | None]:
    """The child build's job, and the verification's on another engine (None: the build verifies itself,
    or nothing is verified: --no-verify). A job: the recipe, --set values, this command's Settings with
    the engine it runs on (its only one), as JSON."""
    where = verification_engine(placement, chosen)
    elsewhere = where not in (None, placement.engine)
    build = child_job("build", recipe, sets, chosen, urls[placement.engine], no_preflight=no_preflight,
                      **({"no_verify": True} if elsewhere else {}))
    return build, (child_job("verify", recipe, sets, chosen, urls[where], no_preflight=no_preflight)
                   if elsewhere else None)


def child_job(task: str, recipe: str, sets: Sequence[str], chosen: settings.Settings, engine_url: str, *, no_preflight: bool = False,
              **changes) -> dict:
    """One child's job (buildctl.cli.child reads it on stdin): the recipe, --set values, this command's
    Settings with `changes` and the one engine the child runs on (never the several-engines path again)."""
    own = chosen.model_copy(update={"engines": (engine_url,) if engine_url else (), **changes})
    return {"task": task, "recipe": recipe, "sets": list(sets), "engine": engine_url, "no_preflight": no_preflight,
            "settings": own.model_dump(mode="json")}


def run_one(placement: plan.Placement, recipe: str, sets: list[str], urls: dict[str, str],
            chosen: settings.Settings, outcome: Outcome, changed: Callable[[], None], no_preflight: bool = False) -> None:
    """The placement's build (and, elsewhere, its verification) as child processes; fills `outcome`."""
    build_job, verify_job = child_jobs(placement, recipe, sets, urls, chosen, no_preflight)
    outcome.started = time.monotonic()
    payload = _child(build_job, outcome, changed)
    if payload is not None and payload.get("ok") and verify_job is not None:
        outcome.step = f"verify on {placement.verify_on}"
        changed()
        verified = _child(verify_job, outcome, changed)
        if verified is None or not verified.get("ok", verified.get("passed", False)):
            payload = {**payload, "ok": False,
                       "error": (verified or {}).get("error") or f"verification on {placement.verify_on} failed"}
    outcome.seconds = round(time.monotonic() - outcome.started, 1)
    payload = payload or {}
    outcome.ok = bool(payload.get("ok"))
    outcome.key, outcome.artifact = payload.get("key"), payload.get("artifact")
    outcome.bundle = payload.get("bundle")
    if not outcome.ok:
        outcome.error = payload.get("error") or (outcome.log_tail[-1] if outcome.log_tail else "failed")
    outcome.step = "done" if outcome.ok else "failed"
    changed()


def _child(job: dict, outcome: Outcome, changed: Callable[[], None]) -> dict | None:
    """Run one child with `job`; its steps and last lines move `outcome`; its JSON is the result."""

    def step(name: str) -> None:
        outcome.step = name
        changed()

    def line(text: str) -> None:
        outcome.log_tail = [*outcome.log_tail[-4:], text[:300]]
        changed()

    return follow_child(start_child(job), step, line)


def table(outcomes: list[Outcome]) -> Table:
    t = Table(title="Builds", title_justify="left")
    for col in ("recipe", "engine", "step", "time", "result"):
        t.add_column(col, overflow="fold")
    for o in outcomes:
        secs = o.seconds if o.seconds is not None else (time.monotonic() - o.started if o.started else None)
        result = "" if o.ok is None else ("[green]ok[/]" if o.ok else "[red]failed[/]")
        t.add_row(o.recipe, o.engine, o.step, f"{secs:.0f}s" if secs is not None else "", result)
    return t


def run(specs: list[tuple[str, Spec]], sets: list[str], chosen: settings.Settings, *, as_json: bool,
        no_preflight: bool = False) -> list[Outcome]:
    """Build `specs` ((recipe argument, spec) pairs) over the chosen engines; the outcomes, in plan order."""
    urls_given = list(chosen.engines) or [settings.docker_host()]
    capacities, urls = [], {}
    err = warning_console()
    for url in urls_given:
        cap, why = engine_capacity(url)
        if cap is None:
            err.print(f"warning: engine {why}; building on the others", markup=False)
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
    outcomes = {p.job.recipe: Outcome(p.job.recipe, p.engine, verification_engine(p, chosen)) for p in placements}
    ordered = [outcomes[p.job.recipe] for p in placements]
    lock = threading.Lock()
    live = Live(table(ordered), console=err, refresh_per_second=2, transient=False) if err.is_terminal and not as_json \
        else None
    printed: dict[str, str] = {}

    def changed() -> None:
        with lock:
            if live is not None:
                live.update(table(ordered))
                return
            for o in ordered:  # plain lines (CI logs): one per step change
                if printed.get(o.recipe) != o.step:
                    printed[o.recipe] = o.step
                    err.print(f"==> {o.recipe} on {o.engine}: {o.step}", markup=False)

    def engine_queue(queue: list[plan.Placement]) -> None:
        for p in queue:
            arg, _ = by_name[p.job.recipe]
            run_one(p, arg, sets, urls, chosen, outcomes[p.job.recipe], changed, no_preflight)

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


def print_outcomes(outcomes: list[Outcome], *, as_json: bool, out: Console) -> None:
    if as_json:
        print_json({"ok": all(o.ok for o in outcomes), "builds": [o.to_dict() for o in outcomes]})
        return
    out.print(table(outcomes))
    for o in outcomes:
        if not o.ok:
            out.print(Text(f"{o.recipe} on {o.engine}: {o.error}" + (f" (repro bundle: {o.bundle})" if o.bundle else "")))


def select(recipes: list[str], labels: list[str]) -> list[str]:
    """The recipes --recipe names and those --label selects, each once: a recipe is the file it resolves
    to, however it was named (a name from recipes/ or a path). A --label no recipe has is an InputError."""
    from buildctl import recipe as recipe_mod

    chosen: dict[Path, str] = {}
    for arg in recipes:
        chosen.setdefault(recipe_mod.recipe_path(arg).resolve(), arg)
    if labels:
        labelled = [path for path in recipe_mod.list_recipes()
                    if set(labels) & set(recipe_mod.load(str(path)).labels)]
        if not labelled:
            raise InputError(f"--label {','.join(labels)}: no recipe has it; fix: see `invoke recipes` for labels")
        for path in labelled:
            chosen.setdefault(path.resolve(), str(path))
    return list(chosen.values())
