"""A memory budget, not a job count (docs/compatibility.md "Parallel jobs"): the build runs as many jobs as
cores, and each compile, link and nvcc unit waits in buildctl's memory launcher (in_container/
memory_launcher.py) until the memory predicted for it fits the container's budget, the largest first.

The launcher sits where the compile cache and the build cluster already put a launcher: ccache's
CCACHE_PREFIX (so a cache hit costs nothing and is not measured), the dist launcher's local compiles
(BUILDCTL_MEM_LAUNCHER: remote compiles take no local memory, local fallbacks do), CMAKE_<LANG>_LINKER_LAUNCHER
for links, and CMAKE_<LANG>_COMPILER_LAUNCHER when there is no cache. Extensions' setuptools build_ext
compiles through ccache's PATH masquerade, so CCACHE_PREFIX covers them too. With build.cache sccache the
compiles run in sccache's daemon, out of any launcher's measure: the old MAX_JOBS rule applies.

Each unit's peak (its largest process's ru_maxrss) is recorded in the build's out folder
(memory-units.jsonl, kept with the artifact), and merged after every compile attempt into the host's store
(artifacts/.memory-peaks.json), which every later build of any recipe reads: the container gets a table of
predictions for its framework, version and build type (in_container/memory_predict.py: exact, nearest,
default). An OOM kill still retries with half the jobs (compile.py), and the killed unit is recorded larger.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from buildctl.in_container import HERE as IN_CONTAINER
from buildctl.in_container import memory_predict
from buildctl.recipe import parallel_jobs
from buildctl.secrets import filtered
from buildctl.store import artifacts

CONTAINER_DIR = "/usr/local/lib/buildctl-memory"
LAUNCHER = f"{CONTAINER_DIR}/memory_launcher.py"
TABLE = f"{CONTAINER_DIR}/table.json"
UNITS_FILE = "memory-units.jsonl"  # in the build's out folder, and the artifact
STORE_NAME = ".memory-peaks.json"  # in the artifacts root
MAX_STORE = 200_000  # measurements kept (a PyTorch CUDA build has about 10 000 units)
MAX_UNITS_BYTES = 16 << 20  # the launcher's record, written in the container: read capped
LARGEST_SHOWN = 5


def applies(spec, rebuild: bool) -> bool:
    """Whether the budget can sit in front of every compiler: with ccache (its prefix, which extensions'
    compiles reach through ccache's PATH masquerade too), or no cache and no extensions (CMake's launchers
    only: setuptools' build_ext would compile beside the budget); not with sccache (its daemon compiles)
    and not in the reproducibility rebuild (compiles without any launcher). Elsewhere the old rule stays."""
    cache = spec.build.cache
    return (cache == "ccache" or (cache == "none" and not spec.extensions)) and not rebuild


def jobs(setting: str | int, *, cpus: int, mem_bytes: int, accelerator: str, build_type: str) -> tuple[int, str]:
    """MAX_JOBS under the budget: as many as cores, or the explicit setting as an upper bound; the
    explanation says what the old rule would have given."""
    old, _ = parallel_jobs.max_jobs("auto", cpus=cpus, mem_bytes=mem_bytes, accelerator=accelerator,
                                    build_type=build_type)
    if not isinstance(setting, str):
        return int(setting), "set explicitly (build.max_jobs or --jobs), an upper bound; memory budgeted per unit"
    if setting != "auto":
        raise ValueError(f"max_jobs setting must be 'auto' or an integer, not {setting!r}")
    return max(1, cpus), f"{cpus} cpus; memory budgeted per unit, the old rule would give {old}"


def cpuset_size(cpuset: str | None) -> int:
    """How many CPUs a --cpuset list names ("0-3,6" is 5); 0 without one."""
    n = 0
    for part in (cpuset or "").split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            n += int(last or first) - int(first) + 1
    return n


def default_bytes(accelerator: str, build_type: str) -> int:
    """A unit never measured: one job of the old rule (conservative; its first measurement replaces it)."""
    return parallel_jobs.per_job_bytes(accelerator if accelerator in parallel_jobs.PER_JOB_BYTES else "cuda",
                                       build_type)


def store_path(root: Path | None = None) -> Path:
    return artifacts.root_or_default(root) / STORE_NAME


def load(root: Path | None = None) -> list[dict]:
    """The store's measurements (oldest first); an unreadable store is an empty one."""
    try:
        data = json.loads(store_path(root).read_text())
    except (OSError, ValueError):
        return []
    items = data.get("measurements") if isinstance(data, dict) else None
    return [m for m in items if isinstance(m, dict)] if isinstance(items, list) else []


def merge(records: list[dict], who: dict, root: Path | None = None) -> int:
    """Add one build's unit records (the launcher's lines) to the store, each under `who` (framework,
    version, build_type): the latest measurement of a unit replaces the one before. How many were added."""
    fresh = [{**who, "unit": r["unit"], "peak_bytes": r["peak_bytes"], **({"killed": True} if r.get("killed") else {})}
             for r in records]
    if not fresh:
        return 0
    replaced = {(m["unit"],) for m in fresh}
    kept = [m for m in load(root) if not ({k: m.get(k) for k in who} == who and (m.get("unit"),) in replaced)]
    merged = (kept + fresh)[-MAX_STORE:]
    path = store_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(filtered({"schema": 1, "measurements": merged})))
    tmp.replace(path)
    return len(fresh)


