"""The hardware sections of a verification report as rich renderables (report.render prints them): the arch
coverage of a CUDA or ROCm build, and the GPUs the probe saw."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from buildctl.terminal_text import strip_controls


def probe_text(value: Any, style: str = "") -> Text:
    """Probe and wheel strings are shown as they are: never read as rich markup, no terminal controls."""
    return Text(strip_controls(str(value)), style=style)


def rocm_coverage_table(cov: dict) -> Table:
    """Code objects per gfx target and library (ROCm builds), from the binary's .hip_fatbin."""
    t = Table(title=probe_text(f"arch coverage ({cov.get('tool')})"), title_justify="left")
    for col in ("library", "gfx target", "code objects", "bytes", "note"):
        t.add_column(col, overflow="fold")
    for lib in cov.get("libraries") or []:
        objects = sorted((lib.get("code_objects") or {}).items())
        for target, co in objects or [("-", {"count": 0, "bytes": 0})]:
            t.add_row(probe_text(lib["path"]), probe_text(target), str(co["count"]), str(co["bytes"]),
                      probe_text(lib.get("error") or ""))
    return t


def cuda_coverage_table(cov: dict) -> Table:
    """SASS and PTX per library (CUDA builds), as cuobjdump lists them."""
    t = Table(title=probe_text(f"arch coverage ({cov.get('tool')})"), title_justify="left")
    for col in ("library", "SASS (cubin: count)", "PTX"):
        t.add_column(col, overflow="fold")
    for lib in cov.get("libraries") or []:
        sass = " ".join(f"{k}:{v}" for k, v in (lib.get("sass") or {}).items())
        t.add_row(probe_text(lib["path"]), probe_text(sass), probe_text(" ".join(lib.get("ptx") or {}) or "-"))
    return t


def coverage_section(cov: dict) -> Table | Text | None:
    """The probe's arch coverage: a ROCm or a CUDA build's table, the line saying why there is none, or None
    where the probe has no such section."""
    if cov.get("state") == "ok" and "gfx" in cov:
        return rocm_coverage_table(cov)
    if cov.get("state") == "ok":
        return cuda_coverage_table(cov)
    if cov:
        return probe_text(f"arch coverage: {cov.get('state')} ({cov.get('reason')})")
    return None


def gpus_section(p: dict) -> Table | Text:
    """The GPUs the probe saw: AMD's (a ROCm build: the NVIDIA inventory does not apply), else NVIDIA's table,
    or the line saying why there are none."""
    inv = p.get("gpus") or {}
    amd = p.get("amd_gpus")
    if amd is not None:
        return probe_text(f"AMD GPUs: {amd.get('devices')}" if amd.get("state") == "ok"
                          else f"AMD GPUs: {amd.get('state')} ({amd.get('reason')})")
    if not inv.get("devices"):
        return probe_text(f"GPUs: {inv.get('state')} ({inv.get('reason') or 'none visible'})")
    title = f"GPUs (driver {inv.get('driver_version')}, CUDA <= {inv.get('cuda_driver_version')})"
    t = Table(title=probe_text(title), title_justify="left")
    for col in ("#", "name", "compute capability", "memory (GiB)"):
        t.add_column(col)
    for d in inv["devices"]:
        mem = d.get("memory_total")
        t.add_row(str(d["index"]), probe_text(d["name"]), probe_text(d.get("compute_capability")),
                  f"{mem / (1 << 30):.1f}" if mem else "-")
    return t
