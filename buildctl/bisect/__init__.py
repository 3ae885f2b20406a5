"""`invoke bisect`: the first change that broke (or fixed) a build, found by building (docs/bisect.md).

search.py (the search with skips, pure), axes.py (what changes from step to step: commits, versions,
patches, a field's values), gitrepo.py (a git source's history on this machine), log.py (the bisect
log: resume and replay), bisector.py (the driver: each step an ordinary `invoke build`, and a --test in its
runtime image), report.py (plain, JSON, Markdown)."""
