"""Post-build verification: expectations, report, comparison, runner (the probe itself runs in the
container: buildctl/in_container/).

Entry points: `runner.verify_wheel(...)`, `compare.diff_paths(a, b)` + `compare.print_diff(...)`,
`report.load_report(path)` + `report.render(...)`. See docs/verify.md.
"""
