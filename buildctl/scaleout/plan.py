"""Several recipes over several engines: which engine builds what, and in which order (pure).

Each engine's capacity for a recipe is the MAX_JOBS rule on that engine's own cores and memory
(recipe/parallel_jobs.py's `max_jobs`, from `docker info`), so a 64-core engine counts as 32 2-core ones
for a C++ build and a memory-poor engine counts less for a CUDA build. The plan is the classic
longest-job-first list schedule: recipes by estimated cost (core-seconds), largest first, each to the
engine where it would finish earliest. An engine runs its recipes one after the other with all its
jobs; engines run side by side. Verification needs the recipe's accelerator: a CUDA recipe is verified
on an engine with the NVIDIA runtime when one is in the list (else its build is verified without a
GPU, as on one engine).
"""

from __future__ import annotations

from dataclasses import dataclass

from buildctl.recipe import parallel_jobs

# Core-seconds of a cold build, when no earlier manifest of the recipe says better: the demo framework
# compiles ~30 files; PyTorch's CPU build measured 20,270 core-s on 2 cores (docs/evidence/pytorch2.6-
# cpu-trixie), a CUDA build for one arch was projected at 39-50 core-hours (pytorch2.6-cuda12.4-trixie).
DEFAULT_COST_CORE_S = {"demofw": 120.0, "cpu": 20_000.0, "rocm": 60_000.0, "ascend": 25_000.0, "cuda": 160_000.0}


@dataclass(frozen=True)
class EngineCapacity:
    name: str  # as the user gave it, credentials masked
    cpus: int
    mem_bytes: int
    verifies: frozenset[str]  # accelerators whose verification can run there ("cpu" always)


@dataclass(frozen=True)
class Job:
    recipe: str
    accelerator: str
    cost_core_s: float
    build_type: str = "Release"  # Debug and RelWithDebInfo give each compile job more memory


@dataclass(frozen=True)
class Placement:
    job: Job
    engine: str
    max_jobs: int
    start_s: float  # estimated, from the plan's start
    end_s: float
    verify_on: str | None  # the engine to verify on; None: no engine in the list has the accelerator


def cost(framework: str, accelerator: str, manifest=None) -> float:
    """A recipe's estimated core-seconds: its last manifest's compile time x jobs, else the table above."""
    if manifest:
        seconds = manifest.durations_s.get("compile")
        n = manifest.max_jobs
        if isinstance(seconds, (int, float)) and isinstance(n, int) and seconds > 0 and n > 0:
            return float(seconds) * n
    return DEFAULT_COST_CORE_S["demofw" if framework == "demofw" else accelerator]


def capacity(engine: EngineCapacity, accelerator: str, build_type: str = "Release") -> int:
    return parallel_jobs.max_jobs("auto", cpus=engine.cpus, mem_bytes=engine.mem_bytes, accelerator=accelerator,
                                  build_type=build_type)[0]


def verify_engine(job: Job, built_on: str, engines: list[EngineCapacity]) -> str | None:
    """Where the job's wheel is verified: the engine that built it when it can, else the first that can."""
    by_name = {e.name: e for e in engines}
    if job.accelerator in by_name[built_on].verifies:
        return built_on
    return next((e.name for e in engines if job.accelerator in e.verifies), None)


def plan(work: list[Job], engines: list[EngineCapacity]) -> list[Placement]:
    """Longest job first, each to the engine where it would end earliest (ties: the engine listed first)."""
    if not engines:
        raise ValueError("no engine to plan on")
    busy_until = {e.name: 0.0 for e in engines}
    placements = []
    for job in sorted(work, key=lambda j: (-j.cost_core_s, j.recipe)):
        ends = {e.name: busy_until[e.name] + job.cost_core_s / capacity(e, job.accelerator, job.build_type)
                for e in engines}
        best = min(engines, key=lambda e: ends[e.name])  # min() keeps the first of equals: the user's order
        start, finish = busy_until[best.name], ends[best.name]
        busy_until[best.name] = finish
        placements.append(Placement(job, best.name, capacity(best, job.accelerator, job.build_type), start, finish,
                                    verify_engine(job, best.name, engines)))
    return placements


def per_engine(placements: list[Placement]) -> dict[str, list[Placement]]:
    """Each engine's queue, in the order it runs it."""
    queues: dict[str, list[Placement]] = {}
    for p in sorted(placements, key=lambda p: p.start_s):
        queues.setdefault(p.engine, []).append(p)
    return queues
