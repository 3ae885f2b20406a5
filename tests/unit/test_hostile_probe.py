"""probe.json and report.json are untrusted: the wheel under test runs its own code where the probe runs,
and `invoke diff` reads whatever report it is given. Malformed ones are refused in one line naming the
file and the field; strings in them are shown as text, never as rich markup.

Each case says what the code before schema.py did with it (run against b74e6d9).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest
from invoke_here import invoke_here
from rich.console import Console
from verify_fixtures import cpu_probe, cuda_spec, h200_probe, make_report, multi_gpu_probe

from buildctl.errors import InputError
from buildctl.verify import compare, schema
from buildctl.verify import report as rep

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "buildctl-test"  # the wheelhouse of the verify tests, shared
MARKUP = ["cannot load [/opt/venv/lib/libnccl.so.2]", "[bold]loud[/bold]", "[link=https://evil.example]click[/link]",
          "[/]", "[red"]


def _with(probe: dict, path: str, value) -> dict:
    """probe with the dotted `path` set to value (list indexes as numbers)."""
    probe = copy.deepcopy(probe)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    cur = probe
    for p in parents:
        cur = cur[p]
    cur[last] = value
    return probe


def _rocm_probe() -> dict:
    """A ROCm build's probe as probe.py writes it: code objects per gfx target, AMD GPUs instead of NVML's."""
    p = cpu_probe()
    p["framework"]["hip"] = "5.7.31921"
    p["arch_coverage"] = {"state": "ok", "reason": None, "tool": "probe.py (.hip_fatbin offload-bundle reader)",
                          "sass": [], "ptx": [], "gfx": ["gfx90a", "gfx942"], "libraries": [
                              {"path": "lib/libdemofw_hip.so", "error": None,
                               "code_objects": {"gfx90a:xnack-": {"count": 2, "bytes": 1328},
                                                "gfx942": {"count": 1, "bytes": 264}}}]}
    p["amd_gpus"] = {"state": "no-driver", "devices": 0, "reason": "no AMD GPU: /dev/kfd is absent"}
    return p


# (id, file text, words the one-line error must hold, what the old code did)
CORPUS = [
    ("not-json", "{not json", ["not JSON"], "JSONDecodeError: 'internal error', exit 1"),
    ("empty", "", ["not JSON"], "JSONDecodeError: 'internal error', exit 1"),
    ("list", "[1, 2]", ["top level is list"], "AttributeError: 'list' object has no attribute 'get'"),
    ("null", "null", ["top level is null"], "AttributeError: 'NoneType' object has no attribute 'get'"),
    ("section-is-a-string", json.dumps(_with(cpu_probe(), "import", "yes")), ["import:"],
     "AttributeError: 'str' object has no attribute 'get' (seen through invoke verify)"),
    ("arch-list-of-numbers", json.dumps(_with(h200_probe(), "framework.arch_list", [90, 100])),
     ["framework.arch_list[0]"], "TypeError: expected string or bytes-like object, got 'int'"),
    ("arch-list-a-string", json.dumps(_with(h200_probe(), "framework.arch_list", "sm_90")),
     ["framework.arch_list"], "compared the set of its characters 's', 'm', '_', '9', '0': a wrong verdict"),
    ("sweep-row-missing-keys", json.dumps(_with(cpu_probe(), "sweep.rows", [{"size": 8}])),
     ["sweep.rows[0].count"], "KeyError: 'count' in the sweep table"),
    ("sweep-time-a-string", json.dumps(_with(cpu_probe(), "sweep.rows.0.time_us", "12.5")),
     ["sweep.rows[0].time_us", "number"], "ValueError: Unknown format code 'f' for object of type 'str'"),
    ("wrong-is-true", json.dumps(_with(cpu_probe(), "sweep.rows.0.wrong", True)),
     ["sweep.rows[0].wrong", "integer"], "counted True as one wrong element"),
    ("gpu-index-missing", json.dumps(_with(h200_probe(), "gpus.devices", [{"name": "x"}])),
     ["gpus.devices[0].index"], "KeyError: 'index' in the GPU table"),
    ("memory-beyond-float", json.dumps(_with(h200_probe(), "gpus.devices.0.memory_total", 10 ** 400)),
     ["gpus.devices[0].memory_total", "out of range"], "OverflowError: integer division result too large for a float"),
    ("latency-nan", json.dumps(_with(cpu_probe(), "sweep.headline.latency_us", float("nan"))),
     ["sweep.headline.latency_us", "finite"], "wrote NaN into report.json, which is not JSON to other readers"),
    ("build-settings-a-list", json.dumps(_with(h200_probe(), "config.build_settings", ["USE_CUDA"])),
     ["config.build_settings"], "AttributeError: 'list' object has no attribute 'get'"),
    ("digits-beyond-python", '{"seconds": ' + "9" * 5000 + "}", ["not readable JSON"],
     "ValueError: Exceeds the limit (4300 digits): 'internal error'"),
    ("nested-too-deep", "[" * 100_000 + "]" * 100_000, ["nested too deeply"],
     "RecursionError: maximum recursion depth exceeded: 'internal error'"),
    ("string-1-MB", json.dumps(_with(cpu_probe(), "fatal", "x" * (1 << 20))), ["fatal", "at most"],
     "rendering it as markup was quadratic: 16 KiB took 16 s, 64 KiB 236 s, 1 MiB still ran after 75 min"),
    ("too-many-errors", json.dumps(_with(cpu_probe(), "errors", ["e"] * 100_000)), ["errors", "at most 4096"],
     "kept all of them in report.json"),
    ("compile-cells-a-string", json.dumps(_with(cpu_probe(), "checks", {"compile": {"cells": "eager"}})),
     ["checks.compile.cells"], "AttributeError: 'str' object has no attribute 'get'"),
    ("compile-cell-without-backend", json.dumps(_with(cpu_probe(), "checks",
                                                      {"compile": {"cells": [{"mode": "default", "state": "pass"}]}})),
     ["checks.compile.cells[0].backend"], "KeyError: 'backend' in the torch.compile table"),
    ("debug-resolved-a-list", json.dumps(_with(cpu_probe(), "checks", {"debug_info": {"state": "ok", "resolved": ["x"]}})),
     ["checks.debug_info.resolved"], "TypeError: list indices must be integers or slices, not str (Debug recipe)"),
    ("rocm-code-objects-a-number", json.dumps(_with(_rocm_probe(), "arch_coverage.libraries.0.code_objects",
                                                    {"gfx90a": 5})),
     ["arch_coverage.libraries[0].code_objects.gfx90a"], "TypeError: 'int' object is not subscriptable (main 577a12b)"),
    ("weird-key", json.dumps(_with(h200_probe(), "config.build_settings", {"\x1b]0;x\x07": 5})),
     ["config.build_settings", "\\x1b"], "accepted: `invoke diff` printed the key with its OSC sequence raw"),
]


@pytest.mark.parametrize("case_id, text, words, old", CORPUS, ids=[c[0] for c in CORPUS])
def test_malformed_probe_json_is_refused_in_one_line(tmp_path, case_id, text, words, old):
    """Refused with one line naming probe.json and the field. `old` says what the code before did."""
    path = tmp_path / "probe.json"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        schema.load_probe(path, "probe.json of x.whl")
    msg = str(e.value)
    assert e.value.exit_code == 2
    assert "\n" not in msg and "\x1b" not in msg and len(msg) < 600, msg
    assert msg.startswith("probe.json of x.whl: ") and "fix:" in msg
    for w in words:
        assert w in msg, msg


def test_probe_json_over_the_size_cap_is_refused_unread(tmp_path):
    """A valid probe padded to 9 MiB: the old code read (and json-parsed) any size; now refused by size."""
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(cpu_probe()) + " " * (9 << 20))
    with pytest.raises(InputError, match=r"probe.json: larger than 8 MiB, refused unread"):
        schema.load_probe(path, "probe.json")


@pytest.mark.parametrize("probe", [cpu_probe(), h200_probe(), multi_gpu_probe(8)], ids=["cpu", "h200", "8-gpus"])
def test_real_probe_reports_pass_unchanged(tmp_path, probe):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(probe))
    assert schema.load_probe(path, "probe.json") == probe


CHECKS_SECTION = {
    "debug_info": {"state": "ok", "reason": None, "build_type": "Release",
                   "libraries": [{"library": "lib/libtorch_cpu.so", "debug_info": False, "debug_line": False,
                                  "bytes": 400_000_000}], "resolved": None},
    "numerics": {"state": "ok", "reason": None, "cases": [{"name": "matmul 64x64 (float32)", "ok": True,
                                                          "max_abs_err": 3.8e-06, "scale": 21.5, "ms": 0.2}]},
    "compile": {"state": "ok", "reason": None, "device": "cpu", "passed": 1, "cells": [
        {"backend": "eager", "mode": "default", "state": "pass", "compile_s": 0.4, "run_ms": 2.5,
         "max_abs_err": 0.0, "error": None, "seconds": 3.1},
        {"backend": "inductor", "mode": "default", "state": "timeout", "compile_s": None, "run_ms": None,
         "seconds": 600.0, "error": "no result within 600 s"}]},
    "ddp": {"state": "ok", "reason": None, "backend": "gloo", "world_size": 2, "seconds": 4.2,
            "ranks": [{"rank": 0, "loss": 0.51, "losses_equal": True, "grads_equal_across_ranks": True,
                       "grads_match_reference": True, "params_equal_after_step": True}]},
}


def test_a_rocm_probe_passes_unchanged_and_renders_its_table():
    probe = _rocm_probe()
    assert schema.validate_probe(probe) == probe
    console = Console(record=True, width=200)
    rep.render(make_report(schema.validate_probe(probe)), console)
    out = console.export_text()
    assert "gfx90a:xnack-" in out and "1328" in out and "AMD GPUs: no-driver" in out


def test_the_checks_section_passes_unchanged():
    probe = {**cpu_probe(), "checks": CHECKS_SECTION}
    assert schema.validate_probe(probe) == probe
    skipped = {**cpu_probe(), "checks": {"state": "skipped", "reason": "checks.py not found next to the probe"}}
    assert schema.validate_probe(skipped) == skipped


def test_the_probe_writes_what_the_host_accepts(tmp_path):
    """A broken build's matmul gives NaN, and JSON has no NaN: the probe writes null (the check fails on
    its own `ok`); strings beyond the host's caps are cut by the probe, not refused by the host."""
    from buildctl.in_container import probe as probe_mod

    raw = {**cpu_probe(), "checks": {"numerics": {"state": "failed", "reason": "matmul", "cases": [
        {"name": "matmul", "ok": False, "max_abs_err": float("nan"), "scale": float("inf"), "ms": 1.0}]}},
           "fatal": "x" * (1 << 20)}
    raw["config"]["text"] = "y" * (1 << 20)
    safe = probe_mod.json_safe(json.loads(json.dumps(raw)))
    checked = schema.validate_probe(safe)
    case = checked["checks"]["numerics"]["cases"][0]
    assert case["max_abs_err"] is None and case["scale"] is None and case["ok"] is False
    assert len(checked["fatal"]) == probe_mod.MAX_STR and checked["fatal"].endswith("…")
    assert len(checked["config"]["text"]) == probe_mod.MAX_TEXT


