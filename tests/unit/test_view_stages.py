"""Step lines as a person reads them in a CI log (PlainView): one line per change, no repeats.
The pipeline owns the steps (pipeline.Steps); the view only shows what it is told."""

from __future__ import annotations

from buildctl import ui
from buildctl.errors import StepFailed
from buildctl.pipeline import pipeline


def stage_lines(out: str) -> list[str]:
    return [ln.split(" (")[0] for ln in out.splitlines() if ln.startswith("==> ")]


def test_a_step_announced_twice_is_one_step(capsys):
    """The pipeline starts 'source' and the build script's first step line names it again; the log
    showed '==> source: running' twice and the step's clock restarted at the second."""
    steps = pipeline.Steps(ui.PlainView())
    steps.start("image")
    steps.start("source")
    steps.line("buildctl: step source")
    steps.line("buildctl: step configure")
    steps.finish()
    assert stage_lines(capsys.readouterr().out) == [
        "==> image: running", "==> image: ok", "==> source: running", "==> source: ok",
        "==> configure: running", "==> configure: ok"]
    assert set(steps.durations) == {"image", "source", "configure"}


def test_a_failing_compile_is_reported_in_the_scripts_step(capsys):
    """The step a failure is reported in comes from the build script's markers the pipeline read,
    not from the view: a CMake error fails 'configure', and the view shows that step failed."""
    view = ui.PlainView()
    steps = pipeline.Steps(view)
    steps.start("source")
    for line in ("buildctl: step source", "cloning", "buildctl: step configure", "CMake Error at x"):
        steps.line(line)
        view.line(line)
    assert steps.failed(StepFailed("compile", 1, "CMake Error at x")) == "configure"
    assert stage_lines(capsys.readouterr().out)[-1] == "==> configure: failed"
    assert view.status["configure"] == "failed" and steps.current is None


def test_a_step_that_did_not_run_is_shown_with_no_time(capsys):
    view = ui.PlainView()
    steps = pipeline.Steps(view)
    steps.skip("compile", "cached")
    assert capsys.readouterr().out.splitlines() == ["==> compile: cached"]
    assert "compile" not in view.durations and steps.durations == {}
