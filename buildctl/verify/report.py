"""The verification report: JSON (schema in docs/verify.md), rich tables, Markdown summary, PNG plot."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from buildctl.errors import BuildctlError, InputError
from buildctl.store import artifacts
from buildctl.verify import schema
from buildctl.verify.expectations import Check, failed
from buildctl.verify.expectations.evaluation import cell_name
from buildctl.verify.report_hardware import coverage_section, gpus_section, probe_text

if TYPE_CHECKING:
    from buildctl.failure.diagnose import Diagnosis

SCHEMA_VERSION = 1
JSON_NAME, MD_NAME, PNG_NAME = "report.json", "report.md", "report.png"


@dataclass
class Report:
    """One verification run. `probe` is probe.py's JSON as written; the rest is derived from it."""

    wheel: dict[str, Any] | None  # path, name, size, sha256 (None for an image)
    mode: str  # host | container | image
    module: str  # torch | demofw
    environment: dict[str, Any]  # image (container) or interpreter (host), python version
    expectations: dict[str, Any]
    checks: list[Check]
    probe: dict[str, Any]
    verdict: str
    spec: dict[str, Any] | None = None  # name, accelerator, framework of the recipe, when one was given
    files: dict[str, str | None] = field(default_factory=dict)  # json, markdown, plot
    image: dict[str, Any] | None = None  # reference, id, python: `invoke verify --image`
    created: str = field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc)
                         .isoformat(timespec="seconds"))
    schema_version: int = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return not failed(self.checks)

    @property
    def subject(self) -> str:
        """What was verified, in a few words: the wheel's file name, or the image reference and its Python."""
        if self.image:
            return f"{self.image.get('reference')} ({self.image.get('python')})"
        return str((self.wheel or {}).get("name"))

    @property
    def sweep(self) -> dict:
        return self.probe.get("sweep") or {}

    def to_dict(self) -> dict:
        from buildctl import __version__

        return {
            "schema_version": self.schema_version,
            "created": self.created,
            "buildctl_version": __version__,
            "ok": self.ok,
            "verdict": self.verdict,
            "mode": self.mode,
            "module": self.module,
            "wheel": self.wheel,
            "image": self.image,
            "environment": self.environment,
            "spec": self.spec,
            "expectations": self.expectations,
            "checks": [c.to_dict() for c in self.checks],
            "headline": headline(self),
            "files": self.files,
            "probe": self.probe,
        }

    @classmethod
    def from_dict(cls, d: dict, what: str = "report.json") -> Report:
        """A report read back from JSON of unknown origin: shape and types checked (schema.py)."""
        v = d.get("schema_version") if isinstance(d, dict) else None
        if not isinstance(v, int) or isinstance(v, bool) or v > SCHEMA_VERSION or v < 1:
            raise InputError(f"{what}: report schema_version {v!r} is not one this buildctl reads "
                             f"(1..{SCHEMA_VERSION}); fix: use a buildctl at least as new as the one that wrote it")
        d = schema.validate_report(d, what)
        return cls(wheel=d.get("wheel"), image=d.get("image"), mode=d["mode"], module=d["module"],
                   environment=d.get("environment", {}),
                   expectations=d.get("expectations", {}), checks=[Check.from_dict(c) for c in d.get("checks", [])],
                   probe=d["probe"], verdict=d["verdict"], spec=d.get("spec"), files=d.get("files") or {},
                   created=d["created"], schema_version=v)


def headline(report: Report) -> dict | None:
    """Latency headline with its label, so that a gloo figure can never pass for an NCCL one."""
    sw = report.sweep
    if sw.get("state") != "ok" or not sw.get("headline"):
        return None
    h = sw["headline"]
    return {"backend": sw.get("backend"), "device": sw.get("device"), "world_size": sw.get("world_size"),
            "label": sw.get("label"), **h}


def write_json(report: Report, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    artifacts.write_json(path, report.to_dict())  # through the secret filter, atomically
    return path


def load_report(path: Path) -> Report:
    if not Path(path).is_file():
        raise InputError(f"{path}: no such report; fix: give a report.json or an artifact directory")
    fix = "fix: give a report.json written by `invoke verify` or an artifact directory"
    d = schema.read_json(Path(path), f"{path}", fix)
    if not isinstance(d, dict) or "schema_version" not in d:
        raise InputError(f"{path}: not a verification report (no schema_version); fix: give a report.json")
    return Report.from_dict(d, str(path))


# --------------------------------------------------------------------------- formatting helpers


def fmt_size(n: int) -> str:
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}"