def test_unknown_probe_fields_are_dropped_not_passed_on(tmp_path):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps({**cpu_probe(), "extra": {"deep": [1, 2]}, "framework": {"version": "1", "x": 1}}))
    probe = schema.load_probe(path, "probe.json")
    assert "extra" not in probe and probe["framework"] == {"version": "1"}


def test_a_crashed_probe_still_validates():
    crashed = {"probe_version": 1, "module": "torch", "fatal": "SystemExit: 3", "traceback": "Traceback ...",
               "seconds": 0.1}
    assert schema.validate_probe(crashed) == crashed


def _markup_probe() -> dict:
    """A GPU probe with rich markup in every string a person reads."""
    p = h200_probe()
    p["import"]["smoke"] = "wrong result [/opt/x] for sum"
    p["gpus"]["devices"][0]["name"] = "NVIDIA [bold]H200[/bold]"
    p["gpus"]["driver_version"] = "[/driver]"
    p["framework"]["version"] = "2.11.0+[red]cu130"
    p["framework"]["git_version"] = "[link=https://evil.example]abc[/link]"
    p["arch_coverage"]["libraries"][0]["path"] = "lib/[/opt/x]libtorch_cuda.so"
    p["arch_coverage"]["tool"] = "/usr/[/]bin/cuobjdump"
    p["sweep"]["label"] = "NCCL [/opt/venv/lib/libnccl.so.2]"
    p["sweep"]["capped"] = {"max": 8, "reason": "capped [/x]"}
    p["sweep"]["graph"] = {"state": "error", "reason": "graph [/y] failed"}
    p["config"]["text"] = "PyTorch built with:\n  - [bold]x[/bold] [/opt/z]\n"
    return p


