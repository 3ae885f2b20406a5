"""probe.py: its pure helpers, and the script itself run for real where it needs no framework."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from verify_fixtures import cpu_probe, h200_probe

from buildctl.in_container import PROBE_FILES, probe, probe_arch, probe_facts, probe_sweep

PROBE = Path(probe.__file__)


def test_the_shipped_probe_imports_nothing_from_buildctl():
    for path in PROBE_FILES:
        text = path.read_text()
        assert "buildctl" not in "".join(ln.strip() for ln in text.splitlines()
                                         if ln.strip().startswith(("import", "from"))), path.name


@pytest.mark.parametrize("text,expected", [("8", 8), ("64K", 65536), ("256M", 256 << 20), ("1G", 1 << 30),
                                           ("4KiB", 4096)])
def test_parse_size(text, expected):
    assert probe_sweep.parse_size(text) == expected


def test_parse_sizes_ranges_and_lists():
    sizes, factor = probe_sweep.parse_sizes("8:256M")
    assert factor == 2 and sizes[0] == 8 and sizes[-1] == 256 << 20 and len(sizes) == 26
    sizes, factor = probe_sweep.parse_sizes("8:256M:4")
    assert factor == 4 and sizes[:3] == [8, 32, 128] and sizes[-1] == 128 << 20
    assert probe_sweep.parse_sizes("1M,8,6") == ([4, 8, 1 << 20], 0)  # whole float32 elements, sorted
    for bad in ("8:1:2", "x", "8:16:1", "8:16:2:3"):
        with pytest.raises(ValueError):
            probe_sweep.parse_sizes(bad)


def test_busbw_is_nccl_tests_allreduce_formula():
    assert probe_sweep.busbw_factor(1) == 0.0
    assert probe_sweep.busbw_factor(2) == 1.0
    assert probe_sweep.busbw_factor(8) == 2 * 7 / 8
    alg = probe_sweep.algbw_gbs(256 << 20, 1000.0)  # 256 MiB in 1 ms
    assert alg == pytest.approx((256 << 20) / 1e9 / 1e-3)
    assert probe_sweep.busbw_gbs(alg, 8) == pytest.approx(alg * 1.75)
    assert probe_sweep.algbw_gbs(8, 0) == 0.0


def test_sweep_headline():
    rows = [{"size": 8, "time_us": 20.0, "busbw_gbs": 0.001, "algbw_gbs": 0.001, "wrong": 0},
            {"size": 1 << 20, "time_us": 30.0, "busbw_gbs": 60.0, "algbw_gbs": 34.0, "wrong": 0},
            {"size": 1 << 28, "time_us": 900.0, "busbw_gbs": 480.0, "algbw_gbs": 274.0, "wrong": 1}]
    h = probe_sweep.sweep_headline(rows, {"latency_us": 6.1}, 8)
    assert (h["latency_us"], h["latency_size"], h["peak_busbw_gbs"], h["peak_busbw_size"]) == (20.0, 8, 480.0, 1 << 28)
    assert h["graph_latency_us"] == 6.1 and h["wrong"] == 1
    h1 = probe_sweep.sweep_headline(rows, None, 1)
    assert h1["peak_busbw_gbs"] is None and h1["peak_busbw_size"] is None  # one rank: no bus
    assert probe_sweep.sweep_headline([], None, 2) is None


def test_parse_build_settings_from_real_configs():
    cpu = probe_facts.parse_build_settings(cpu_probe()["config"]["text"])
    assert cpu["BUILD_TYPE"] == "Release" and cpu["USE_CUDA"] == "0" and cpu["USE_GLOO"] == "ON"
    assert cpu["CXX_FLAGS"].startswith("-fvisibility-inlines-hidden") and "-O2" in cpu["CXX_FLAGS"]
    assert cpu["USE_XPU"] == "OFF"  # the trailing ", " after the last item
    gpu = probe_facts.parse_build_settings(h200_probe()["config"]["text"])
    assert gpu["CUDA_VERSION"] == "13.0" and gpu["CUDNN_VERSION"] == "9.19.0" and gpu["USE_NCCL"] == "1"
    assert probe_facts.parse_build_settings("PyTorch built with:\n  - GCC 13.3\n") == {}


def test_version_decoders():
    assert probe_facts.decode_nccl_version((2, 30, 7)) == "2.30.7"
    assert probe_facts.decode_nccl_version([2, 18, 1, "a0"]) == "2.18.1+a0"
    assert probe_facts.decode_nccl_version(21805) == "2.18.5"
    assert probe_facts.decode_nccl_version(2708) == "2.7.8"
    assert probe_facts.decode_nccl_version(None) is None
    assert probe_facts.decode_cudnn_version(92400) == "9.24.0"
    assert probe_facts.decode_cudnn_version(91900) == "9.19.0"
    assert probe_facts.decode_cudnn_version(8902) == "8.9.2"
    assert probe_facts.decode_cuda_driver_version(12020) == "12.2"
    assert probe_facts.decode_cuda_driver_version(13000) == "13.0"


def test_parse_cuobjdump_listing():
    elf = "\n".join([
        "ELF file    1: libtorch_cuda.1.sm_80.cubin",
        "ELF file    2: libtorch_cuda.2.sm_90.cubin",
        "ELF file    3: libtorch_cuda.3.sm_90a.cubin",
        "ELF file    4: libtorch_cuda.4.sm_90.cubin",
        "cuobjdump info    : File 'x' does not contain device code",
    ])
    assert probe_arch.parse_cuobjdump_list(elf) == {"sm_80": 1, "sm_90": 2, "sm_90a": 1}
    ptx = "PTX file    1: libtorch_cuda.1.sm_90.ptx\nPTX file    2: libtorch_cuda.2.sm_120.ptx\n"
    assert probe_arch.parse_cuobjdump_list(ptx) == {"compute_90": 1, "compute_120": 1}


def test_elf_sections_of_a_real_shared_library():
    import _ctypes  # a shared library shipped with every CPython

    names = probe_arch.elf_section_names(_ctypes.__file__)
    assert names and ".text" in names and ".dynsym" in names
    assert probe_arch.has_device_code(_ctypes.__file__) is False
    assert probe_arch.elf_section_names(__file__) is None  # not ELF


def test_plan_without_gpus_is_gloo_on_two_processes_and_says_so():
    plan = probe_sweep.plan_sweep(None, {"device_count": 0}, {"nccl": False, "gloo": True}, {"cuda": None})
    assert (plan["backend"], plan["device"], plan["world_size"]) == ("gloo", "cpu", 2)
    assert "not an NCCL one" in plan["label"]
    plan = probe_sweep.plan_sweep(None, {"device_count": 8}, {"nccl": True}, {"cuda": "13.0"})
    assert (plan["backend"], plan["world_size"], plan["timer"]) == ("nccl", 8, "cuda-events")
    plan = probe_sweep.plan_sweep(None, {"device_count": 2}, {"nccl": True}, {"hip": "6.2", "cuda": None})
    assert plan["backend"] == "nccl" and plan["label"].startswith("RCCL")
    plan = probe_sweep.plan_sweep(None, {"device_count": 1}, {"nccl": True}, {"cuda": "13.0"})
    assert "busbw is 0 by definition" in plan["label"]


def test_gpu_inventory_without_a_driver_is_a_state():
    inv = probe_facts.gpu_inventory()  # this machine: pynvml installed, no NVIDIA driver
    assert inv["state"] in ("no-driver", "ok")
    if inv["state"] == "no-driver":
        assert inv["reason"].startswith("no NVIDIA driver") and inv["devices"] == []


def _run_probe(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "part.json"
    r = subprocess.run([sys.executable, str(PROBE), *args, "--out", str(out)], capture_output=True, text=True,
                       timeout=120)
    return r, (json.loads(out.read_text()) if out.exists() else None)


def test_probe_script_reports_an_import_failure_and_still_writes_json(tmp_path):
    r, rep = _run_probe(tmp_path, "--module", "no_such_framework_xyz", "--sweep")
    assert r.returncode == 0, r.stderr
    assert rep["import"]["ok"] is False and "ModuleNotFoundError" in rep["import"]["error"]
    assert rep["gpus"]["state"] in ("no-driver", "ok", "unavailable")
    assert "[probe] importing no_such_framework_xyz" in r.stderr


def test_probe_script_on_a_module_without_framework_surface(tmp_path):
    # 'json' imports but has no __config__, version or distributed: every section degrades, no crash.
    r, rep = _run_probe(tmp_path, "--module", "json", "--sweep")
    assert r.returncode == 0, r.stderr
    assert rep["import"]["ok"] and rep["framework"]["cuda"] is None
    assert rep["sweep"] == {"state": "skipped", "reason": "json has no (available) distributed module"}
    assert rep["arch_coverage"]["state"] == "n/a"


def test_probe_script_refuses_bad_sizes(tmp_path):
    r, rep = _run_probe(tmp_path, "--module", "json", "--sizes", "8:1")
    assert r.returncode == 2 and rep is None and "MIN <= MAX" in r.stderr


# --------------------------------------------------------------------------- the torch.compile matrix (issue 34)


class _Proc:
    def __init__(self, stdout: str):
        self.stdout, self.stderr, self.returncode = stdout, "", 0


def _matrix(monkeypatch, device: str, matrix: str = "smoke") -> tuple[dict, list[list[str]]]:
    """checks.compile_matrix with each cell's process answered by a stand-in: which cells ran, with which axes."""
    from buildctl.in_container import checks

    ran: list[list[str]] = []

    def run(argv, **kwargs):
        ran.append(argv[3:])
        dynamic = argv[6] == "1"
        return _Proc(json.dumps({"state": "pass", "compile_s": 1.0, "run_ms": 2.0, "second_shape_s": 0.1,
                                 "recompiled": not dynamic, "max_abs_err": 0.0, "error": None}))

    monkeypatch.setattr(checks.subprocess, "run", run)
    monkeypatch.setattr(checks.shutil, "which", lambda name: f"/usr/bin/{name}")
    return checks.compile_matrix(type("torch", (), {"compile": object()}), device, 60, matrix), ran


