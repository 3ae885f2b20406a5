"""The memory budget (issue 45): the predictor, the waiting order, the launcher's measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from buildctl.in_container import memory_launcher as launcher
from buildctl.in_container import memory_predict as predict

MB = 1024 * 1024
ATEN = "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native"


def m(unit, peak, version="2.6.0", build_type="Release", framework="torch"):
    return {"framework": framework, "version": version, "build_type": build_type, "unit": unit, "peak_bytes": peak}


STORE = [
    m(f"{ATEN}/Activation.cpp.o", 700 * MB),
    m(f"{ATEN}/Activation.cpp.o", 800 * MB),  # measured again later: the latest wins
    m(f"{ATEN}/BinaryOps.cpp.o", 1500 * MB, version="2.5.1"),
    m(f"{ATEN}/BinaryOps.cpp.o", 1900 * MB, version="2.1.0"),
    m(f"{ATEN}/BinaryOps.cpp.o", 2100 * MB, version="3.6.0"),
    m(f"{ATEN}/Activation.cpp.o", 9000 * MB, build_type="Debug"),
    m("csrc/heavy/heavy_unit.cpp.o", 500 * MB, framework="demofw", version="0.4.0"),
    m("lib/libtorch_cpu.so", 3000 * MB),
]


def test_predictor_exact_match_is_the_latest_measurement():
    tab = predict.table(STORE, "torch", "2.6.0", "Release")
    assert predict.predict(tab, f"{ATEN}/Activation.cpp.o", 1) == (800 * MB, "exact")


def test_predictor_same_unit_in_the_nearest_other_version():
    tab = predict.table(STORE, "torch", "2.6.0", "Release")
    assert predict.predict(tab, f"{ATEN}/BinaryOps.cpp.o", 1) == (1500 * MB, "other version")  # 2.5.1, not 2.1/3.6


def test_predictor_same_folder_then_kind_then_default():
    tab = predict.table(STORE, "torch", "2.6.0", "Release")
    # a unit never measured, in a measured folder: the folder's largest (Debug's 9 GB is another build type)
    assert predict.predict(tab, f"{ATEN}/Sorting.cpp.o", 1) == (2100 * MB, "same folder")
    # another folder: the kind's high quantile over every framework of this build type
    need, how = predict.predict(tab, "c10/CMakeFiles/c10.dir/core/Allocator.cpp.o", 1)
    assert how == "same kind" and 500 * MB <= need <= 2100 * MB
    assert predict.predict(tab, "bin/some_tool", 1) == (3000 * MB, "same kind")  # a link, like libtorch_cpu.so
    assert predict.predict(predict.table([], "torch", "2.6.0", "Release"), "a.cpp.o", 42 * MB) == (42 * MB, "default")


def test_kind_of_unit():
    assert [predict.kind_of(u) for u in ("a/k.cu.o", "a/b.hip.o", "a/c.c.o", "a/d.cpp.o", "lib/x.a", "lib/y.so")] \
        == ["cuda", "hip", "c", "cxx", "archive", "link"]


def test_waiting_order_is_largest_first_and_a_giant_runs_alone():
    waiting = {"small": [100, 1], "big": [600, 2], "mid": [300, 3]}
    assert not launcher.may_start("small", {}, waiting, 1000)  # the largest waiting goes first
    assert launcher.may_start("big", {}, waiting, 1000)
    assert not launcher.may_start("big", {"x": 500}, waiting, 1000)  # does not fit beside a running unit
    assert launcher.may_start("giant", {}, {"giant": [5000, 1]}, 1000)  # larger than the budget: alone
    assert not launcher.may_start("giant", {"x": 1}, {"giant": [5000, 1]}, 1000)
    assert launcher.may_start("first", {}, {"first": [100, 1], "second": [100, 2]}, 1000)  # equals: arrival order


def test_ledger_lets_the_largest_waiting_unit_in_when_memory_frees(tmp_path):
    ledger = launcher.Ledger(tmp_path, alive=lambda pid: True)
    ledger.arrive(1, 700)
    assert ledger.try_start(1, 1000)
    ledger.arrive(2, 200)  # small, arrived first
    ledger.arrive(3, 500)  # large
    assert not ledger.try_start(2, 1000)  # it would fit, but the larger unit waits
    assert not ledger.try_start(3, 1000)  # does not fit beside unit 1
    ledger.finish(1)
    assert not ledger.try_start(2, 1000) and ledger.try_start(3, 1000)
    assert ledger.try_start(2, 1000)  # 500 + 200 fit
    assert ledger.snapshot()["running"] == {"3": 500, "2": 200}


def test_ledger_drops_units_whose_launcher_is_gone(tmp_path):
    gone: set[int] = set()
    ledger = launcher.Ledger(tmp_path, alive=lambda pid: pid not in gone)
    ledger.arrive(5, 900)
    assert ledger.try_start(5, 1000)
    ledger.arrive(6, 900)
    gone.add(5)  # killed with its compiler: its bytes no longer count
    assert ledger.try_start(6, 1000)


def test_a_waiting_unit_starts_when_the_running_one_finishes(tmp_path):
    ledger = launcher.Ledger(tmp_path, alive=lambda pid: True)
    ledger.arrive(1, 800)
    assert ledger.try_start(1, 1000)
    pauses = []

    def pause():  # the event the waiter sees: the running unit ends on its first look
        pauses.append(1)
        ledger.finish(1)

    launcher.wait_for_memory(ledger, 2, 800, 1000, pause=pause)
    assert pauses == [1] and ledger.snapshot()["running"] == {"2": 800}


def test_unit_of_names_the_output_relative_to_the_build_tree():
    cmd = ["c++", "-O2", "-c", "x.cpp", "-o", "CMakeFiles/_C.dir/csrc/x.cpp.o"]
    assert launcher.unit_of(cmd, "/work/src/build", "/work") == "CMakeFiles/_C.dir/csrc/x.cpp.o"
    assert launcher.unit_of(["gcc", "-c", "y.c", "-obuild/temp/y.o"], "/work/ext/pkg", "/work") == "ext/pkg/build/temp/y.o"
    assert launcher.unit_of(["gcc", "-E", "y.c"], "/work/src/build", "/work") is None
    assert launcher.unit_of(["c++", "-o", "cmTC_1.o"], "/work/src/build/CMakeFiles/CMakeScratch/TryCompile-x", "/work") is None


def test_budget_is_the_cgroup_limit_less_a_margin(tmp_path):
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/memory.max").write_text(f"{3 * 1024 * MB}\n")
    assert launcher.budget_bytes({}, str(tmp_path)) == 3 * 1024 * MB - 384 * MB  # 1/8 of 3 GiB
    assert launcher.budget_bytes({"BUILDCTL_MEM_MARGIN": str(100 * MB)}, str(tmp_path)) == 3 * 1024 * MB - 100 * MB
    assert launcher.budget_bytes({"BUILDCTL_MEM_BUDGET": "12345"}, str(tmp_path)) == 12345


def _launch(tmp_path: Path, mb: int) -> dict:
    """The launcher, run by path as in the container, over a shell whose child allocates `mb` MB."""
    out = tmp_path / f"units-{mb}.jsonl"
    alloc = f"b = bytearray({mb} * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"
    env = {**os.environ, "BUILDCTL_MEM_OUT": str(out), "BUILDCTL_MEM_LEDGER": str(tmp_path / "ledger"),
           "BUILDCTL_MEM_BUDGET": str(4096 * MB), "BUILDCTL_MEM_WORK": str(tmp_path)}
    subprocess.run([sys.executable, launcher.__file__, "sh", "-c", f'"{sys.executable}" -c "{alloc}" && : > "$2"',
                    "sh", "-o", str(tmp_path / "unit.o")], env=env, check=True, cwd=tmp_path)
    return json.loads(out.read_text())


def test_launcher_measures_the_peak_of_a_grandchild_that_allocates(tmp_path):
    small, large = _launch(tmp_path, 8), _launch(tmp_path, 160)
    assert large["unit"] == "unit.o" and large["how"] == "default"
    assert 160 * MB <= large["peak_bytes"] <= 160 * MB + 64 * MB, large
    assert small["peak_bytes"] < 80 * MB, small  # not just any process's figure


# --------------------------------------------------------------------------- the host's side

from buildctl.pipeline import memory_budget as budget  # noqa: E402

WHO = {"framework": "demofw", "version": "0.4.0", "build_type": "Release"}


def unit_line(unit, peak, wait=0.0, killed=False, predicted=2560 * MB):
    r = {"unit": unit, "peak_bytes": peak, "predicted_bytes": predicted, "how": "default", "wait_s": wait,
         "seconds": 1.0, "budget_bytes": 640 * MB}
    return {**r, "killed": True} if killed else r


def test_the_store_learns_and_the_next_build_predicts_from_it(tmp_path):
    budget.merge([unit_line("CMakeFiles/_C.dir/csrc/heavy/heavy_unit.cpp.o", 500 * MB)], WHO, tmp_path)
    budget.merge([unit_line("CMakeFiles/_C.dir/csrc/heavy/heavy_unit.cpp.o", 520 * MB),
                  unit_line("CMakeFiles/_C.dir/csrc/ops/add.cpp.o", 200 * MB)], WHO, tmp_path)
    assert len(budget.load(tmp_path)) == 2  # the unit measured again replaced its first figure
    plan = budget.plan(tmp_path / "table.json", WHO, accelerator="cpu", cuda=False, cache="ccache", work="/work",
                       root=tmp_path)
    tab = json.loads((tmp_path / "table.json").read_text())
    assert predict.predict(tab, "CMakeFiles/_C.dir/csrc/heavy/heavy_unit.cpp.o", 1) == (520 * MB, "exact")
    assert plan.env["CCACHE_PREFIX"] == budget.LAUNCHER and "CMAKE_CXX_COMPILER_LAUNCHER" not in plan.env
    assert plan.env["CMAKE_CXX_LINKER_LAUNCHER"] == budget.LAUNCHER
    assert set(plan.inputs) == {budget.LAUNCHER, budget.TABLE, f"{budget.CONTAINER_DIR}/memory_predict.py"}
    no_cache = budget.plan(tmp_path / "t2.json", WHO, accelerator="cuda", cuda=True, cache="none", work="/work",
                           root=tmp_path)
    assert "CCACHE_PREFIX" not in no_cache.env and no_cache.env["CMAKE_CUDA_COMPILER_LAUNCHER"] == budget.LAUNCHER


def test_a_unit_killed_for_memory_is_recorded_larger(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / budget.UNITS_FILE).write_text(json.dumps(unit_line("a.cpp.o", 625 * MB, killed=True)) + "\nnot json\n"
                                         + json.dumps({"unit": "b.o", "peak_bytes": -1}) + "\n")
    records = budget.read_units(out)
    assert [r["unit"] for r in records] == ["a.cpp.o"]  # the malformed lines are dropped
    budget.merge(records, WHO, tmp_path)
    assert budget.load(tmp_path) == [{**WHO, "unit": "a.cpp.o", "peak_bytes": 625 * MB, "killed": True}]


def test_the_manifest_section_says_what_waiting_cost_and_the_largest_units():
    sec = budget.section([unit_line("heavy.cpp.o", 500 * MB, wait=0.0), unit_line("a.cpp.o", 300 * MB, wait=12.5),
                          unit_line("b.cpp.o", 200 * MB, wait=3.0, killed=True)])
    assert sec["wait_s"] == 15.5 and sec["units_waited"] == 2 and sec["units"] == 3
    assert [u["unit"] for u in sec["largest"]] == ["heavy.cpp.o", "a.cpp.o", "b.cpp.o"]
    assert sec["oom_killed"] == ["b.cpp.o"] and sec["budget_bytes"] == 640 * MB
    line = budget.summary_line(sec)
    assert "2 waited 16 s" in line and "heavy.cpp.o" in line and "1 killed for memory" in line
    assert budget.section([]) is None


def test_jobs_are_the_cores_and_an_explicit_setting_is_an_upper_bound():
    n, why = budget.jobs("auto", cpus=2, mem_bytes=3 * 1024 * MB, accelerator="cpu", build_type="Release")
    assert n == 2 and "the old rule would give 1" in why
    assert budget.jobs(3, cpus=16, mem_bytes=64 * 1024 * MB, accelerator="cpu", build_type="Release")[0] == 3
    assert budget.cpuset_size("0-3,6") == 5 and budget.cpuset_size(None) == 0

    def spec(cache, extensions=()):
        return SimpleNamespace(build=SimpleNamespace(cache=cache), extensions=list(extensions))

    assert budget.applies(spec("ccache"), False) and budget.applies(spec("none"), False)
    assert budget.applies(spec("ccache", ["torch-scatter"]), False)
    assert not budget.applies(spec("none", ["torch-scatter"]), False)  # build_ext would compile beside the budget
    assert not budget.applies(spec("sccache"), False) and not budget.applies(spec("ccache"), True)


def test_oom_kills_are_read_from_the_cgroup(tmp_path):
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    assert launcher.oom_kills(str(tmp_path)) == 0
    (tmp_path / "sys/fs/cgroup/memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n")
    assert launcher.oom_kills(str(tmp_path)) == 2


def test_the_summary_row_reads_a_manifest_section():
    sec = budget.section([unit_line("heavy.cpp.o", 512 * MB, wait=0.0), unit_line("a.cpp.o", 300 * MB, wait=40.0)])
    assert budget.summary_row(sec) == "1 of 2 units waited 40 s for the 0.6 GiB budget; largest heavy.cpp.o 0.50 GiB"
    assert budget.summary_row({"largest": []}) == "recorded (see the manifest's memory section)"