def test_markup_in_probe_strings_is_shown_as_text():
    """The old render() passed these to rich as markup: '[/opt/x]' raised MarkupError ('internal error',
    summary lost), '[bold]...' and '[link=...]' vanished from what was shown (or became a live link)."""
    console = Console(record=True, width=250)
    rep.render(make_report(_markup_probe(), cuda_spec()), console)
    out = console.export_text()
    for s in ("wrong result [/opt/x] for sum", "NVIDIA [bold]H200[/bold]", "2.11.0+[red]cu130",
              "[link=https://evil.example]abc[/link]", "lib/[/opt/x]libtorch_cuda.so", "/usr/[/]bin/cuobjdump",
              "NCCL [/opt/venv/lib/libnccl.so.2]", "capped [/x]", "graph [/y] failed", "[bold]x[/bold] [/opt/z]",
              "driver [/driver]"):
        assert s in out, s


@pytest.mark.parametrize("error", MARKUP)
def test_markup_in_an_import_error_is_shown_as_text(error):
    """The issue's case: a real import error `cannot load [/opt/venv/lib/libnccl.so.2]`; before, MarkupError
    from the build-facts and expectations tables."""
    probe = cpu_probe()
    probe["import"] = {"ok": False, "seconds": 0.1, "error": f"ImportError: {error}", "traceback": f"tb {error}"}
    probe.pop("framework")
    console = Console(record=True, width=250)
    r = make_report(probe)
    rep.render(r, console)
    out = console.export_text()
    assert out.count(f"ImportError: {error}") == 2  # build facts and the failed check
    assert not r.ok