def test_the_smoke_set_on_cpu_covers_four_axes_and_skips_what_means_nothing_there(monkeypatch):
    result, ran = _matrix(monkeypatch, "cpu")
    cells = {(c["backend"], c["mode"], c["fullgraph"], c["dynamic"]): c for c in result["cells"]}
    assert set(cells) == {("eager", "default", True, False), ("aot_eager", "default", False, True),
                          ("inductor", "default", False, False), ("inductor", "default", True, True),
                          ("inductor", "reduce-overhead", False, False), ("cudagraphs", "default", False, False)}
    for key in (("inductor", "reduce-overhead", False, False), ("cudagraphs", "default", False, False)):
        assert cells[key]["state"] == "skipped" and cells[key]["compile_s"] is None
        assert cells[key]["reason"].startswith("skipping cudagraphs due to cpu device")
    assert ["inductor", "reduce-overhead", "0", "0", "cpu"] not in ran and len(ran) == 4  # never run, never passed
    assert ["aot_eager", "default", "0", "1", "cpu"] in ran
    assert result["passed"] == 4 and result["skipped"] == 2 and result["matrix"] == "smoke"
    assert cells[("aot_eager", "default", False, True)]["recompiled"] is False


def test_the_smoke_set_on_a_gpu_runs_the_cuda_graph_cells_and_the_full_set_is_the_whole_cross(monkeypatch):
    result, ran = _matrix(monkeypatch, "cuda")
    assert len(ran) == 7 and all(c["state"] == "pass" for c in result["cells"])
    full, ran = _matrix(monkeypatch, "cuda", "full")
    assert len(full["cells"]) == 28 == len(ran)  # (eager, aot_eager, cudagraphs, 4 inductor modes) x 2 x 2
    assert {(c["fullgraph"], c["dynamic"]) for c in full["cells"]} == {(False, False), (False, True), (True, False),
                                                                       (True, True)}
    on_cpu, ran = _matrix(monkeypatch, "cpu", "full")
    assert sum(c["state"] == "skipped" for c in on_cpu["cells"]) == 8 and len(ran) == 20


