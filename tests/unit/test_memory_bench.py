"""bench/memory.py's pure parts (issue 45): the sample, today's rule, the best fixed MAX_JOBS, the result."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_memory", REPO / "bench" / "memory.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "bench"))
    spec.loader.exec_module(module)
    return module


bench = _bench()
NATIVE = "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native"


def test_the_sample_spreads_aten_and_adds_flash_attention_avx512_and_the_longest_units():
    aten = [f"{NATIVE}/U{i:03d}.cpp.o" for i in range(100)]
    flash = f"{NATIVE}/cpu/FlashAttentionKernel.cpp.AVX512.cpp.o"
    other = ["c10/CMakeFiles/c10.dir/core/Big.cpp.o", "c10/CMakeFiles/c10.dir/core/Small.cpp.o"]
    objects = sorted([*aten, flash, *other])
    sample = bench.select_sample(objects, 5, ["c10/CMakeFiles/c10.dir/core/Big.cpp.o", "not/in/this/build.o"])
    assert flash in sample and "c10/CMakeFiles/c10.dir/core/Big.cpp.o" in sample
    # spread over the whole list (the kernel sorts last of ATen's here): U000, U025, U050, U075
    assert [o for o in sample if "/U" in o] == [f"{NATIVE}/U{i:03d}.cpp.o" for i in (0, 25, 50, 75)]
    assert len(sample) == 6 and sample == [o for o in objects if o in sample]


def test_longest_units_from_the_measured_build():
    log = "# ninja log v5\n0\t1000\t0\ta.o\tx\n0\t90000\t0\tbig.o\tx\n0\t5000\t0\tlib.so\tx\n0\t3000\t0\tb.o\tx\n"
    assert bench.longest_units(log, 2) == ["big.o", "b.o"]
    assert len(bench.longest_units(bench.CPU_BUILD_LOG.read_text(), 8)) == 8


def test_todays_rule_runs_one_job_at_3_gib_on_2_cores():
    assert bench.parse_memory("3g") == 3 * 1024**3 and bench.parse_memory("512m") == 512 * 1024**2
    assert bench.old_rule_jobs(2, bench.parse_memory("3g")) == 1


def run(wall, ok=True, kills=0):
    return {"ok": ok, "wall_s": wall, "oom_kills": kills, "retried": bool(kills), "units": 10, "waited_s": 0.0}


def test_the_result_compares_the_budget_with_the_best_clean_fixed_jobs_and_the_old_rule():
    runs = {"old-rule": run(1000.0), "fixed-1": run(1000.0), "fixed-2": run(560.0), "fixed-3": run(400.0, kills=1),
            "fixed-4": run(900.0, ok=False, kills=2), "budget": run(600.0)}
    assert bench.best_fixed(runs)[0] == "fixed-2"  # fixed-3 was faster only with an OOM kill
    result = bench.summarise(runs, {"a.o": 5, "b.o": 9})
    assert result["budget_oom_kills"] == 0 and result["best_fixed"] == "fixed-2"
    assert result["ratio_vs_best_fixed"] == round(600 / 560, 3) and result["speedup_vs_old_rule"] == round(1000 / 600, 3)
    assert list(result["peaks_bytes"]) == ["b.o", "a.o"]
    assert result["goals"] == {"budget_oom_kills": True, "ratio_vs_best_fixed": True, "speedup_vs_old_rule": True}
    failed = bench.summarise({**runs, "budget": run(700.0, ok=False, kills=1)}, {})
    assert failed["goals"] == {"budget_oom_kills": False, "ratio_vs_best_fixed": False, "speedup_vs_old_rule": False}


def test_a_run_record_counts_kills_and_the_retry():
    units = [{"unit": "a.o", "peak_bytes": 1, "wait_s": 2.5}, {"unit": "b.o", "peak_bytes": 1, "killed": True}]
    r = bench.run_record(units, "buildctl: the compiler was killed for memory; retrying once with MAX_JOBS=1", 12.0, True)
    assert r == {"ok": True, "wall_s": 12.0, "oom_kills": 1, "retried": True, "units": 2, "waited_s": 2.5}
    assert bench.run_record([], "", 3.0, True)["oom_kills"] == 0
