"""What a no-op build (`invoke build` that finds its artifact) may import (issue 23). Shared by
tests/unit/test_import_budget.py (the modules of the no-op path against `invoke --list`'s, no engine)
and the integration test of a real no-op build (tests/integration/test_build_integration.py)."""

from __future__ import annotations

# Modules a build that finds its artifact has no use for: the engine's client (docker-py and what it
# loads), the settings library it no longer needs, the live view and progress bar (a terminal's build
# only), the stages it skips, verification, the failure path and what reads wheels. A name ending in a
# dot stands for the modules under it; any other for itself and its submodules.
HEAVY = (
    "docker", "requests", "urllib3", "charset_normalizer", "pydantic_settings", "packaging", "matplotlib", "twine",
    "rich.live", "rich.progress",
    "buildctl.engine.build", "buildctl.engine.connection", "buildctl.engine.objects", "buildctl.engine.run",
    "buildctl.engine.kind", "buildctl.engine.failures", "buildctl.engine.transfer", "buildctl.engine.ssh",
    "buildctl.pipeline.stages.compile", "buildctl.pipeline.stages.verify", "buildctl.pipeline.stages.failure",
    "buildctl.pipeline.rebuild_check", "buildctl.pipeline.until_report", "buildctl.pipeline.eta",
    "buildctl.verify.", "buildctl.failure", "buildctl.store.wheel_facts", "buildctl.store.publish",
    "buildctl.host", "buildctl.scaleout",
)
ALLOWED = ("buildctl.verify.options",)  # a build's options carry the verification's options


def _entry(module: str) -> str | None:
    """The entry of HEAVY that `module` falls under."""
    if module in ALLOWED:
        return None
    return next((h for h in HEAVY if (module.startswith(h) if h.endswith(".") else
                                      module == h or module.startswith(h + "."))), None)


def is_heavy(module: str) -> bool:
    return _entry(module) is not None


def heavy_among(modules) -> list[str]:
    """The heavy ones of `modules`, by the names that say what was imported: the package of HEAVY (docker,
    not its 150 modules), or the module itself under a dotted entry (buildctl.verify.report)."""
    names = {m if h.endswith(".") else h for m in modules if (h := _entry(m)) is not None}
    return sorted(n for n in names if not any(n.startswith(f"{o}.") for o in names))


def imported(importtime_stderr: str) -> dict[str, int]:
    """{module: its own import time in microseconds}, from the stderr of `python -X importtime`."""
    modules = {}
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:"):
            own, _, name = line[len("import time:"):].split("|")
            if own.strip().isdigit():
                modules[name.strip()] = int(own)
    return modules
