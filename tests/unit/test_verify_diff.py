"""`invoke diff A B`: two artifacts or two reports side by side."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from verify_fixtures import cpu_probe, cuda_spec, h200_probe, make_report

from buildctl.errors import InputError
from buildctl.verify import compare
from buildctl.verify import report as rep


def artifact(path, probe, manifest, spec=None):
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps(manifest))
    rep.write_json(make_report(probe, spec), path / "report.json")
    return path


def rows(result, section):
    return {r["field"]: r for r in result[section]}


def test_diff_of_two_artifacts(tmp_path):
    a = artifact(tmp_path / "a", cpu_probe(),
                 {"recipe": "cpu", "key": "aaa", "toolchain": {"cuda": None, "gcc": "12.2"}, "wheels": [{"file": "a.whl"}]})
    b = artifact(tmp_path / "b", h200_probe(),
                 {"recipe": "cuda13", "key": "bbb", "toolchain": {"cuda": "13.0", "gcc": "12.2"}, "wheels": [{"file": "b.whl"}]},
                 cuda_spec())
    result = compare.diff_paths(a, b)
    json.dumps(result)  # plain data
    m = rows(result, "manifest")
    assert not m["recipe"]["same"] and m["toolchain.gcc"]["same"] and not m["toolchain.cuda"]["same"]
    v = rows(result, "versions")
    assert (v["version"]["a"], v["version"]["b"]) == ("2.13.0+cpu", "2.11.0+cu130")
    assert (v["nccl"]["a"], v["nccl"]["b"]) == (None, "2.28.9")
    s = rows(result, "build_settings")
    assert (s["USE_CUDA"]["a"], s["USE_CUDA"]["b"]) == ("0", "ON") and s["BUILD_TYPE"]["same"]
    assert s["CUDA_VERSION"]["a"] is None  # present on one side only
    assert result["arch"]["only_b"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert result["arch"]["binary_a"] is None and "sm_90a" in result["arch"]["binary_b"]
    lat = result["latency"]
    assert lat["comparable"] is False  # gloo/2 vs nccl/1: never compare them as one figure
    lr = {r["field"]: r for r in lat["rows"]}
    assert (lr["backend"]["a"], lr["backend"]["b"]) == ("gloo", "nccl")
    assert result["differences"] > 0

    console = Console(record=True, width=160)
    compare.print_diff(result, console)
    out = console.export_text()
    assert "__config__ build settings" in out and "USE_CUDA" in out and "NOT comparable" in out
    assert "sm_90" in out


def test_diff_of_two_reports_of_the_same_build(tmp_path):
    rep.write_json(make_report(), tmp_path / "one.json")
    second = cpu_probe()
    second["sweep"]["headline"]["latency_us"] = second["sweep"]["headline"]["latency_us"] * 2
    rep.write_json(make_report(second), tmp_path / "two.json")
    result = compare.diff_paths(tmp_path / "one.json", tmp_path / "two.json")
    assert result["differences"] == 0 and result["manifest"] == []
    assert result["latency"]["comparable"] is True
    lr = {r["field"]: r for r in result["latency"]["rows"]}
    assert lr["latency_us"]["ratio_b_over_a"] == 2.0
    console = Console(record=True, width=160)
    compare.print_diff(result, console)
    assert "all identical" in console.export_text()


def test_report_file_beside_a_manifest_picks_up_the_manifest(tmp_path):
    a = artifact(tmp_path / "a", cpu_probe(), {"recipe": "cpu", "key": "k1"})
    b = artifact(tmp_path / "b", cpu_probe(), {"recipe": "cpu", "key": "k2"})
    result = compare.diff_paths(a / "report.json", b)
    assert rows(result, "manifest")["key"]["b"] == "k2"


def test_diff_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        compare.diff_paths(tmp_path / "nope", tmp_path / "nope2")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="neither manifest.json nor report.json"):
        compare.diff_paths(tmp_path / "empty", tmp_path / "empty")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="not a manifest or report"):
        compare.diff_paths(tmp_path / "bad.json", tmp_path / "bad.json")


def test_diff_shows_the_tag_the_floors_and_what_was_vendored_side_by_side(tmp_path):
    """A repaired wheel against one that stayed linux_* (issue 19): the portability rows a user compares."""
    repaired = {"repaired": True, "tag": "manylinux_2_35_x86_64", "glibc": "2.35", "glibcxx": "3.4.29", "reason": None,
                "vendored": [{"soname": "libgomp.so.1", "file": "d.libs/libgomp-f9a9ad78.so.1.0.0", "bytes": 310369}],
                "excluded": [{"soname": "libnccl.so.2", "pattern": "libnccl.so*", "reason": "CUDA"}]}
    stayed = {"repaired": False, "tag": "linux_x86_64", "glibc": "2.38", "glibcxx": "3.4.33",
              "reason": "its symbol versions are newer than every manylinux policy", "vendored": [], "excluded": []}
    a = artifact(tmp_path / "a", cpu_probe(), {"recipe": "r", "key": "a", "portability": repaired})
    b = artifact(tmp_path / "b", cpu_probe(), {"recipe": "r", "key": "b", "portability": stayed})
    result = compare.diff_paths(a, b)
    p = rows(result, "portability")
    assert (p["tag"]["a"], p["tag"]["b"]) == ("manylinux_2_35_x86_64", "linux_x86_64")
    assert (p["glibc floor"]["a"], p["GLIBCXX floor"]["b"]) == ("2.35", "3.4.33")
    assert (p["vendored"]["a"], p["vendored"]["b"]) == ("libgomp.so.1 (0.3 MB)", "none")
    assert p["excluded"]["a"] == "libnccl.so.2" and p["stayed linux_* because"]["b"].startswith("its symbol")
    console = Console(record=True, width=80)
    compare.print_diff(result, console)
    out = console.export_text()
    assert "portability (the repair)" in out and "manylinux_2_35_x86_64" in out and "libgomp.so.1" in out
    none = compare.diff_paths(artifact(tmp_path / "c", cpu_probe(), {"recipe": "r", "key": "c"}),
                              artifact(tmp_path / "d", cpu_probe(), {"recipe": "r", "key": "d"}))
    assert all(r["same"] and r["a"] is None for r in none["portability"])  # no repair on either side


def _paths(data, path=(), depth=0):
    """Every key and list item of `data` four levels down (sections, fields, entries, their fields)."""
    yield path
    if depth >= 4:
        return
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        yield from _paths(v, (*path, k), depth + 1)


def _replaced(data, path, value):
    data = json.loads(json.dumps(data))
    cur = data
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return data


WRONG_TYPES = [5, "x", [], {}, None, True, -1.5, [1, "a"], {"a": [1]}, "9" * 5000]


def test_a_manifest_of_wrong_types_is_shown_never_a_crash(tmp_path):
    """Issue 35, item 8: `invoke diff` read manifest.json fields as the types it expected (`"vendored": 5`
    raised TypeError, a vendored library's size given as a string too): an internal error. Every field of
    a manifest as the publish writes it (portability and extensions included), each of ten wrong types on
    side B: the comparison is made and printed."""
    from publish_helpers import assembled_artifact

    from buildctl import recipe

    (tmp_path / "build").mkdir()
    _, manifest = assembled_artifact(recipe.load("demo-cpu"), tmp_path / "build", "demofw-0.1-cp311-cp311-linux_x86_64.whl")
    manifest["portability"] = {"repaired": True, "tag": "manylinux_2_35_x86_64", "glibc": "2.35", "reason": None,
                               "vendored": [{"soname": "libgomp.so.1", "file": "d.libs/libgomp.so", "bytes": 310369}],
                               "excluded": [{"soname": "libnccl.so.2", "pattern": "libnccl.so*", "reason": "CUDA"}]}
    side_a = compare.load_side(artifact(tmp_path / "a", cpu_probe(), manifest))
    tried = 0
    for path in _paths(manifest):
        if not path:
            continue
        for value in WRONG_TYPES:
            side_b = {"label": "b", "manifest": _replaced(manifest, path, value), "report": None}
            result = compare.diff_reports(side_a, side_b)
            if path == ("portability", "vendored", 0, "bytes"):  # printed once a value (38 ms each)
                compare.print_diff(result, Console(file=io.StringIO(), width=80))
            tried += 1
    assert tried > 500
    b = artifact(tmp_path / "b", cpu_probe(), _replaced(manifest, ("portability", "vendored"), 5))
    assert compare.diff_paths(b, b)["portability"][3]["a"] == "none"  # through the files, as `invoke diff` reads
