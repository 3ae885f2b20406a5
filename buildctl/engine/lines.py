"""Streamed output as lines: what a build or a container writes arrives in pieces of any size."""

from __future__ import annotations

from collections.abc import Callable

LineSink = Callable[[str], None]
_MAX_LINE = 1 << 20  # a "line" without newline longer than this is emitted anyway


class LineSplitter:
    """Cuts a stream of text pieces into lines; progress-bar carriage returns keep the last state."""

    def __init__(self) -> None:
        self._buf = ""

    def feed(self, text: str) -> list[str]:
        self._buf += text
        if "\n" not in self._buf:
            if len(self._buf) > _MAX_LINE:
                out, self._buf = self._buf, ""
                return [self._clean(out)]
            return []
        *lines, self._buf = self._buf.split("\n")
        return [self._clean(ln) for ln in lines]

    def flush(self) -> list[str]:
        out, self._buf = self._buf, ""
        return [self._clean(out)] if out else []

    @staticmethod
    def _clean(line: str) -> str:
        line = line.rstrip("\r")
        if "\r" in line:
            line = line.rsplit("\r", 1)[-1]
        return line





class StepLog:
    """A step's log as it streams: each line masked, kept (`lines`) and passed on to `on_line`."""

    def __init__(self, mask: Callable[[str], str], on_line: LineSink | None):
        self.lines: list[str] = []
        self._mask, self._on_line = mask, on_line

    def __call__(self, line: str) -> None:
        line = self._mask(line)
        self.lines.append(line)
        if self._on_line is not None:
            self._on_line(line)
