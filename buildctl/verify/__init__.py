"""Post-build verification: probe (in the target environment), expectations, report, diff, runner.

Entry points: `runner.verify_wheel(...)`, `diff.diff_paths(a, b)` + `diff.print_diff(...)`,
`report.load_report(path)` + `report.render(...)`. See docs/verify.md.
"""

from pathlib import Path

# probe.py and the modules it imports from its own folder: wherever the probe runs, they all go.
PROBE_FILES = tuple(Path(__file__).resolve().parent / name
                    for name in ("probe.py", "probe_facts.py", "probe_arch.py", "probe_sweep.py", "checks.py"))


def probe_inputs(folder: str) -> dict[str, Path]:
    """run_container inputs that put the probe's files into `folder` of a container."""
    return {f"{folder}/{p.name}": p for p in PROBE_FILES}