def fmt_bw(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    return f"{v:.3f}" if v >= 0.01 else f"{v:.2e}"


def result_mark(ok: bool | None) -> tuple[str, str]:
    return {True: ("PASS", "green"), False: ("FAIL", "bold red"), None: ("n/a", "dim")}[ok]


def _facts_rows(report: Report) -> list[tuple[str, str]]:
    p = report.probe
    fw = p.get("framework") or {}
    dist = p.get("distributed") or {}
    imp = p.get("import") or {}
    rows = [
        ("import", f"ok in {imp.get('seconds')} s, smoke {imp.get('smoke')}" if imp.get("ok") else f"FAILED: {imp.get('error')}"),
        ("version", str(fw.get("version"))),
        ("git_version", str(fw.get("git_version"))),
        ("debug", str(fw.get("debug"))),
        ("CUDA", str(fw.get("cuda"))),
        ("HIP", str(fw.get("hip"))),
        ("cuDNN", str(fw.get("cudnn"))),
        ("NCCL", str(fw.get("nccl"))),
        ("arch list", " ".join(fw.get("arch_list") or []) or "none"),
        ("C++11 ABI", str(fw.get("cxx11_abi"))),
        ("distributed", ", ".join(k for k in ("nccl", "gloo", "mpi", "hccl") if dist.get(k)) or
         ("none" if dist.get("available") else "not available")),
        ("python", f"{(p.get('python') or {}).get('version')} ({(p.get('python') or {}).get('executable')})"),
    ]
    cpu = p.get("cpu") or {}
    if cpu.get("state") == "ok":
        rows += [("CPU capability", str(cpu.get("capability"))), ("BLAS", blas_text(cpu)),
                 ("MKL / oneDNN / OpenMP", " / ".join(str(cpu.get(k)) for k in ("mkl", "mkldnn", "openmp")))]
    store = dist.get("tcpstore") or {}
    if store.get("state") not in (None, "n/a"):
        rows.append(("TCPStore", tcpstore_text(store)))
    return rows


# The BLAS a loaded library is, by its real path (a distro's libblas.so.3 is whichever the alternatives
# system points at: /usr/lib/<triplet>/blas/ is the reference one, openblas-pthread/ OpenBLAS).
_BLAS_KINDS = (("openblas", "OpenBLAS"), ("mkl", "MKL"), ("blis", "BLIS"), ("flexiblas", "FlexiBLAS"),
               ("atlas", "ATLAS"), ("/blas/libblas", "reference BLAS (netlib)"))


def blas_kinds(libraries: list[str]) -> list[str]:
    """['reference BLAS (netlib)'] for ['/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.12.1']."""
    out: list[str] = []
    for path in libraries:
        kind = next((k for needle, k in _BLAS_KINDS if needle in path.lower()), None)
        if kind and kind not in out:
            out.append(kind)
    return out


def blas_text(cpu: dict) -> str:
    """'generic (LAPACK generic); loaded: reference BLAS (netlib): libblas.so.3.12.1, ...' from the probe's cpu
    section; 'none seen' when the BLAS is linked in statically (PyPI's x86 wheels carry MKL inside)."""
    libs = cpu.get("libraries") or []
    kinds = ", ".join(blas_kinds(libs))
    loaded = ", ".join(Path(x).name for x in libs) or "none seen"
    return (f"{cpu.get('blas') or 'not named'} (LAPACK {cpu.get('lapack') or 'not named'}); loaded: "
            + (f"{kinds}: " if kinds else "") + loaded)


def tcpstore_text(store: dict) -> str:
    if store.get("use_libuv_env") == "0":
        return f"legacy backend, USE_LIBUV=0: {store.get('reason')}"
    libuv = store.get("libuv")
    return ("libuv backend" if libuv else "legacy backend" if libuv is False else "backend unknown") + (
        f" ({store['reason']})" if store.get("reason") else "")


def sweep_table(sw: dict) -> Table:
    t = Table(title=probe_text(f"all-reduce sweep: {sw.get('label')}"), title_justify="left")
    for col in ("size (B)", "count", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"):
        t.add_column(col, justify="right")
    for r in sw.get("rows") or []:
        t.add_row(str(r["size"]), str(r["count"]), f"{r['time_us']:.2f}", fmt_bw(r["algbw_gbs"]),
                  fmt_bw(r["busbw_gbs"]), Text(str(r["wrong"]), style="red" if r["wrong"] else ""))
    return t


def headline_text(report: Report) -> str:
    h = headline(report)
    if not h:
        sw = report.sweep
        return f"all-reduce: {sw.get('state', 'not run')}" + (f" ({sw.get('reason')})" if sw.get("reason") else "")
    s = f"{fmt_size(h['latency_size'])} B latency {h['latency_us']:.2f} us"
    if h.get("peak_busbw_gbs") is not None:
        s += f", peak busbw {h['peak_busbw_gbs']:.3f} GB/s at {fmt_size(h['peak_busbw_size'])} B"
    else:
        s += ", busbw n/a (1 rank)"
    if h.get("graph_latency_us") is not None:
        s += f", CUDA-graph latency {h['graph_latency_us']:.2f} us"
    return f"{s} [{h['label']}]"


# --------------------------------------------------------------------------- rich


def render(report: Report, console: Console) -> None:
    """Everything a person reads: config in full, facts, expectations, arch coverage, GPUs, sweep.

    Every string that came from the probe, the wheel or the environment is a Text (never markup)."""
    p = report.probe
    status = Text("PASSED", style="green") if report.ok else Text("FAILED", style="bold red")
    if report.image:
        env = report.image.get("id")
    else:
        env = report.environment.get("image") or report.environment.get("python") or ""
    console.print(Panel(Text.assemble(probe_text(f"{report.subject}\n{report.mode}: {env}\n{report.verdict}\n"),
                                      status), title="buildctl verify", title_align="left"))
    if p.get("fatal"):
        console.print(Text.assemble(("probe crashed: ", "bold red"), probe_text(p["fatal"])))
        console.print(probe_text(p.get("traceback", "")))
    config = (p.get("config") or {}).get("text")
    if config:
        console.print(Panel(probe_text(config.rstrip()), title=probe_text(f"{report.module}.__config__.show()"),
                            title_align="left"))
    console.print(facts_table(report))
    console.print(checks_table(report.checks))
    coverage = coverage_section(p.get("arch_coverage") or {})
    if coverage is not None:
        console.print(coverage)
    console.print(gpus_section(p))
    sw = report.sweep
    if sw.get("rows"):
        console.print(sweep_table(sw))
        if sw.get("capped"):
            console.print(Text.assemble(("note: ", "yellow"), probe_text(sw["capped"]["reason"])))
        g = sw.get("graph") or {}
        if g.get("state") == "error":
            console.print(Text.assemble(("CUDA-graph latency failed: ", "yellow"), probe_text(g.get("reason"))))
    matrix = compile_matrix_table(report)
    console.print(matrix if matrix is not None else probe_text(compile_skipped(report)))
    console.print(probe_text(headline_text(report), style="bold"))
    files = ", ".join(f"{k} {v}" for k, v in report.files.items() if v)
    if files:
        console.print(probe_text(f"written: {files}"))


def facts_table(report: Report) -> Table:
    """What the probe found of the build: version, CUDA, NCCL, arch list, ABI, distributed backends, CPU."""
    facts = Table(title="build facts", title_justify="left", show_header=False)
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    for k, v in _facts_rows(report):
        facts.add_row(k, probe_text(v))
    return facts


def checks_table(checks: list[Check]) -> Table:
    """The expectations, one row a check: expected, actual, the result and why."""
    t = Table(title="expectations", title_justify="left")
    for col in ("check", "expected", "actual", "result", "detail"):
        t.add_column(col, overflow="fold")
    for c in checks:
        sign, style = result_mark(c.ok)
        t.add_row(probe_text(c.name), probe_text(c.expected), probe_text(c.actual), Text(sign, style=style),
                  probe_text(c.detail))
    return t


# --------------------------------------------------------------------------- markdown


def compile_cells(report: Report) -> list[dict]:
    return ((report.probe.get("checks") or {}).get("compile") or {}).get("cells") or []


def num(v) -> str:
    return "" if v is None else f"{v:.2f}"


def second_shape(cell: dict) -> str:  # whether a second input shape compiled again
    return {True: "recompiled", False: "reused"}.get(cell.get("recompiled"), "")


def compile_skipped(report: Report) -> str:
    """The matrix that did not run, and why (demofw is not torch; --no-checks; a torch without compile)."""
    matrix = (report.probe.get("checks") or {}).get("compile") or {}
    return f"torch.compile matrix: {matrix.get('state') or 'not run'} ({matrix.get('reason') or 'no cells'})"


def compile_title(report: Report) -> str:
    matrix = report.probe["checks"]["compile"]
    which = f", {matrix['matrix']} set" if matrix.get("matrix") else ""
    return f"torch.compile on {matrix.get('device')} (backend x mode x fullgraph x dynamic{which})"


def compile_matrix_table(report: Report) -> Table | None:
    """torch.compile cells over backend, mode, fullgraph and dynamic: the result, first-call (compile) time,
    steady step time, whether a second input shape recompiled; why a cell failed or was skipped below it."""
    cells = compile_cells(report)
    if not cells:
        return None
    t = Table(title=probe_text(compile_title(report)), title_justify="left", caption_justify="left")
    t.add_column("cell (backend, mode, axes)", overflow="fold")
    for col in ("result", "compile s", "step ms", "2nd shape"):
        t.add_column(col, justify="left" if col in ("result", "2nd shape") else "right", no_wrap=True)
    notes = []
    for c in cells:
        name = cell_name(c).removeprefix("torch.compile ")
        style = {"pass": "green", "skipped": "dim"}.get(c["state"], "red")
        t.add_row(probe_text(name), probe_text(c["state"], style=style), num(c.get("compile_s")),
                  num(c.get("run_ms")), probe_text(second_shape(c)))
        if c.get("error") or c.get("reason"):
            notes.append(f"{name}: {c.get('error') or c.get('reason')}")
    if notes:
        t.caption = probe_text("\n".join(notes))
    return t


class VerificationFailed(BuildctlError):
    """An expectation of the recipe does not hold for the built wheel. `report`: the verification
    report (None when verification stopped before judging: no container, no dependencies);
    `diagnosis`: its known cause, when the build pipeline looked for one."""

    def __init__(self, message: str, *, report: Report | None = None, diagnosis: Diagnosis | None = None):
        super().__init__(message)
        self.report, self.diagnosis = report, diagnosis