def test_a_crashed_probe_with_markup_is_shown_as_text():
    probe = {"probe_version": 1, "module": "torch", "fatal": "OSError: [/opt/x] [bold]", "traceback": "[/tb]"}
    console = Console(record=True, width=200)
    rep.render(make_report(probe), console)
    out = console.export_text()
    assert "probe crashed: OSError: [/opt/x] [bold]" in out and "[/tb]" in out


def test_strings_at_their_caps_render_quickly():
    """Every string at its cap (16 KiB; 256 KiB for the config text and the traceback). The old render()
    read probe strings as markup and highlighted them: a 16 KiB `fatal` took 16 s, 64 KiB 236 s."""
    probe = {"probe_version": 1, "module": "torch", "fatal": "x" * schema.MAX_STR,
             "traceback": "y" * schema.MAX_TEXT, "config": {"text": "z" * schema.MAX_TEXT}}
    probe = schema.validate_probe(probe)
    console = Console(record=True, width=200)
    t0 = time.monotonic()
    rep.render(make_report(probe), console)
    assert time.monotonic() - t0 < 10
    assert console.export_text().count("x" * 100) >= schema.MAX_STR // 200


def test_diff_shows_markup_in_paths_fields_and_values_as_text(tmp_path):
    """print_diff passed the paths, field names and labels to rich: '[/a]' in an artifact folder name or a
    Build settings key raised MarkupError."""
    probe = _markup_probe()
    probe["config"]["build_settings"]["[/KEY]"] = "[bold]v"
    a, b = tmp_path / "[" / "a]", tmp_path / "b[bold]"  # a: ".../[/a]"
    for path, p in ((a, probe), (b, h200_probe())):
        path.mkdir(parents=True)
        (path / "manifest.json").write_text(json.dumps({"recipe": "[/r]", "wheels": [{"file": "[x].whl"}]}))
        rep.write_json(make_report(p, cuda_spec()), path / "report.json")
    console = Console(record=True, width=250)
    compare.print_diff(compare.diff_paths(a, b), console, show_all=True)
    out = console.export_text()
    for s in (f"A {a}", f"B {b}", "[/KEY]", "[bold]v", "[/r]", "[x].whl", "A: NCCL [/opt/venv/lib/libnccl.so.2]"):
        assert s in out, s


REPORT_CORPUS = [
    ("probe-section-wrong", lambda d: d["probe"].update(framework=[1]), ["probe.framework"],
     "AttributeError: 'list' object has no attribute 'get'"),
    ("checks-not-a-list", lambda d: d.update(checks=5), ["checks"], "TypeError: 'int' object is not iterable"),
    ("check-without-name", lambda d: d["checks"][0].pop("name"), ["checks[0].name"], "KeyError: 'name'"),
    ("wheel-missing", lambda d: d.pop("wheel"), ["wheel"], "KeyError: 'wheel'"),
    ("mode-unknown", lambda d: d.update(mode="[bold]"), ["mode"], "accepted and shown as markup"),
    ("environment-nested", lambda d: d.update(environment={"image": {"a": [1]}}), ["environment.image"],
     "kept whatever was there"),
]


