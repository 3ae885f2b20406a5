"""Build-log and probe text reaches a person without terminal control sequences; stored logs keep them.

A compile step (a hostile setup.py, or just a colourful tool) writes what it likes to its log: an OSC
sequence retitles the terminal or plants a hyperlink, CSI sequences clear the screen or move the
cursor over earlier lines, a bidi override makes a line read differently than it runs. Rich passes
ESC through (it strips only BEL, BS, CR and a few others), and so did every view before strip_controls (terminal_text.py).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from buildctl import cli, terminal_text, ui
from buildctl.failure import diagnose
from buildctl.pipeline import stages
from buildctl.pipeline.stages.failure import BuildFailed

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ("make \x1b]0;owned\x07title \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ "
           "\x1b[2J\x1b[H\x1b[31mred\x1b[0m \x9b1;1H \x1bc \x07\x08\x7f rtl\u202eexe.txt\u202c \x1bP1$qm\x1b\\end")
SHOWN = "make title link red    rtlexe.txt end"


@pytest.mark.parametrize("raw, shown", [
    (HOSTILE, SHOWN),
    ("tab\tkept, newline\nkept", "tab\tkept, newline\nkept"),
    ("unterminated \x1b]0;title to the end\nnext line", "unterminated \nnext line"),
    ("ünïcödé and [bold]markup[/] stay", "ünïcödé and [bold]markup[/] stay"),
    ("\x1b", ""),
    ("progress\r100%", "progress100%"),
])
def test_strip_controls(raw, shown):
    assert terminal_text.strip_controls(raw) == shown


def _has_controls(text: str) -> bool:
    return any(c in text for c in ("\x1b", "\x9b", "\x07", "\u202e"))


def test_plain_view_shows_log_lines_without_controls_and_the_build_keeps_them(capsys):
    """PlainView printed Text(line): ESC and OSC went to the CI log / terminal as they came."""
    log = stages.BuildLog(ui.PlainView().line)
    log(HOSTILE)
    assert log.lines == [HOSTILE]  # what build.log is written from: unchanged
    out = capsys.readouterr().out
    assert SHOWN in out and not _has_controls(out)


def test_live_view_tail_has_no_controls():
    """LiveView kept the raw line in its tail, redrawn four times a second."""
    buf = io.StringIO()
    view = ui.LiveView(console=Console(file=buf, force_terminal=True, color_system="standard", width=200))
    try:
        view.line(HOSTILE)
        assert list(view.tail) == [SHOWN]
    finally:
        view.close()
    assert "owned" not in buf.getvalue() and "\x1b]" not in buf.getvalue()


def test_summary_and_stage_lines_are_text():
    """The summary's values come partly from the build container (versions.txt): '[/x]' raised MarkupError;
    QuietView's '[compile] ...' printed ' ...' (the stage name read as a style tag)."""
    buf = io.StringIO()
    view = ui.PlainView()
    view.console = Console(file=buf, width=200, color_system=None)
    view.summary([("toolchain", "gcc [/opt/x] \x1b]0;t\x07"), ("[bold]k", "v")])
    out = buf.getvalue()
    assert "gcc [/opt/x]" in out and "[bold]k" in out and not _has_controls(out)
    quiet = ui.QuietView()
    quiet.err = Console(file=(b := io.StringIO()), width=200)
    quiet.step_started("compile")
    assert b.getvalue() == "[compile] ...\n"


def test_diagnosis_and_first_error_lines_have_no_controls():
    """Diagnosis evidence and first_error quoted the log raw into the error line and diagnosis.json."""
    log = "ok\n\x1b[31mcollect2: fatal error: ld terminated with signal 9 [Killed]\x1b[0m\x1b]0;x\x07\n"
    d = diagnose.diagnose(log)
    assert d is not None and d.id == "oom"
    assert not _has_controls(diagnose.render_diagnosis(d)) and "[Killed]" in d.evidence[0]
    first = diagnose.first_error("\x1b[1mFAILED: x.o\x1b[0m\n\x1b]8;;http://e\x07error: boom\n")
    assert first == ["FAILED: x.o", "error: boom"]


def test_error_lines_of_the_cli_have_no_controls_and_keep_brackets(capsys):
    """The one-line error quoted log text with its escape sequences (markup was already escaped)."""

    @cli.command
    def fails():
        raise BuildFailed("first error:\n  \x1b[31merror: cannot load [/opt/lib]\x1b[0m \x1b]0;pwn\x07",
                          step="compile", bundle=Path("artifacts/failures/x"), diagnosis=None)

    from invoke.exceptions import Exit

    with pytest.raises(Exit) as e:
        fails()
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert "error: cannot load [/opt/lib]" in err and not _has_controls(err)




def _words_intact(text: str, sources: list[str]) -> list[str]:
    """The words of `text` that are no word of `sources` (a word a terminal split across lines)."""
    known = {w for s in sources for w in s.split()}
    return [w for w in text.split() if w not in known]


def test_details_under_the_recipes_table_wrap_at_words_at_80_columns():
    """In an 80-column terminal each description wraps at words under itself (before: one long line
    that the terminal broke mid-word, `NCCL 2.18` / `.1, Release`); piped, each stays one line."""
    from buildctl.cli.commands import print_recipes, recipe_rows

    rows = recipe_rows()
    buf = io.StringIO()
    print_recipes(rows, Console(file=buf, width=80, force_terminal=True, color_system=None, highlight=False))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    details = text[text.rindex("┘") + 1:]
    sources = [f"{r['name']}: {r['description']}" for r in rows]
    assert _words_intact(details, sources) == [], details
    assert any(len(r["description"]) > 60 for r in rows)  # some do need wrapping
    piped = io.StringIO()
    print_recipes(rows, Console(file=piped, width=80, force_terminal=False, highlight=False, soft_wrap=True))
    assert [ln for ln in piped.getvalue().splitlines() if ": " in ln and "│" not in ln] == sources


def test_a_detail_line_hangs_under_its_text():
    buf = io.StringIO()
    terminal_text.print_detail(Console(file=buf, width=40, force_terminal=True, color_system=None), "name",
                    "alpha beta gamma delta epsilon zeta eta theta iota kappa")
    lines = [ln.rstrip() for ln in buf.getvalue().splitlines()]
    assert lines[0].startswith("name: alpha") and all(ln.startswith("      ") for ln in lines[1:]), lines
