"""End to end with the real PyPI torch 2.13.0 CPU wheel: a fresh venv on this host, and a fresh container.

Small sweeps (8 B..64 KiB, 5 iterations) keep both runs well under a minute each on 2 cores; the host-mode
tests run no torch.compile cell (`--compile-matrix none`: two minutes of inductor compiles each, which the
container-mode test and tests/integration/test_verify_image_integration.py run for real). The
wheel and the dependency wheelhouse are cached under .cache/buildctl-test/ between sessions.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import containers_made_since
from rich.console import Console
from verify_fixtures import make_spec

from buildctl.verify import report as rep
from buildctl.verify.options import VerifyOptions
from buildctl.verify.report import VerificationFailed
from buildctl.verify.runner import verify_wheel

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "buildctl-test"
SMALL = {"sizes": "8:64K", "iters": 5, "warmup": 2}


@pytest.fixture(scope="session")
def torch_wheel() -> Path:
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob("torch-2.13.0*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
                        "torch==2.13.0", "--no-deps", "-d", str(dest)], check=True)
        found = sorted(dest.glob("torch-2.13.0*.whl"))
    assert found, f"pip download torch==2.13.0 left no wheel in {dest}"
    return found[0]


def assert_sane_gloo_sweep(report: rep.Report) -> None:
    sw = report.sweep
    assert sw["state"] == "ok", sw.get("reason")
    assert (sw["backend"], sw["device"], sw["world_size"]) == ("gloo", "cpu", 2)
    assert "gloo on CPU, 2 processes" in sw["label"] and "not an NCCL one" in sw["label"]
    assert [r["size"] for r in sw["rows"]] == [8 << i for i in range(14)]  # 8 B .. 64 KiB, x2
    n = sw["world_size"]
    for r in sw["rows"]:
        assert 0 < r["time_us"] < 1e6 and r["host_us"] > 0
        assert r["algbw_gbs"] == pytest.approx(r["size"] / 1e9 / (r["time_us"] / 1e6), rel=1e-3)
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * 2 * (n - 1) / n)
        assert r["wrong"] == 0
    h = rep.headline(report)
    assert h["latency_size"] == 8 and h["latency_us"] == sw["rows"][0]["time_us"]
    assert h["peak_busbw_gbs"] == max(r["busbw_gbs"] for r in sw["rows"])


def assert_cpu_verdict_and_checks(report: rep.Report) -> None:
    assert report.ok
    assert report.verdict.startswith("CPU-only build")
    checks = {c.name: c for c in report.checks}
    for name in ("import", "accelerator", "CUDA", "NCCL", "cuDNN", "arch list", "build type (config)",
                 "build type (version.debug)", "all-reduce correctness"):
        assert checks[name].ok is True, (name, checks[name])
    fw = report.probe["framework"]
    assert fw["version"] == "2.13.0+cpu" and fw["cuda"] is None and fw["arch_list"] == []
    assert report.probe["config"]["build_settings"]["BUILD_TYPE"] == "Release"


def assert_files(report: rep.Report, out: Path) -> None:
    assert report.files["json"] == str(out / "report.json")
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert rep.load_report(out / "report.json").to_dict() == report.to_dict()


def test_host_mode_cpu_wheel(torch_wheel, tmp_path):
    summary = tmp_path / "step-summary.md"  # $GITHUB_STEP_SUMMARY as the CLI hands it down
    console = Console(record=True, width=200)
    out = tmp_path / "out"
    report = verify_wheel(torch_wheel, spec=make_spec(), out_dir=out, console=console,
                          options=VerifyOptions(host=True, cache_dir=CACHE, environ=os.environ, compile_matrix="none",
                                                step_summary=str(summary), **SMALL))
    assert report.mode == "host" and report.module == "torch"
    assert_cpu_verdict_and_checks(report)
    assert_sane_gloo_sweep(report)
    assert_files(report, out)
    text = console.export_text()
    assert "PyTorch built with:" in text and "Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release" in text
    assert "all-reduce sweep: gloo on CPU, 2 processes" in text and "#wrong" in text
    assert summary.read_text().startswith("## buildctl verify: torch-2.13.0+cpu")
    # Never the interpreter running the tests: a fresh venv that is gone afterwards.
    assert report.environment["python"] != sys.executable and not Path(report.environment["python"]).exists()


def test_host_mode_failing_expectation_exits_nonzero_with_json(torch_wheel, tmp_path, capsys):
    out = tmp_path / "out"
    spec = make_spec(expect={"nccl": "2.28.9"})
    console = Console(file=io.StringIO(), record=True, width=200)
    with pytest.raises(VerificationFailed) as e:
        verify_wheel(torch_wheel, spec=spec, out_dir=out, console=console,
                     options=VerifyOptions(host=True, sweep=False, json_out=True, cache_dir=CACHE, environ=os.environ,
                                           compile_matrix="none", **SMALL))
    assert e.value.exit_code == 1
    msg = str(e.value)
    assert "\n" not in msg and "NCCL absent in the wheel, verify.expect says 2.28.9" in msg
    assert capsys.readouterr().out == ""  # the console given takes it all; the JSON is the command's (cli/verify.py)
    printed = e.value.report.to_dict()
    assert printed["ok"] is False and printed["probe"]["sweep"]["state"] == "skipped"
    assert console.export_text().splitlines()[-1].startswith("FAILED: ")  # --json: one line, not the tables
    assert json.loads((out / "report.json").read_text())["ok"] is False
    assert not (out / "report.png").exists()  # no sweep, no plot


@pytest.mark.integration
def test_container_mode_cpu_wheel(torch_wheel, tmp_path, docker_client, base_image):
    started = time.time()
    console = Console(record=True, width=200)
    out = tmp_path / "out"
    spec = make_spec(base_image=base_image)
    report = verify_wheel(torch_wheel, spec=spec, out_dir=out, console=console, client=docker_client,
                          options=VerifyOptions(host=False, cache_dir=CACHE, **SMALL))
    assert report.mode == "container"
    assert report.environment["image"].startswith("buildctl/verify-runtime:py3.11-")
    assert report.probe["python"]["executable"] == f"{spec.python.venv}/bin/python"  # inside the container
    assert_cpu_verdict_and_checks(report)
    assert_sane_gloo_sweep(report)
    assert_files(report, out)
    text = console.export_text()
    assert "PyTorch built with:" in text and "installing torch-2.13.0+cpu" in text
    # The container is gone: nothing labelled as a verify container was left behind.
    assert containers_made_since(docker_client, started, labels=("buildctl.role=verify",)) == []
