"""The report: JSON schema round trip, rich tables, Markdown summary, PNG plot."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from verify_fixtures import cpu_probe, cuda_spec, h200_probe, make_report, make_spec, multi_gpu_probe

from buildctl.errors import InputError
from buildctl.verify import report as rep
from buildctl.verify import report_files
from buildctl.verify.expectations import Expectations


def test_json_round_trip(tmp_path):
    r = make_report()
    path = rep.write_json(r, tmp_path / "report.json")
    d = json.loads(path.read_text())
    assert d["schema_version"] == rep.SCHEMA_VERSION and d["ok"] is True
    assert set(d) >= {"created", "buildctl_version", "verdict", "mode", "module", "wheel", "environment", "spec",
                      "expectations", "checks", "headline", "files", "probe"}
    assert set(d["checks"][0]) == {"name", "expected", "actual", "ok", "detail"}
    again = rep.load_report(path)
    assert again.to_dict() == r.to_dict()
    assert Expectations.from_dict(again.expectations) == Expectations.from_spec(make_spec())


def test_headline_carries_its_label():
    h = make_report().to_dict()["headline"]
    assert h["backend"] == "gloo" and h["world_size"] == 2 and h["latency_size"] == 8
    assert "not an NCCL one" in h["label"]
    g = make_report(h200_probe(), cuda_spec()).to_dict()["headline"]
    assert g["backend"] == "nccl" and g["world_size"] == 1 and g["graph_latency_us"] is None
    g8 = make_report(multi_gpu_probe(8), cuda_spec()).to_dict()["headline"]
    assert g8["world_size"] == 8 and g8["graph_latency_us"] == pytest.approx(6.1)
    assert g8["peak_busbw_size"] == 256 << 20


def test_load_report_refuses_other_files_and_newer_schemas(tmp_path):
    with pytest.raises(InputError, match="no such report"):
        rep.load_report(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        rep.load_report(tmp_path / "x.json")
    (tmp_path / "m.json").write_text('{"wheels": []}')
    with pytest.raises(InputError, match="not a verification report"):
        rep.load_report(tmp_path / "m.json")
    d = make_report().to_dict()
    d["schema_version"] = rep.SCHEMA_VERSION + 1
    (tmp_path / "new.json").write_text(json.dumps(d))
    with pytest.raises(InputError, match="schema_version"):
        rep.load_report(tmp_path / "new.json")


def test_failing_report_is_not_ok():
    r = make_report(spec=make_spec(build={"type": "Debug"}))
    assert not r.ok and r.to_dict()["ok"] is False


def test_rich_tables_show_config_checks_and_sweep():
    console = Console(record=True, width=200)
    rep.render(make_report(), console)
    out = console.export_text()
    assert "PyTorch built with:" in out and "BUILD_TYPE=Release" in out  # the config, in full
    assert "expectations" in out and "PASS" in out
    assert "all-reduce sweep: gloo on CPU, 2 processes" in out
    for col in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
        assert col in out
    assert "GPUs: no-driver" in out


def test_rich_tables_for_a_gpu_report():
    console = Console(record=True, width=200)
    rep.render(make_report(h200_probe(), cuda_spec()), console)
    out = console.export_text()
    assert "NVIDIA H200" in out and "lib/libtorch_cuda.so" in out and "sm_90:444" in out
    assert "busbw n/a (1 rank)" in out and "CUDA-graph" not in out
    console = Console(record=True, width=200)
    rep.render(make_report(multi_gpu_probe(8), cuda_spec()), console)
    out = console.export_text()
    assert "NCCL on 8 GPU(s)" in out and "CUDA-graph latency 6.10 us" in out and "peak busbw" in out


def test_markdown_and_step_summary(tmp_path):
    r = make_report(spec=make_spec(build={"type": "Debug"}))
    md = report_files.markdown(r)
    assert md.startswith("## buildctl verify: torch-2.13.0+cpu") and "FAILED" in md
    assert "| build type (config) | Debug | Release | FAIL |" in md
    assert "| size (B) | time (us) |" in md
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    assert report_files.append_step_summary(r, str(summary)) == summary
    assert summary.read_text().startswith("earlier step\n## buildctl verify")
    assert report_files.append_step_summary(r, None) is None


def test_write_all_writes_json_markdown_and_png(tmp_path):
    r = report_files.write_all(make_report(), tmp_path / "out")
    files = {k: tmp_path / "out" / n for k, n in (("json", "report.json"), ("markdown", "report.md"),
                                                    ("plot", "report.png"))}
    assert r.files == {k: str(v) for k, v in files.items()}
    assert files["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and files["plot"].stat().st_size > 10_000
    assert json.loads(files["json"].read_text())["files"]["plot"] == str(files["plot"])


def test_no_plot_without_a_sweep(tmp_path):
    probe = cpu_probe()
    probe["sweep"] = {"state": "skipped", "reason": "not requested"}
    r = report_files.write_all(make_report(probe), tmp_path)
    assert r.files["plot"] is None and not (tmp_path / "report.png").exists()
    assert "all-reduce: skipped (not requested)" in rep.headline_text(r)


def test_compile_matrix_is_shown_as_text_and_in_markdown():
    import io

    from rich.console import Console

    from buildctl.verify import report as rep

    cells = [{"backend": "eager", "mode": "default", "state": "pass", "compile_s": 0.4, "run_ms": 2.5, "error": None},
             {"backend": "inductor", "mode": "default", "state": "error", "compile_s": None, "run_ms": None,
              "error": "InvalidCxxCompiler: [bold]no compiler[/bold] at [/usr/bin/c++]"}]
    r = rep.Report.from_dict({"schema_version": 1, "wheel": {"name": "torch-2.6.0-cp313-cp313-linux_x86_64.whl"}, "mode": "container",
                              "module": "torch", "verdict": "", "checks": [], "expectations": {}, "environment": {}, "created": "2026-12-01T00:00:00+00:00",
                              "probe": {"checks": {"compile": {"device": "cpu", "cells": cells}}}})
    out = io.StringIO()
    Console(file=out, width=80).print(rep.compile_matrix_table(r))
    text = out.getvalue()
    assert "torch.compile on cpu" in text and "[bold]no compiler[/bold]" in text.replace("\n", "")
    md = report_files.markdown(r)  # a probe before the four axes: fullgraph and dynamic unknown (?)
    assert "| inductor | default | ? | error |" in md and "| eager | default | ? | pass | 0.40 | 2.50 |" in md


def test_compile_matrix_shows_the_four_axes_the_second_shape_and_why_a_cell_was_skipped():
    """issue 34: backend x mode x fullgraph x dynamic, the second shape's recompile, and reduce-overhead on
    a CPU skipped with the reason (never passed); readable at 80 columns."""
    import io

    from rich.console import Console

    from buildctl.verify import report as rep

    cells = [{"backend": "eager", "mode": "default", "fullgraph": True, "dynamic": False, "state": "pass",
              "compile_s": 0.4, "run_ms": 2.5, "recompiled": True, "error": None},
             {"backend": "aot_eager", "mode": "default", "fullgraph": False, "dynamic": True, "state": "pass",
              "compile_s": 3.1, "run_ms": 9.0, "recompiled": False, "error": None},
             {"backend": "inductor", "mode": "reduce-overhead", "fullgraph": False, "dynamic": False,
              "state": "skipped", "compile_s": None, "run_ms": None, "error": None,
              "reason": "skipping cudagraphs due to cpu device: CUDA graphs need a GPU"}]
    r = rep.Report.from_dict({"schema_version": 1, "wheel": {"name": "torch-2.6.0-cp313-cp313-linux_x86_64.whl"},
                              "mode": "image", "module": "torch", "verdict": "", "checks": [], "expectations": {},
                              "environment": {}, "created": "2026-12-01T00:00:00+00:00",
                              "probe": {"checks": {"compile": {"device": "cpu", "matrix": "smoke", "cells": cells}}}})
    out = io.StringIO()
    Console(file=out, width=80).print(rep.compile_matrix_table(r))
    text = out.getvalue()
    assert "torch.compile on cpu (backend x mode x fullgraph x dynamic, smoke set)" in text.replace("\n", " ")
    assert max(len(line) for line in text.splitlines()) <= 80
    for words in ("fullgraph", "dynamic", "recompiled", "reused", "skipped", "skipping cudagraphs"):
        assert words in text, words
    md = report_files.markdown(r)
    assert "| eager | default | fullgraph | pass | 0.40 | 2.50 | recompiled |  |" in md
    assert "| aot_eager | default | dynamic | pass | 3.10 | 9.00 | reused |  |" in md
    assert "| inductor | reduce-overhead | - | skipped |  |  |  | skipping cudagraphs due to cpu device" in md


def test_a_matrix_that_did_not_run_says_why_in_both_reports():
    """The demo's report (demofw is not torch): no table, one line with the reason, in the text and Markdown."""
    import io

    from rich.console import Console

    from buildctl.verify import report as rep

    r = rep.Report.from_dict({"schema_version": 1, "wheel": {"name": "demofw-0.1.0-cp311-cp311-linux_x86_64.whl"},
                              "mode": "container", "module": "demofw", "verdict": "", "checks": [], "expectations": {},
                              "environment": {}, "created": "2026-12-01T00:00:00+00:00",
                              "probe": {"checks": {"compile": {"state": "skipped", "reason": "demofw is not torch"}}}})
    assert rep.compile_matrix_table(r) is None
    out = io.StringIO()
    rep.render(r, Console(file=out, width=80))
    assert "torch.compile matrix: skipped (demofw is not torch)" in out.getvalue()
    assert "_torch.compile matrix: skipped (demofw is not torch)_" in report_files.markdown(r)
