"""The verification report written out: report.json, report.md, report.png (the all-reduce sweep) and
GitHub's step summary."""

from __future__ import annotations

from pathlib import Path

from buildctl.secrets import filtered
from buildctl.verify.report import (
    JSON_NAME,
    MD_NAME,
    PNG_NAME,
    Report,
    blas_text,
    compile_cells,
    compile_skipped,
    compile_title,
    fmt_bw,
    headline_text,
    num,
    result_mark,
    second_shape,
    write_json,
)


def cell_axes(cell: dict) -> str:
    """`fullgraph, dynamic` as set for the cell, `-` for neither, `?` when the probe predates the axes."""
    if cell.get("fullgraph") is None and cell.get("dynamic") is None:
        return "?"
    return ", ".join(a for a in ("fullgraph", "dynamic") if cell.get(a)) or "-"


def markdown(report: Report) -> str:
    fw = report.probe.get("framework") or {}
    lines = [f"## buildctl verify: {report.subject} — {'passed' if report.ok else 'FAILED'}", "",
             f"{report.verdict}  ", f"{report.module} {fw.get('version')}, "
             + (f"HIP {fw['hip']}, " if fw.get("hip") else "") + f"CUDA {fw.get('cuda')}, "
             f"NCCL {fw.get('nccl')}, cuDNN {fw.get('cudnn')}, debug {fw.get('debug')}; {report.mode} mode", ""]
    cpu = report.probe.get("cpu") or {}
    if cpu.get("state") == "ok":
        lines += [f"CPU capability {cpu.get('capability')}; BLAS {blas_text(cpu)}", ""]
    lines += ["| check | expected | actual | result | detail |", "|---|---|---|---|---|"]
    for c in report.checks:
        cell = [c.name, str(c.expected), str(c.actual), result_mark(c.ok)[0], c.detail]
        lines.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in cell) + " |")
    lines += ["", f"**all-reduce:** {headline_text(report)}", ""]
    sw = report.sweep
    if sw.get("rows"):
        lines += ["| size (B) | time (us) | algbw (GB/s) | busbw (GB/s) | #wrong |", "|---:|---:|---:|---:|---:|"]
        for r in sw["rows"]:
            lines.append(f"| {r['size']} | {r['time_us']:.2f} | {fmt_bw(r['algbw_gbs'])} | "
                         f"{fmt_bw(r['busbw_gbs'])} | {r['wrong']} |")
        if sw.get("capped"):
            lines += ["", f"_{sw['capped']['reason']}_"]
        lines.append("")
    cells = compile_cells(report)
    if cells:
        lines += [f"**{compile_title(report)}:**", "",
                  "| backend | mode | axes | result | compile (s) | step (ms) | 2nd shape | note |",
                  "|---|---|---|---|---:|---:|---|---|"]
        for c in cells:
            note = str(c.get("error") or c.get("reason") or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {c['backend']} | {c['mode']} | {cell_axes(c)} | {c['state']} | {num(c.get('compile_s'))} | "
                         f"{num(c.get('run_ms'))} | {second_shape(c)} | {note} |")
        lines.append("")
    else:
        lines += [f"_{compile_skipped(report)}_", ""]
    return "\n".join(lines) + "\n"


def append_step_summary(report: Report, target: str | None) -> Path | None:
    """Append the Markdown to `target` ($GITHUB_STEP_SUMMARY: VerifyOptions.step_summary) when set (GitHub
    Actions); returns the path."""
    if not target:
        return None
    with open(target, "a") as f:
        f.write(filtered(markdown(report)))
    return Path(target)


# --------------------------------------------------------------------------- plot


def plot(report: Report, path: Path) -> Path | None:
    """Latency and busbw against message size (log x), headless. None when there is no sweep."""
    sw = report.sweep
    rows = sw.get("rows") or []
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot(sizes, [r["time_us"] for r in rows], marker="o")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("message size (bytes)")
    ax1.set_ylabel("time per all-reduce (us)")
    ax1.set_title("latency")
    ax1.grid(True, which="both", alpha=0.3)
    ax2.plot(sizes, [r["busbw_gbs"] for r in rows], marker="o", label="busbw")
    ax2.plot(sizes, [r["algbw_gbs"] for r in rows], marker=".", linestyle="--", alpha=0.6, label="algbw")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("message size (bytes)")
    ax2.set_ylabel("GB/s")
    ax2.set_title("bandwidth")
    ax2.legend()
    ax2.grid(True, which="both", alpha=0.3)
    fw = report.probe.get("framework") or {}
    fig.suptitle(f"{report.module} {fw.get('version')}: {sw.get('label')}", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def relocate(report: Report, old_dir: Path, new_dir: Path) -> Report:
    """The report of a folder moved from `old_dir` to `new_dir` (verified in the staging folder, then
    published or kept): its wheel's and files' paths there, report.json and .md rewritten in place."""
    def moved(value):
        text = str(value)
        return str(new_dir / Path(text).relative_to(old_dir)) if text.startswith(f"{old_dir}/") else value

    if report.wheel and report.wheel.get("path"):
        report.wheel = {**report.wheel, "path": moved(report.wheel["path"])}
    report.files = {k: (moved(v) if v else v) for k, v in report.files.items()}
    if (new_dir / JSON_NAME).is_file():
        (new_dir / MD_NAME).write_text(filtered(markdown(report)))
        write_json(report, new_dir / JSON_NAME)
    return report


def write_all(report: Report, out_dir: Path) -> Report:
    """report.json, report.md and report.png in out_dir; records the paths in report.files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png = plot(report, out_dir / PNG_NAME)
    md = out_dir / MD_NAME
    report.files = {"json": str(out_dir / JSON_NAME), "markdown": str(md), "plot": str(png) if png else None}
    md.write_text(filtered(markdown(report)))
    write_json(report, out_dir / JSON_NAME)
    return report
