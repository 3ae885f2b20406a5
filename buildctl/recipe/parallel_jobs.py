"""MAX_JOBS from cores and memory.

The rule (docs/compatibility.md, "Parallel jobs"):

    jobs = max(1, min(cpus, floor((mem - RESERVE) / per_job)))
    per_job = PER_JOB[accelerator], x DEBUG_INFO_MEMORY_FACTOR for a build with debug information

with RESERVE = 2 GiB (the OS, the container engine, ninja, the linker's final steps) and PER_JOB the
peak resident memory of one compiler process: about 2.5 GiB for PyTorch's C++ translation units,
about 5 GiB once nvcc/hipcc compile CUDA/ROCm kernels (flash-attention and other templated kernel
units peak at several GB each; pytorch/pytorch#108174: FA2 OOM in a 16 GB container, fixed with
MAX_JOBS=2; dusty-nv/jetson-containers#1619 and #1577: builds killed in ninja at 80% RAM).
Debug and RelWithDebInfo builds carry debug information, which the compilers and above all the final
link hold in memory: their per-job figure is 2.3 times the Release one (measured, see
DEBUG_INFO_MEMORY_FACTOR). An explicit integer in the recipe passes through unchanged.

The build runs inside the container engine, which may be remote, so the numbers that matter are the
engine's (`engine_resources`, from `docker info`); `host_resources` reads this machine's, honouring
CPU affinity and cgroup limits.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MiB, GiB = 1024**2, 1024**3
RESERVE_BYTES = 2 * GiB
PER_JOB_BYTES: dict[str, int] = {
    "cpu": int(2.5 * GiB),
    "ascend": int(2.5 * GiB),  # torch_npu is host C++; CANN kernels come prebuilt
    "cuda": 5 * GiB,
    "rocm": 5 * GiB,
}
# Measured with 2 jobs on 2 cores (cgroup max_usage, page cache included): the Release CPU build peaked at
# 4.18 GiB (docs/evidence/pytorch2.6-cpu-trixie), the Debug one at 11.48 GiB, in the link of libtorch_cpu.so
# and its 1.3 GB of DWARF (docs/evidence/pytorch2.6-cpu-trixie-debug). 11.48 GiB over the 5.0 GiB the rule
# budgets for 2 Release jobs is 2.3: the Debug budget (2 x 5.75 GiB = 11.5 GiB) meets the measured peak.
# That counter includes page cache (a second Debug build read 16.51 GiB by it, alone on the machine); the
# link of libtorch_cpu.so re-run alone peaked at 5.28 GiB resident in ld, under the 5.75 GiB of one job.
# RelWithDebInfo (-O2 -g) carries the same debug information; CUDA and ROCm builds are not measured Debug
# and take the same factor (their host code and link carry the DWARF; device code only line tables, no -G).
DEBUG_INFO_MEMORY_FACTOR = 2.3
BUILD_TYPES_WITH_DEBUG_INFO = ("Debug", "RelWithDebInfo")

Accelerator = Literal["cuda", "rocm", "cpu", "ascend"]


@dataclass(frozen=True)
class Resources:
    cpus: int
    mem_bytes: int
    source: str  # where the numbers came from, for the explanation


def _gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


def per_job_bytes(accelerator: str, build_type: str) -> int:
    """The memory one compile job is given: the accelerator's figure, scaled for debug information."""
    per_job = PER_JOB_BYTES.get(accelerator, PER_JOB_BYTES["cuda"])
    if build_type in BUILD_TYPES_WITH_DEBUG_INFO:
        return round(per_job * DEBUG_INFO_MEMORY_FACTOR / MiB) * MiB  # whole MiB: the build script's unit
    return per_job


