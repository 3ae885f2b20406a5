"""buildctl.recipe.parallel_jobs: the MAX_JOBS rule and where cpus/memory come from."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildctl.recipe import parallel_jobs
from buildctl.recipe.parallel_jobs import GiB, engine_resources, host_resources, max_jobs


@pytest.mark.parametrize(
    ("cpus", "mem_gib", "acc", "expected"),
    [
        (2, 24, "cpu", 2),  # cores limit
        (16, 32, "cuda", 6),  # (32 - 2) / 5
        (64, 64, "cuda", 12),  # (64 - 2) / 5 = 12.4
        (64, 64, "cpu", 24),  # (64 - 2) / 2.5 = 24.8
        (16, 16, "rocm", 2),  # (16 - 2) / 5 = 2.8; pytorch#108174 had to set MAX_JOBS=2 at 16 GB
        (8, 2, "cuda", 1),  # never below 1
        (0, 64, "cpu", 1),
        (32, 128, "ascend", 32),
    ],
)
def test_auto_rule(cpus, mem_gib, acc, expected):
    n, why = max_jobs("auto", cpus=cpus, mem_bytes=mem_gib * GiB, accelerator=acc, build_type="Release")
    assert n == expected
    assert why.startswith(f"min({max(cpus, 1)} cpus, ") and "\n" not in why


def test_explanation_names_the_limit():
    assert "limited by cores" in max_jobs("auto", cpus=2, mem_bytes=24 * GiB, accelerator="cpu", build_type="Release")[1]
    assert "limited by memory" in max_jobs("auto", cpus=16, mem_bytes=32 * GiB, accelerator="cuda",
                                           build_type="Release")[1]


def test_integer_passes_through():
    n, why = max_jobs(4, cpus=2, mem_bytes=8 * GiB, accelerator="cuda", build_type="Release")
    assert n == 4 and "set explicitly" in why and "would give 1" in why
    n, why = max_jobs(2, cpus=64, mem_bytes=64 * GiB, accelerator="cuda", build_type="Release")
    assert n == 2 and "would give" not in why


def test_bad_setting():
    with pytest.raises(ValueError):
        max_jobs("many", cpus=2, mem_bytes=8 * GiB, accelerator="cpu", build_type="Release")
    with pytest.raises(ValueError):
        max_jobs("auto", cpus=2, mem_bytes=8 * GiB, accelerator="tpu", build_type="Release")


def test_constants_match_docs():
    assert parallel_jobs.RESERVE_BYTES == 2 * GiB
    assert parallel_jobs.PER_JOB_BYTES["cpu"] == int(2.5 * GiB)
    assert parallel_jobs.PER_JOB_BYTES["cuda"] == parallel_jobs.PER_JOB_BYTES["rocm"] == 5 * GiB
    assert parallel_jobs.per_job_bytes("cpu", "Debug") == 5888 << 20  # 2.5 GiB x 2.3 = 5.75 GiB, exactly
    assert parallel_jobs.per_job_bytes("cuda", "RelWithDebInfo") == 11776 << 20


# The measured peaks, 2 jobs on a 2-core 24 GiB machine (cgroup max_usage, page cache included):
# docs/evidence/pytorch2.6-cpu-trixie/README.md (Release) and docs/evidence/pytorch2.6-cpu-trixie-debug/README.md
# (Debug: 12.33 GB, in the link of libtorch_cpu.so).
MEASURED_PEAK_GIB = {"Release": 4.18, "Debug": 12.33e9 / GiB}


@pytest.mark.parametrize("build_type", ["Release", "Debug"])
def test_the_rule_predicts_the_measured_peak_within_25_percent(build_type):
    jobs, _ = max_jobs("auto", cpus=2, mem_bytes=24 * GiB, accelerator="cpu", build_type=build_type)
    assert jobs == 2  # what both builds ran with
    predicted_gib = jobs * parallel_jobs.per_job_bytes("cpu", build_type) / GiB
    assert predicted_gib == pytest.approx(MEASURED_PEAK_GIB[build_type], rel=0.25)


# The largest single job, measured alone: the Debug link of libtorch_cpu.so re-run from the second Debug
# build's directory with its own command line, ld's peak RSS (docs/evidence/pytorch2.6-cpu-trixie-debug).
MEASURED_DEBUG_LINK_GIB = 5.28


def test_one_debug_job_covers_the_measured_link_of_libtorch_cpu():
    per_job_gib = parallel_jobs.per_job_bytes("cpu", "Debug") / GiB
    assert MEASURED_DEBUG_LINK_GIB <= per_job_gib == pytest.approx(MEASURED_DEBUG_LINK_GIB, rel=0.25)


def test_debug_information_takes_more_memory_per_job_and_says_so():
    release = max_jobs("auto", cpus=64, mem_bytes=64 * GiB, accelerator="cpu", build_type="Release")
    debug = max_jobs("auto", cpus=64, mem_bytes=64 * GiB, accelerator="cpu", build_type="Debug")
    relwithdebinfo = max_jobs("auto", cpus=64, mem_bytes=64 * GiB, accelerator="cpu", build_type="RelWithDebInfo")
    assert release == (24, "min(64 cpus, (64.0 GiB - 2.0 GiB reserve) / 2.5 GiB per cpu job = 24), limited by memory")
    assert debug == (10, "min(64 cpus, (64.0 GiB - 2.0 GiB reserve) / 5.8 GiB per cpu Debug job = 10), "
                         "limited by memory")  # 62 / 5.75 = 10.8
    assert relwithdebinfo[0] == 10 and "per cpu RelWithDebInfo job" in relwithdebinfo[1]
    assert max_jobs(12, cpus=64, mem_bytes=64 * GiB, accelerator="cpu", build_type="Debug")[1].endswith(
        "the memory rule would give 10")


def test_engine_resources_both_key_styles():
    r = engine_resources({"NCPU": 16, "MemTotal": 32 * GiB})
    assert (r.cpus, r.mem_bytes) == (16, 32 * GiB)
    r = engine_resources({"cpus": 8, "memory_bytes": 16 * GiB})
    assert (r.cpus, r.mem_bytes) == (8, 16 * GiB)
    r = engine_resources({})  # falls back to this host, and says so
    assert r.cpus >= 1 and "engine reported no NCPU/MemTotal" in r.source


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def test_host_resources_real_host():
    r = host_resources()
    assert r.cpus >= 1 and r.mem_bytes > 0 and r.source.startswith("host:")


def test_host_resources_cgroup_v2(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "0::/build.slice/job\n")
    _write(tmp_path, "proc/meminfo", "MemTotal:       65536000 kB\nMemFree: 1 kB\n")
    _write(tmp_path, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
    _write(tmp_path, "sys/fs/cgroup/build.slice/job/cpu.max", "max 100000\n")
    _write(tmp_path, "sys/fs/cgroup/build.slice/job/memory.max", "max\n")
    _write(tmp_path, "sys/fs/cgroup/build.slice/cpu.max", "100000 100000\n")  # a parent limits: 1 cpu
    _write(tmp_path, "sys/fs/cgroup/build.slice/memory.max", str(8 * GiB) + "\n")
    r = host_resources(tmp_path)
    assert r.cpus == 1
    assert r.mem_bytes == 8 * GiB and "cgroup memory limit" in r.source


def test_host_resources_cgroup_v1_unlimited(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n")
    _write(tmp_path, "proc/meminfo", "MemTotal:       1048576 kB\n")
    _write(tmp_path, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    r = host_resources(tmp_path)
    assert r.mem_bytes == GiB and "MemTotal" in r.source
    assert parallel_jobs.cgroup_cpu_limit(tmp_path) is None


def test_host_resources_cgroup_v1_limited(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/\n1:cpu,cpuacct:/\n")
    _write(tmp_path, "proc/meminfo", "MemTotal:       67108864 kB\n")
    _write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", str(4 * GiB))
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000")
    _write(tmp_path, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000")
    assert parallel_jobs.cgroup_mem_limit(tmp_path) == 4 * GiB
    assert parallel_jobs.cgroup_cpu_limit(tmp_path) == 1.5
    assert host_resources(tmp_path).cpus <= 2