def read_units(out_dir: Path) -> list[dict]:
    """The launcher's lines from a compile's out folder (written in the container: untrusted, checked)."""
    path = out_dir / UNITS_FILE
    if not path.is_file() or path.is_symlink():
        return []
    with path.open("rb") as fh:
        text = fh.read(MAX_UNITS_BYTES).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if (isinstance(r, dict) and isinstance(r.get("unit"), str) and 0 < len(r["unit"]) <= 1000
                and all(isinstance(r.get(k), int) and not isinstance(r.get(k), bool) and r[k] >= 0
                        for k in ("peak_bytes", "predicted_bytes", "budget_bytes"))
                and isinstance(r.get("wait_s", 0), (int, float))):
            out.append(r)
    return out


@dataclass(frozen=True)
class Plan:
    """The compile container's part: its environment and the files copied in."""

    env: dict[str, str]
    inputs: dict[str, Path]


def plan(table_file: Path, who: dict, *, accelerator: str, cuda: bool, cache: str, work: str,
         root: Path | None = None) -> Plan:
    """Write this build's prediction table to `table_file` (from the store) and say how the container
    runs the launcher."""
    tab = memory_predict.table(load(root), who["framework"], who["version"], who["build_type"])
    table_file.write_text(json.dumps(filtered(tab)))
    env = {
        "BUILDCTL_MEM_LAUNCHER": LAUNCHER,
        "BUILDCTL_MEM_TABLE": TABLE,
        "BUILDCTL_MEM_DEFAULT": str(default_bytes(accelerator, who["build_type"])),
        "BUILDCTL_MEM_LEDGER": "/tmp/buildctl-memory",  # the container's own: no launcher of another run in it
        "BUILDCTL_MEM_OUT": f"{work}/out/{UNITS_FILE}",
        "BUILDCTL_MEM_WORK": work,
        "CMAKE_C_LINKER_LAUNCHER": LAUNCHER,
        "CMAKE_CXX_LINKER_LAUNCHER": LAUNCHER,
    }
    if cuda:
        env["CMAKE_CUDA_LINKER_LAUNCHER"] = LAUNCHER
    if cache == "ccache":
        env["CCACHE_PREFIX"] = LAUNCHER  # the dist launcher replaces it and calls this one for local compiles
    else:
        env.update(CMAKE_C_COMPILER_LAUNCHER=LAUNCHER, CMAKE_CXX_COMPILER_LAUNCHER=LAUNCHER)
        if cuda:
            env["CMAKE_CUDA_COMPILER_LAUNCHER"] = LAUNCHER
    inputs = {LAUNCHER: IN_CONTAINER / "memory_launcher.py",
              f"{CONTAINER_DIR}/memory_predict.py": IN_CONTAINER / "memory_predict.py",
              TABLE: table_file}
    return Plan(env, inputs)


def section(records: list[dict]) -> dict | None:
    """The manifest's `memory`: the budget, how long units waited for it, the largest units, OOM kills."""
    if not records:
        return None
    waited = [r for r in records if r.get("wait_s", 0) > 0.05]
    largest = sorted(records, key=lambda r: r["peak_bytes"], reverse=True)[:LARGEST_SHOWN]
    hows: dict[str, int] = {}
    for r in records:
        how = str(r.get("how", ""))[:20]
        hows[how] = hows.get(how, 0) + 1
    return {
        "budget_bytes": max(r["budget_bytes"] for r in records),
        "units": len(records),
        "wait_s": round(sum(float(r.get("wait_s", 0)) for r in records), 1),
        "units_waited": len(waited),
        "predicted_by": hows,
        "largest": [{"unit": r["unit"], "peak_bytes": r["peak_bytes"]} for r in largest],
        "oom_killed": [r["unit"] for r in records if r.get("killed")][:100],
    }


def summary_row(sec: dict) -> str:
    """The build summary's row: what waiting for memory cost, and the largest unit (a manifest's section)."""
    try:
        top = sec["largest"][0]
        text = (f"{sec['units_waited']} of {sec['units']} units waited {float(sec['wait_s']):.0f} s for the "
                f"{sec['budget_bytes'] / 1024**3:.1f} GiB budget; largest {top['unit']} "
                f"{top['peak_bytes'] / 1024**3:.2f} GiB")
    except (KeyError, IndexError, TypeError, ValueError):
        return "recorded (see the manifest's memory section)"
    return text + (f"; {len(sec['oom_killed'])} killed for memory" if sec.get("oom_killed") else "")


def summary_line(sec: dict | None) -> str | None:
    """The build log's line after the compile: what the budget cost, and the largest unit."""
    if not sec:
        return None
    gib = 1024**3
    top = sec["largest"][0]
    text = (f"buildctl: memory budget {sec['budget_bytes'] / gib:.1f} GiB: {sec['units']} units measured, "
            f"{sec['units_waited']} waited {sec['wait_s']:.0f} s for memory in all; largest {top['unit']} "
            f"{top['peak_bytes'] / gib:.2f} GiB")
    if sec["oom_killed"]:
        text += f"; {len(sec['oom_killed'])} killed for memory (recorded larger)"
    return text
