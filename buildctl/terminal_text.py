"""Text as it reaches a terminal, whoever prints it: control sequences and bidi overrides stripped from
what a build, a probe or a recipe wrote (`strip_controls`), a `name: text` detail wrapped at words
(`print_detail`, on the caller's console). Library modules import these from here; ui.py only for the
view types they are handed (tests/unit/test_printing.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# Terminal control sequences: CSI (ESC [ ... final byte, or the 8-bit CSI), OSC/DCS/SOS/PM/APC strings
# (ESC ] P X ^ _ ..., ended by BEL or ST, or unterminated: to the end of the line), any other ESC x,
# then every remaining C0/C1 control except tab and newline, DEL, and the Unicode bidi overrides
# that make a line display other than it reads.
_CONTROL = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\n]*?(?:\x07|\x1b\\|\x9c|(?=\n)|\Z)"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def strip_controls(text: str) -> str:
    """`text` as it may reach a terminal: escape sequences and control characters removed (tabs and
    newlines kept). For what a person sees; stored logs keep their bytes as they came."""
    return _CONTROL.sub("", text)


def print_detail(console: Console, name: str, text: str, *, style: str = "bold") -> None:
    """`name: text` under a table. On a terminal (or a console that wraps), wrapped at words at its
    width with the text hanging under itself (a terminal breaks a long line mid-word); piped through a
    soft-wrapping console (a CI log), one line as before. Text, never markup: details quote paths and
    recipe values."""
    from rich.table import Table
    from rich.text import Text

    if console.soft_wrap and not console.is_terminal:
        console.print(Text.assemble((name, style), ": ", text), soft_wrap=True)
        return
    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")  # words wrap; only a word wider than the column is cut
    grid.add_row(Text(f"{name}: ", style), Text(text))
    console.print(grid)