def memory_jobs(mem_bytes: int, accelerator: str, build_type: str) -> int:
    """How many compile jobs fit in `mem_bytes` (before the cpu cap), at least 1."""
    return max(1, (mem_bytes - RESERVE_BYTES) // per_job_bytes(accelerator, build_type))


def max_jobs(setting: str | int, *, cpus: int, mem_bytes: int, accelerator: str,
             build_type: str) -> tuple[int, str]:
    """The MAX_JOBS to build with, and a one-line explanation of how (without the number itself,
    e.g. "min(16 cpus, (32.0 GiB - 2.0 GiB reserve) / 5.0 GiB per cuda job = 6), limited by memory";
    a build with debug information says so: "... / 5.8 GiB per cpu Debug job ...")."""
    if not isinstance(setting, str):
        n = int(setting)
        hint = memory_jobs(mem_bytes, accelerator, build_type)
        rule = min(max(cpus, 1), hint)
        note = f"; the memory rule would give {rule}" if n > rule else ""
        return n, f"set explicitly (build.max_jobs or --jobs){note}"
    if setting != "auto":
        raise ValueError(f"max_jobs setting must be 'auto' or an integer, not {setting!r}")
    if accelerator not in PER_JOB_BYTES:
        raise ValueError(f"unknown accelerator {accelerator!r}")
    per_job = per_job_bytes(accelerator, build_type)
    by_mem = memory_jobs(mem_bytes, accelerator, build_type)
    cpus = max(1, cpus)
    jobs = max(1, min(cpus, by_mem))
    limit = "cores" if cpus <= by_mem else "memory"
    kind = f"{accelerator} {build_type}" if build_type in BUILD_TYPES_WITH_DEBUG_INFO else accelerator
    return jobs, (
        f"min({cpus} cpus, ({_gib(mem_bytes)} - {_gib(RESERVE_BYTES)} reserve) / "
        f"{_gib(per_job)} per {kind} job = {by_mem}), limited by {limit}"
    )


# ---------------------------------------------------------------------------------------------------
# Where the numbers come from
# ---------------------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _cgroup_paths(root: Path) -> tuple[str | None, dict[str, str]]:
    """(cgroup v2 path, {v1 controller: path}) of this process from /proc/self/cgroup."""
    text = _read(root / "proc/self/cgroup") or ""
    v2, v1 = None, {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        for c in controllers.split(","):
            if c:
                v1[c] = path
    return v2, v1


def _candidates(mount: Path, path: str | None) -> list[Path]:
    """The cgroup dir and its ancestors (a limit anywhere up the tree applies), plus the mount root
    (inside a container the process's own cgroup is mounted at the root)."""
    dirs = []
    if path:
        p = Path(path.lstrip("/"))
        while True:
            dirs.append(mount / p)
            if p == Path(".") or str(p) == "":
                break
            p = p.parent
    dirs.append(mount)
    seen, out = set(), []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _v2_mount(root: Path) -> Path | None:
    for mount in (root / "sys/fs/cgroup", root / "sys/fs/cgroup/unified"):
        if (mount / "cgroup.controllers").exists():
            return mount
    return None


def cgroup_cpu_limit(root: Path = Path("/")) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max, v1 cfs_quota/period), None if unlimited."""
    v2, v1 = _cgroup_paths(root)
    limits: list[float] = []
    mount = _v2_mount(root)
    if mount is not None:
        for d in _candidates(mount, v2):
            text = _read(d / "cpu.max")
            if text:
                quota, _, period = text.partition(" ")
                if quota != "max" and quota.isdigit() and period.isdigit() and int(period) > 0:
                    limits.append(int(quota) / int(period))
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        mount = root / "sys/fs/cgroup" / name
        if not mount.is_dir():
            continue
        for d in _candidates(mount, v1.get("cpu")):
            quota, period = _read(d / "cpu.cfs_quota_us"), _read(d / "cpu.cfs_period_us")
            if quota and period and quota.lstrip("-").isdigit() and period.isdigit():
                if int(quota) > 0 and int(period) > 0:
                    limits.append(int(quota) / int(period))
        break
    return min(limits) if limits else None


def cgroup_mem_limit(root: Path = Path("/")) -> int | None:
    """Bytes allowed by the cgroup (v2 memory.max, v1 memory.limit_in_bytes), None if unlimited."""
    v2, v1 = _cgroup_paths(root)
    limits: list[int] = []
    mount = _v2_mount(root)
    if mount is not None:
        for d in _candidates(mount, v2):
            text = _read(d / "memory.max")
            if text and text.isdigit():
                limits.append(int(text))
    mount = root / "sys/fs/cgroup/memory"
    if mount.is_dir():
        for d in _candidates(mount, v1.get("memory")):
            text = _read(d / "memory.limit_in_bytes")
            # v1 reports "unlimited" as a huge page-aligned number (2^63 - 4096).
            if text and text.isdigit() and int(text) < 2**62:
                limits.append(int(text))
    return min(limits) if limits else None


def meminfo_total(root: Path = Path("/")) -> int | None:
    for line in (_read(root / "proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def host_resources(root: Path | str = Path("/")) -> Resources:
    """This machine's CPUs (affinity, capped by the cgroup quota) and memory (cgroup limit, else
    MemTotal). `root` lets tests point at a fake /proc and /sys."""
    root = Path(root)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    src = ["sched_getaffinity"]
    quota = cgroup_cpu_limit(root)
    if quota is not None and math.ceil(quota) < cpus:
        cpus = max(1, math.ceil(quota))
        src.append("cgroup cpu quota")
    total = meminfo_total(root)
    limit = cgroup_mem_limit(root)
    if limit is not None and (total is None or limit < total):
        mem, msrc = limit, "cgroup memory limit"
    else:
        mem, msrc = total or 0, "/proc/meminfo MemTotal"
    return Resources(cpus=max(1, cpus), mem_bytes=mem, source=f"host: {' + '.join(src)}, {msrc}")


def engine_resources(engine_facts: dict | None) -> Resources:
    """CPUs and memory of the container engine: `engine.engine_facts()` keys cpus/memory_bytes, or
    the raw `docker info` keys NCPU/MemTotal. Without them, this host's (`host_resources`), said so
    in `source`."""
    facts = engine_facts or {}

    def pick(*keys: str) -> int:
        for k in keys:
            v = facts.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return 0

    cpus, mem = pick("cpus", "NCPU"), pick("memory_bytes", "MemTotal")
    if cpus <= 0 or mem <= 0:
        host = host_resources()
        return Resources(host.cpus, host.mem_bytes, f"engine reported no NCPU/MemTotal; {host.source}")
    return Resources(cpus=cpus, mem_bytes=mem, source="engine: docker info NCPU, MemTotal")
