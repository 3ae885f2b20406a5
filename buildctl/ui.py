"""What a person sees during a build: stages with times, a compile progress bar driven by ninja's
[N/M] lines (with an ETA), the last log lines, and a summary table. Three flavours: a rich live view
on a terminal, plain lines for CI logs, and silence (stderr stage lines only) under --json.
"""

from __future__ import annotations

import re
import sys
import time
from collections import deque
from dataclasses import dataclass

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from buildctl.terminal_text import strip_controls

STAGES = ("fetch", "image", "source", "configure", "compile", "wheel", "extensions", "publish", "verify")
NINJA = re.compile(r"^\[([0-9]{1,12})/([0-9]{1,12})\]")  # the build's log is untrusted: few ASCII digits


@dataclass(frozen=True)
class TimeLeft:
    """The compile's ETA as the pipeline last computed it: `seconds` left at `at` (time.monotonic; None
    before a step is done) and what it comes from ("cost-weighted from <recipe>/<key>", "step rate")."""

    seconds: float | None
    at: float
    source: str

    def text(self, now: float) -> str:
        """'ETA ~1h05m (step rate)', counted down since `at`."""
        if self.seconds is None:
            return f"ETA after the first step ({self.source})"
        left = max(self.seconds - (now - self.at), 0.0)
        minutes = round(left / 60)
        if left < 60:
            shown = "<1m"
        elif minutes < 60:
            shown = f"~{minutes}m"
        elif minutes < 100 * 60:
            shown = f"~{minutes // 60}h{minutes % 60:02d}m"
        else:
            shown = ">99h"
        return f"ETA {shown} ({self.source})"


class View:
    """Base: shows what the pipeline reports (steps started and finished, log lines); subclasses
    decide how. What it keeps (status, durations) is for showing; the pipeline never reads it.
    `console`: where the verification report prints (the live view's own, above its live region: a
    second console on the same terminal would print into it; under --json stderr); a view of a build
    that verifies has one: the pipeline hands it down, verification chooses none."""

    console: Console | None = None

    def __init__(self) -> None:
        self.started: dict[str, float] = {}  # for the running step's clock on screen
        self.durations: dict[str, float] = {}
        self.status: dict[str, str] = {}

    def step_started(self, name: str) -> None:
        self.started[name] = time.monotonic()
        self.status[name] = "running"
        self._changed(name)

    def step_finished(self, name: str, seconds: float | None, status: str = "ok") -> None:
        """`seconds` None: the step did not run (cached, skipped)."""
        if seconds is not None:
            self.durations[name] = seconds
        self.status[name] = status
        self._changed(name)

    def finished(self, total_s: float) -> None:
        self.durations.setdefault("total", total_s)

    def line(self, text: str) -> None:
        """A build-log line."""

    def time_left(self, left: TimeLeft) -> None:
        """The compile's ETA changed (a ninja step finished): shown live only; logs and --json keep none."""

    def _changed(self, name: str) -> None:
        pass

    def close(self) -> None:
        pass

    def summary(self, rows: list[tuple[str, str]]) -> None:
        pass


class QuietView(View):
    """--json: stdout carries only the JSON; steps starting go to stderr, one line each."""

    def __init__(self) -> None:
        super().__init__()
        self.err = self.console = Console(stderr=True, highlight=False)

    def _changed(self, name: str) -> None:
        if self.status.get(name) == "running":
            self.err.print(f"[{name}] ...", markup=False)


class PlainView(View):
    """CI logs: every log line, plus a line per step change."""

    def __init__(self) -> None:
        super().__init__()
        self.console = Console(highlight=False, soft_wrap=True)

    def _changed(self, name: str) -> None:
        status = self.status[name]
        took = f" ({self.durations[name]:.1f}s)" if name in self.durations and status != "running" else ""
        self.console.print(f"==> {name}: {status}{took}")

    def line(self, text: str) -> None:
        self.console.print(Text(strip_controls(text)))

    def summary(self, rows: list[tuple[str, str]]) -> None:
        self.console.print(_summary_table(rows, self))


class LiveView(View):
    """A terminal: live stage table, compile progress bar, its ETA (the pipeline's: rich's own step rate
    was off by -28..+13 % on the real build), last log lines."""

    def __init__(self, console: Console | None = None, tail: int = 8) -> None:
        # here, not at the top: the plain and quiet views (CI, --json) never load them
        from rich.live import Live
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        super().__init__()
        self.console = console or Console()
        self.tail: deque[str] = deque(maxlen=tail)
        self.progress = Progress(TextColumn("compile"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=self.console)
        self.task = None
        self.eta: TimeLeft | None = None
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def _render(self):
        table = Table.grid(padding=(0, 2))
        for name in STAGES:
            status = self.status.get(name)
            if status is None:
                continue
            took = self.durations.get(name)
            if status == "running" and name in self.started:
                took = time.monotonic() - self.started[name]
            mark = {"running": "[cyan]…[/]", "ok": "[green]✓[/]", "cached": "[green]=[/]",
                    "skipped": "[dim]-[/]"}.get(status, "[red]✗[/]")
            table.add_row(mark, name, f"{took:.1f}s" if took is not None else "", status)
        tail = Text("\n".join(self.tail), style="dim", overflow="ellipsis", no_wrap=True)
        parts = [table]
        if self.task is not None:
            parts.append(self.progress)
        if self.eta is not None and self.status.get("compile") == "running":
            parts.append(_Counted(self.eta))
        parts.append(tail)
        return Group(*parts)

    def time_left(self, left: TimeLeft) -> None:
        self.eta = left
        self.live.update(self._render())

    def _changed(self, name: str) -> None:
        self.live.update(self._render())

    def line(self, text: str) -> None:
        self.tail.append(strip_controls(text)[:200])
        m = NINJA.match(text)
        if m:
            n, total = int(m.group(1)), int(m.group(2))
            if self.task is None:
                self.task = self.progress.add_task("compile", total=total)
            self.progress.update(self.task, completed=n, total=total)
        self.live.update(self._render())

    def close(self) -> None:
        self.live.stop()

    def summary(self, rows: list[tuple[str, str]]) -> None:
        self.console.print(_summary_table(rows, self))


class _Counted:
    """The ETA line, counted down at each refresh between ninja's steps."""

    def __init__(self, left: TimeLeft) -> None:
        self.left = left

    def __rich__(self) -> Text:
        return Text(self.left.text(time.monotonic()), overflow="ellipsis", no_wrap=True)


def _summary_table(rows: list[tuple[str, str]], view: View) -> Table:
    table = Table(title="Build summary", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for name in STAGES:
        if name in view.status:
            took = view.durations.get(name)
            table.add_row(f"stage {name}", f"{view.status[name]}" + (f" in {took:.1f}s" if took is not None else ""))
    for k, v in rows:  # values come from the manifest, partly from the build container's output
        table.add_row(Text(strip_controls(k)), Text(strip_controls(v)))
    return table


def make_view(as_json: bool) -> View:
    if as_json:
        return QuietView()
    if sys.stdout.isatty():
        return LiveView()
    return PlainView()