@pytest.mark.parametrize("case_id, mutate, words, old", REPORT_CORPUS, ids=[c[0] for c in REPORT_CORPUS])
def test_malformed_report_json_is_refused_by_diff_and_load(tmp_path, case_id, mutate, words, old):
    """`invoke diff` and load_report on a damaged report.json. `old`: what the code before did."""
    d = make_report().to_dict()
    mutate(d)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(d))
    for call in (lambda: rep.load_report(path), lambda: compare.diff_paths(path, path)):
        with pytest.raises(InputError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(f"{path}: ") and "\n" not in msg
        for w in words:
            assert w in msg, msg


# --------------------------------------------------------------------------- through the command line


def invoke(*args: str):
    return invoke_here(*args, cwd=ROOT, env={"BUILDCTL_DEBUG": "", "COLUMNS": "200", "BUILDCTL_CACHE": str(CACHE)})


def test_cli_diff_of_a_damaged_report_is_one_line_exit_2(tmp_path):
    d = make_report().to_dict()
    d["probe"]["import"] = "yes"  # before: AttributeError, "internal error", exit 1
    (tmp_path / "report.json").write_text(json.dumps(d))
    proc = invoke("diff", str(tmp_path / "report.json"), str(tmp_path / "report.json"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ") and "probe.import" in proc.stderr


def test_every_section_the_probe_writes_has_a_model():
    """The schema drops unknown fields: a section added to probe.py without a model would vanish from
    every report. Read what the probe writes from its source: `report["x"] = ...` and the keys of the
    dicts it starts a report with (a normal run and the crash path)."""
    import ast

    from buildctl.in_container import probe as probe_mod

    tree = ast.parse(Path(probe_mod.__file__).read_text())
    written: set[str] = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == "report" \
                    and isinstance(t.slice, ast.Constant):
                written.add(t.slice.value)
            if isinstance(t, ast.Name) and t.id == "report" and isinstance(node.value, ast.Dict):
                written |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    known = {f.alias or name for name, f in schema.Probe.model_fields.items()}
    assert {"gpus", "fatal", "probe_version", "checks"} <= written and written <= known, written - known


def _string_paths(data, path=()):
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _string_paths(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _string_paths(v, (*path, i))
    elif isinstance(data, str):
        yield path


def _set(probe: dict, path: tuple, value) -> dict:
    probe = copy.deepcopy(probe)
    cur = probe
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return probe


# Past int()'s 4300-digit limit, or a digit to str.isdigit that int() refuses ('²')
LONG_DIGITS = ["9" * 5000, "12." + "9" * 5000, "sm_" + "9" * 5000, "compute_" + "9" * 5000, "\u00b2.1", "9.0\u00b2"]


@pytest.mark.parametrize("value", LONG_DIGITS, ids=["digits", "version", "sm", "compute", "superscript", "cc"])
def test_a_probe_string_of_any_digits_is_a_failed_check_never_an_exception(value):
    """Issue 35, item 7: probe.json passes its schema with strings up to 16 KiB, and the wheel under test
    writes it; version and arch parsing called int() on digit runs past Python's 4,300-digit limit
    (framework.cuda/nccl/cudnn, arch_list, arch_coverage.sass): ValueError, an internal error. Every string
    of real probes is tried: the report is made, and a value that does not read fails its check."""
    cases = [(h200_probe(), cuda_spec()), (cpu_probe(), None), (_rocm_probe(), None)]
    tried = 0
    for probe, spec in cases:
        for path in _string_paths(probe):
            try:
                hostile = schema.validate_probe(_set(probe, path, value))
            except InputError:
                continue  # refused in one line: fine
            report = make_report(hostile, spec)
            tried += 1
            if path in (("framework", "cuda"), ("framework", "nccl"), ("framework", "cudnn")) and spec is not None:
                label = {"cuda": "CUDA", "nccl": "NCCL", "cudnn": "cuDNN"}[path[1]]
                assert [c.ok for c in report.checks if c.name == label] == [False], (path, report.checks)
    assert tried > 100
    everywhere = h200_probe()  # every version and arch at once, rendered as a person sees it
    for path in (("framework", "cuda"), ("framework", "nccl"), ("framework", "cudnn"), ("gpus", "driver_version"),
                 ("gpus", "devices", 0, "compute_capability"), ("framework", "arch_list", 0), ("arch_coverage", "sass", 0)):
        everywhere = _set(everywhere, path, value)
    console = Console(record=True, width=100)
    report = make_report(schema.validate_probe(everywhere), cuda_spec())
    rep.render(report, console)
    assert not report.ok and "FAILED" in console.export_text()
