"""Post-build verification: probe (in the target environment), expectations, report, diff, runner.

Entry points: `runner.verify_wheel(...)`, `diff.diff_paths(a, b)` + `diff.print_diff(...)`,
`report.load_report(path)` + `report.render(...)`. See docs/verify.md.
"""