def test_a_cell_without_a_cxx_compiler_is_skipped_with_the_reason(monkeypatch):
    from buildctl.in_container import checks

    monkeypatch.setattr(checks.shutil, "which", lambda name: None)
    monkeypatch.setattr(checks.subprocess, "run", lambda argv, **kw: _Proc(json.dumps({"state": "pass"})))
    result = checks.compile_matrix(type("torch", (), {"compile": object()}), "cpu", 60)
    inductor = [c for c in result["cells"] if c["backend"] == "inductor" and c["mode"] == "default"]
    assert all(c["state"] == "skipped" and "no C++ compiler (g++)" in c["reason"] for c in inductor)


# --------------------------------------------------------------------------- the DDP step's ranks


class _Rank:
    """A rank's process as ddp_step sees it: what it printed, then how it exited."""

    def __init__(self, stdout: str, stderr: str, returncode: int):
        self.stdout, self.stderr, self.returncode = stdout, stderr, returncode

    def communicate(self, timeout=None):
        return self.stdout, self.stderr


def _ddp(monkeypatch, *ranks: _Rank) -> dict:
    import types

    from buildctl.in_container import checks

    distributed = types.SimpleNamespace(is_available=lambda: True, is_gloo_available=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(distributed=distributed))
    monkeypatch.setitem(sys.modules, "torch.distributed", distributed)
    started = iter(ranks)
    monkeypatch.setattr(checks.subprocess, "Popen", lambda argv, **kw: next(started))
    return checks.ddp_step(sys.modules["torch"], world_size=len(ranks))


