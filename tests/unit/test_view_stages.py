"""Stage lines as a person reads them in a CI log (PlainView): one line per change, no repeats."""

from __future__ import annotations

from buildctl import ui


def test_a_stage_announced_twice_is_one_stage(capsys):
    """The pipeline starts 'source' and the build script's first step line names it again; the log
    showed '==> source: running' twice and the stage's clock restarted at the second."""
    view = ui.PlainView()
    view.stage("image")
    view.stage("source")
    started = view.started["source"]
    view.line("buildctl: step source")
    view.line("buildctl: step configure")
    view.done("configure")
    stage_lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("==> ")]
    assert stage_lines.count("==> source: running") == 1, stage_lines
    assert view.started["source"] == started
    assert [ln.split(" (")[0] for ln in stage_lines] == [
        "==> image: running", "==> image: ok", "==> source: running", "==> source: ok",
        "==> configure: running", "==> configure: ok"]
