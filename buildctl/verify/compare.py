"""`invoke diff A B`: compare two builds, each an artifact directory (manifest.json + report.json) or a
report.json (of a wheel or of an image, `invoke verify --image`): what was verified, manifest fields,
versions, CPU capability and BLAS, __config__ Build settings (compiler flags token by token), arch lists,
latency headlines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from buildctl.errors import InputError
from buildctl.store import artifacts
from buildctl.terminal_text import strip_controls
from buildctl.verify import schema
from buildctl.verify.report import JSON_NAME, Report, blas_kinds, fmt_size, headline

VERSION_FIELDS = ("version", "git_version", "debug", "cuda", "hip", "cudnn", "nccl", "cxx11_abi")
LATENCY_FIELDS = ("backend", "device", "world_size", "latency_size", "latency_us", "graph_latency_us",
                  "peak_busbw_gbs", "peak_busbw_size", "wrong")


def _read_json(path: Path) -> Any:
    return schema.read_json(path, str(path), "fix: give an artifact directory or a report.json")


def _manifest(path: Path) -> dict:
    d = _read_json(path)
    if not isinstance(d, dict):
        raise InputError(f"{path}: not a manifest (top level is not an object); "
                         "fix: give an artifact directory or a report.json")
    return d


def _refuse_altered_wheels(artifact: Path) -> None:
    """A wheel beside its manifest that is not the one the manifest records is refused: the comparison would
    describe another file. A wheel not there is no error: diff compares what the records say."""
    for entry in artifacts.recorded_wheels(artifact) or []:
        if (artifact / entry["file"]).exists() or (artifact / entry["file"]).is_symlink():
            problem = artifacts.wheel_problem(artifact / entry["file"], entry)
            if problem is not None:
                raise InputError(f"{problem}; fix: rebuild it (invoke build), or compare its report.json")


def load_side(path: Path) -> dict:
    """{'label', 'manifest': dict | None, 'report': Report | None} for a directory or a JSON file."""
    path = Path(path)
    manifest = report = None
    if path.is_dir():
        if artifacts.is_published(path):
            manifest = _manifest(artifacts.manifest_path(path))
            _refuse_altered_wheels(path)
        if (path / JSON_NAME).is_file():
            report = Report.from_dict(_read_json(path / JSON_NAME), str(path / JSON_NAME))
        if manifest is None and report is None:
            raise InputError(f"{path}: neither {artifacts.MANIFEST_NAME} nor {JSON_NAME} in it; "
                             "fix: give an artifact directory or a report.json")
    elif path.is_file():
        d = _read_json(path)
        if isinstance(d, dict) and "schema_version" in d and "probe" in d:
            report = Report.from_dict(d, str(path))
            mf = artifacts.manifest_path(path.parent)
            if mf.is_file():  # a report beside its artifact's manifest
                manifest = _manifest(mf)
        elif isinstance(d, dict):
            manifest = d
        else:
            raise InputError(f"{path}: not a manifest or report; fix: give an artifact directory or a report.json")
    else:
        raise InputError(f"{path}: no such file or directory; fix: give an artifact directory or a report.json")
    return {"label": str(path), "manifest": manifest, "report": report}


def flatten(d: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """Nested dicts as dotted keys; lists kept as values; below 32 levels a dict is kept as a value."""
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v and depth < 32:
                out.update(flatten(v, key, depth + 1))
            else:
                out[key] = v
    elif prefix:
        out[prefix] = d
    return out


def _rows(a: dict, b: dict) -> list[dict]:
    keys = list(a) + [k for k in b if k not in a]
    return [{"field": k, "a": a.get(k), "b": b.get(k), "same": a.get(k) == b.get(k)} for k in keys]


def _verified(r: Report | None) -> dict:
    """What a report verified, as rows: a wheel (name, sha256) or an image (reference, id, Python)."""
    if r is None:
        return {}
    py = r.probe.get("python") or {}
    if r.image:
        what = {"verified": "image", "name": r.image.get("reference"), "id": r.image.get("id"),
                "python": f"{py.get('version')} ({r.image.get('python')}: {py.get('executable')})"}
    else:
        w = r.wheel or {}
        what = {"verified": "wheel", "name": w.get("name"), "id": f"sha256:{w.get('sha256')}",
                "python": f"{py.get('version')} ({py.get('executable')})"}
    return {**what, "mode": r.mode, "passed": r.ok}


def _cpu(r: Report | None) -> dict:
    """CPU capability, BLAS/LAPACK as built and as loaded, MKL/oneDNN/OpenMP, the TCPStore backend."""
    if r is None:
        return {}
    cpu = r.probe.get("cpu") or {}
    settings = (r.probe.get("config") or {}).get("build_settings") or {}
    store = (r.probe.get("distributed") or {}).get("tcpstore") or {}
    libs = cpu.get("libraries")
    return {
        "CPU capability": cpu.get("capability"),
        "BLAS (build)": cpu.get("blas") or settings.get("BLAS_INFO"),
        "LAPACK (build)": cpu.get("lapack") or settings.get("LAPACK_INFO"),
        "BLAS (loaded)": (", ".join(blas_kinds(libs)) or "none seen") if libs is not None else None,
        "libraries loaded": [Path(x).name for x in libs] if libs is not None else None,
        "MKL": cpu.get("mkl"), "oneDNN": cpu.get("mkldnn"), "OpenMP": cpu.get("openmp"),
        "TCPStore": _tcpstore_short(store),
    }


def _tcpstore_short(store: dict) -> str | None:
    if store.get("state") in (None, "n/a"):
        return None
    if store.get("use_libuv_env") == "0":
        return "legacy backend (USE_LIBUV=0" + (": built without libuv)" if store.get("state") == "fallback" else ")")
    return {True: "libuv backend", False: "legacy backend"}.get(store.get("libuv"), "backend unknown")


def _flag_tokens(row: dict) -> None:
    """A differing *_FLAGS setting: which flags only one side has (`only_a`, `only_b`), in their order."""
    a, b = row["a"], row["b"]
    if row["same"] or not row["field"].endswith("FLAGS") or not isinstance(a, str) or not isinstance(b, str):
        return
    ta, tb = a.split(), b.split()
    row["only_a"] = [t for t in dict.fromkeys(ta) if t not in tb]
    row["only_b"] = [t for t in dict.fromkeys(tb) if t not in ta]


def _portability(manifest: dict | None) -> dict:
    """The repair's record as rows a person compares: the tag, the floors, what was vendored (with sizes)
    and what was left to a provider; all None for a build that recorded none."""
    sec = (manifest or {}).get("portability") if isinstance(manifest, dict) else None
    sec = sec if isinstance(sec, dict) else {}

    def libs(key: str, size: bool) -> str | None:
        listed = sec.get(key)  # a manifest is read as given: any field may be of any type
        entries = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
        if not sec:
            return None
        return ", ".join(f"{e.get('soname')}" + (f" ({_megabytes(e.get('bytes'))})" if size else "")
                         for e in entries) or "none"

    return {"tag": sec.get("tag"), "glibc floor": sec.get("glibc"), "GLIBCXX floor": sec.get("glibcxx"),
            "vendored": libs("vendored", True), "excluded": libs("excluded", False),
            "stayed linux_* because": sec.get("reason")}


def _megabytes(n: Any) -> str:
    if isinstance(n, bool) or not isinstance(n, (int, float)):
        return "size unknown"
    return f"{n / 1e6:.1f} MB"


def diff_reports(a: dict, b: dict) -> dict:
    """Compare two loaded sides (see load_side)."""
    ra: Report | None = a["report"]
    rb: Report | None = b["report"]
    pa = ra.probe if ra else {}
    pb = rb.probe if rb else {}
    fa, fb = pa.get("framework") or {}, pb.get("framework") or {}
    result: dict[str, Any] = {"a": a["label"], "b": b["label"]}
    result["verified"] = _rows(_verified(ra), _verified(rb))
    result["manifest"] = _rows(flatten(a["manifest"] or {}), flatten(b["manifest"] or {}))
    result["portability"] = _rows(_portability(a["manifest"]), _portability(b["manifest"]))
    result["versions"] = _rows({k: fa.get(k) for k in VERSION_FIELDS}, {k: fb.get(k) for k in VERSION_FIELDS})
    result["cpu"] = _rows(_cpu(ra), _cpu(rb)) if ra and rb else []
    result["build_settings"] = _rows((pa.get("config") or {}).get("build_settings") or {},
                                     (pb.get("config") or {}).get("build_settings") or {})
    for row in result["build_settings"]:
        _flag_tokens(row)
    arch_a, arch_b = fa.get("arch_list") or [], fb.get("arch_list") or []
    cov_a, cov_b = pa.get("arch_coverage") or {}, pb.get("arch_coverage") or {}
    bin_a = (cov_a.get("sass") or []) + (cov_a.get("ptx") or [])
    bin_b = (cov_b.get("sass") or []) + (cov_b.get("ptx") or [])
    result["arch"] = {
        "a": arch_a, "b": arch_b,
        "only_a": [x for x in arch_a if x not in arch_b], "only_b": [x for x in arch_b if x not in arch_a],
        "same": set(arch_a) == set(arch_b),
        "binary_a": bin_a if cov_a.get("state") == "ok" else None,
        "binary_b": bin_b if cov_b.get("state") == "ok" else None,
    }
    ha = (headline(ra) if ra else None) or {}
    hb = (headline(rb) if rb else None) or {}
    lat = _rows({k: ha.get(k) for k in LATENCY_FIELDS}, {k: hb.get(k) for k in LATENCY_FIELDS})
    for r in lat:
        if isinstance(r["a"], (int, float)) and isinstance(r["b"], (int, float)) and r["a"] and \
                not isinstance(r["a"], bool):
            r["ratio_b_over_a"] = round(r["b"] / r["a"], 3)
    comparable = bool(ha and hb and ha.get("backend") == hb.get("backend")
                      and ha.get("world_size") == hb.get("world_size"))
    result["latency"] = {"rows": lat, "comparable": comparable,
                         "label_a": ha.get("label"), "label_b": hb.get("label")}
    result["ok"] = {"a": ra.ok if ra else None, "b": rb.ok if rb else None}
    result["differences"] = (sum(not r["same"] for r in result["manifest"])
                             + sum(not r["same"] for r in result["versions"])
                             + sum(not r["same"] for r in result["cpu"])
                             + sum(not r["same"] for r in result["build_settings"])
                             + (0 if result["arch"]["same"] else 1))
    return result


def diff_paths(a: Path, b: Path) -> dict:
    """Entry point for `invoke diff A B`: the comparison as plain JSON-able data."""
    return diff_reports(load_side(Path(a)), load_side(Path(b)))


def _short(v: Any, width: int = 80) -> str:
    if v is None:
        s = "-"
    elif isinstance(v, (list, dict, bool)):
        try:
            s = json.dumps(v)[: width * 4]
        except (RecursionError, ValueError):
            s = "(too deep to show)"
    else:
        s = str(v)
    s = strip_controls(s)
    return s if len(s) <= width else s[: width - 1] + "…"


def _text(v: Any, style: str = "") -> Text:
    """Paths, manifest fields and probe strings as text: never rich markup, no terminal controls."""
    return Text(strip_controls(str(v)), style=style)


def print_diff(result: dict, console: Console, *, show_all: bool = False) -> None:
    """Side-by-side tables; identical rows are counted, not listed, unless show_all."""
    console.print(Text.assemble(("A", "bold"), " ", _text(result["a"]), "\n", ("B", "bold"), " ", _text(result["b"])))

    def table(title: str, rows: list[dict]) -> None:
        shown = rows if show_all else [r for r in rows if not r["same"]]
        same = sum(r["same"] for r in rows)
        if not rows:
            console.print(f"{title}: nothing on either side")
            return
        t = Table(title=f"{title} ({len(rows) - same} differ, {same} identical)", title_justify="left")
        t.add_column("field", style="bold")
        t.add_column("A", overflow="fold")
        t.add_column("B", overflow="fold")
        for r in shown:
            style = "" if r["same"] else "yellow"
            a, b = _short(r["a"]), _short(r["b"])
            if "only_a" in r:  # compiler flags: what one side has and the other lacks, not two cut-off lines
                a = _short("only here: " + (" ".join(r["only_a"]) or "-"), 400)
                b = _short("only here: " + (" ".join(r["only_b"]) or "-"), 400)
            t.add_row(_text(_short(r["field"], 120)), Text(a, style=style), Text(b, style=style))
        if shown:
            console.print(t)
        else:
            console.print(f"{title}: {same} fields, all identical")

    table("verified", result.get("verified") or [])
    table("manifest", result["manifest"])
    table("portability (the repair)", result.get("portability") or [])
    table("versions", result["versions"])
    table("CPU and BLAS", result.get("cpu") or [])
    table("__config__ build settings", result["build_settings"])

    arch = result["arch"]
    t = Table(title="arch lists" + ("" if arch["same"] else " (differ)"), title_justify="left")
    t.add_column("")
    t.add_column("A", overflow="fold")
    t.add_column("B", overflow="fold")
    t.add_row("arch list", _text(" ".join(arch["a"]) or "none"), _text(" ".join(arch["b"]) or "none"))
    t.add_row("only in", _text(" ".join(arch["only_a"]) or "-"), _text(" ".join(arch["only_b"]) or "-"))
    t.add_row("binary (cuobjdump)", _text(" ".join(arch["binary_a"] or []) or "not listed"),
              _text(" ".join(arch["binary_b"] or []) or "not listed"))
    console.print(t)

    lat = result["latency"]
    t = Table(title="latency headline" + ("" if lat["comparable"] else
                                          " (NOT comparable: different backend or world size)"),
              title_justify="left")
    for col in ("", "A", "B", "B/A"):
        t.add_column(col, justify="right" if col else "left")
    for r in lat["rows"]:
        a, b = r["a"], r["b"]
        if r["field"].endswith("_size") and isinstance(a, int):
            a = fmt_size(a)
        if r["field"].endswith("_size") and isinstance(b, int):
            b = fmt_size(b)
        t.add_row(r["field"], Text(_short(a)), Text(_short(b)), str(r.get("ratio_b_over_a", "")))
    console.print(t)
    console.print(_text(f"A: {lat['label_a']}\nB: {lat['label_b']}"))
    console.print(f"{result['differences']} difference(s)")