_AGREED = json.dumps({"rank": 0, "loss": 1.0, "losses_equal": True, "grads_equal_across_ranks": True,
                      "grads_match_reference": True, "params_equal_after_step": True})
_ABORT = "terminate called without an active exception\n"


def test_a_rank_that_aborts_in_teardown_after_its_result_does_not_fail_the_step_but_is_recorded(monkeypatch):
    # Seen in CI (stop 47): gloo's worker threads abort a rank at exit after the step agreed on both ranks.
    result = _ddp(monkeypatch, _Rank(_AGREED + "\n", "", 0), _Rank(_AGREED + "\n", _ABORT, -6))
    assert result["state"] == "ok" and result["reason"] is None and len(result["ranks"]) == 2
    assert result["teardown"] == ["rank 1 exited -6 after its result: terminate called without an active exception"]

    from buildctl.verify.expectations import Expectations, framework_check_results
    from buildctl.verify.schema.probe_json import Ddp

    Ddp.model_validate(result)  # the report's schema takes it
    check = {c.name: c for c in framework_check_results(Expectations(), {"checks": {"ddp": result}})}
    ddp_check = check["DDP step (2 ranks, gloo)"]
    assert ddp_check.ok and "rank 1 exited -6 after its result" in ddp_check.detail


def test_a_rank_that_aborts_before_its_result_is_an_error(monkeypatch):
    result = _ddp(monkeypatch, _Rank(_AGREED + "\n", "", 0), _Rank("", _ABORT, -6))
    assert result["state"] == "error" and result["reason"] == "terminate called without an active exception"


def test_compile_matrix_none_runs_no_cell_and_says_why(monkeypatch):
    """--compile-matrix none: a verification that wants the wheel's facts and the all-reduce, not two minutes of
    inductor compiles per torch (the host-mode tests); reported skipped, never passed."""
    result, ran = _matrix(monkeypatch, "cpu", "none")
    assert ran == [] and result["cells"] == []
    assert result["state"] == "skipped" and result["reason"] == "--compile-matrix none"


def test_verify_accepts_the_none_compile_matrix_and_hands_it_to_the_probe():
    from buildctl.verify import runner
    from buildctl.verify.options import VerifyOptions

    runner.check_compile_matrix("none")
    args = runner.probe_args(VerifyOptions(module="torch", sweep=False, compile_matrix="none"), "/tmp/p.json")
    assert args[-2:] == ["--compile-matrix", "none"]
