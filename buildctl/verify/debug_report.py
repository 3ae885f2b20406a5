"""What `invoke debug` makes of a run under gdb: the report gdb_crash.py wrote and the Python stack
faulthandler wrote (debug_main.py), both files of the container, read capped and as untrusted text
(the program under test wrote beside them); then the lines and the JSON a person or a machine reads.

Pure: no engine, no files but the two given as text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from buildctl.terminal_text import strip_controls

MAX_REPORT_BYTES = 4 << 20  # gdb_crash.py's JSON: 64 frames of long C++ names fit many times over
MAX_STACK_BYTES = 256 << 10  # faulthandler's text: at most 100 frames of one thread
MAX_TEXT = 1000  # one function name, file or object (C++ template names run long)
MAX_FRAMES = 64  # what gdb_crash.py reads
MAX_NUMBER = 1 << 63  # an integer of the report past a machine word is hostile, read as absent
MAX_SECONDS = 1e9  # a timeout of more than 31 years is hostile, read as absent
SHOWN_FRAMES = 16  # the top of the backtrace in the text output (--json has every frame)
OUTCOMES = ("crashed", "exited", "killed", "timed_out")
# faulthandler: `  File "x.py", line 3 in f`; the interpreter's gdb helpers: `  File "x.py", line 3, in f`
PY_FRAME = re.compile(r'^\s*File "(?P<file>.*)", line (?P<line>[0-9]{1,9}|\?),? in (?P<function>.*)$')
NO_DEBUG_INFO_TYPES = (None, "Release", "MinSizeRel")
# si_code SI_KERNEL: a general-protection fault (a non-canonical address on x86-64), whose address the
# kernel does not give (si_addr 0): shown as such, not as a NULL dereference.
SI_KERNEL = 128


@dataclass(frozen=True)
class Frame:
    function: str | None
    file: str | None  # as the build's -ffile-prefix-map left it, relative to the source tree
    line: int | None
    object: str | None

    def to_dict(self) -> dict:
        return {"function": self.function, "file": self.file, "line": self.line, "object": self.object}


@dataclass(frozen=True)
class PyFrame:
    file: str
    line: int | None
    function: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function}


@dataclass(frozen=True)
class DebugResult:
    """How the program ended under gdb; `error` when gdb gave no usable report."""

    outcome: str | None  # one of OUTCOMES, None: no report
    signal: str | None = None
    thread: int | None = None
    address: str | None = None
    si_code: int | None = None
    exit_code: int | None = None  # as a shell reports it: 128+N for signal N
    frames: tuple[Frame, ...] = ()
    python_stack: tuple[PyFrame, ...] = ()
    timeout_s: float | None = None
    error: str | None = None
    facts: dict = field(default_factory=dict)  # the artifact it ran on: recipe, key, build type, image

    @property
    def crashed(self) -> bool:
        return self.outcome == "crashed" and bool(self.frames)

    @property
    def has_lines(self) -> bool:
        return any(f.file for f in self.frames)

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "signal": self.signal, "thread": self.thread, "address": self.address,
                "si_code": self.si_code,
                "frames": [f.to_dict() for f in self.frames],
                "python_stack": [p.to_dict() for p in self.python_stack],
                "exit_code": self.exit_code, "error": self.error, "note": note(self), **self.facts}


def _text(value, cap: int = MAX_TEXT) -> str | None:
    """A string of the untrusted report as it may be shown: controls stripped, capped; None otherwise."""
    return strip_controls(value)[:cap] if isinstance(value, str) else None


def _int(value) -> int | None:
    """An integer of the untrusted report in a machine word's range; None otherwise (a 400-digit number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < MAX_NUMBER else None


def _seconds(value) -> float | None:
    """A duration of the untrusted report: a finite number of seconds from 0 to MAX_SECONDS; None otherwise
    (float() of a 400-digit integer raises OverflowError; JSON's NaN and Infinity parse)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) >= MAX_NUMBER:
        return None
    return float(value) if 0 <= value <= MAX_SECONDS else None  # NaN compares false


def source_path(name: str | None) -> str | None:
    """A file name as the build recorded it, relative to its source tree: `./csrc/x.cpp` (the source
    tree's map) shows as `csrc/x.cpp`, `build/...` (generated sources) as it is."""
    return name[2:] if name and name.startswith("./") else name


def parse_frames(raw) -> tuple[Frame, ...]:
    frames = []
    for item in (raw if isinstance(raw, list) else [])[:MAX_FRAMES]:
        if not isinstance(item, dict):
            continue
        file, line = source_path(_text(item.get("file"))), _int(item.get("line"))
        frames.append(Frame(_text(item.get("function")), file, line if file else None, _text(item.get("object"))))
    return tuple(frames)


def parse_python_stack(text: str | None, hidden_files: tuple[str, ...] = ()) -> tuple[PyFrame, ...]:
    """The frames of a Python stack as faulthandler (or the interpreter's gdb helpers) print it, innermost
    first; frames of `hidden_files` (the runner's own wrapper) left out. Only the first thread's block."""
    frames: list[PyFrame] = []
    started = False
    for raw in (text or "").splitlines():
        m = PY_FRAME.match(raw)
        if m is None:
            if started and not raw.strip():
                break  # the blank line after the faulting thread's block
            continue
        started = True
        file = strip_controls(m["file"])[:MAX_TEXT]
        if file not in hidden_files:
            frames.append(PyFrame(file, int(m["line"]) if m["line"].isdigit() else None,
                                  strip_controls(m["function"]).strip()[:MAX_TEXT]))
    return tuple(frames[:200])


def parse(report_text: str | None, stack_text: str | None, *, hidden_files: tuple[str, ...] = (),
          facts: dict | None = None) -> DebugResult:
    """A DebugResult from gdb_crash.py's JSON report and faulthandler's text (either may be missing or
    hostile: what cannot be read is an `error`, never an exception)."""
    facts = dict(facts or {})
    if report_text is None:
        return DebugResult(None, error="gdb wrote no report", facts=facts)
    try:
        data = json.loads(report_text)
    except (ValueError, RecursionError):  # nested past the parser's depth: the program under test wrote it
        return DebugResult(None, error="gdb's report is not JSON", facts=facts)
    if not isinstance(data, dict):
        return DebugResult(None, error="gdb's report is not a JSON object", facts=facts)
    outcome = data.get("outcome")
    if outcome not in OUTCOMES:
        why = _text(data.get("error"), 300)
        return DebugResult(None, exit_code=_int(data.get("status")), facts=facts,
                           error=f"gdb's report failed: {why}" if why else "gdb's report names no outcome")
    signal = data.get("signal")
    address = None if _int(data.get("si_code")) == SI_KERNEL else _text(data.get("address"), 40)
    python = parse_python_stack(stack_text, hidden_files) or parse_python_stack(_text(data.get("python"), 1 << 20))
    return DebugResult(
        outcome, signal=_text(signal, 40) if isinstance(signal, str) else (str(signal) if _int(signal) else None),
        thread=_int(data.get("thread")), address=address, si_code=_int(data.get("si_code")),
        exit_code=_int(data.get("status")), frames=parse_frames(data.get("frames")), python_stack=python,
        timeout_s=_seconds(data.get("timeout_s")),
        facts=facts)


def note(result: DebugResult) -> str | None:
    """The one line that says what the backtrace cannot show, with the fix; None when nothing is missing."""
    if not result.crashed or result.has_lines:
        return None
    build_type = result.facts.get("build_type")
    recipe = result.facts.get("recipe") or "R"
    if build_type in NO_DEBUG_INFO_TYPES:
        debug_recipe = result.facts.get("debug_recipe")  # a recipe that extends this one as a Debug build
        how = (f"its Debug recipe (invoke build --recipe {debug_recipe})" if debug_recipe else
               f"it with build.type: Debug (invoke build --recipe {recipe} --set build.type=Debug)")
        return (f"the frames have no file:line: this build has no debug info (build.type {build_type or 'unrecorded'}); "
                f"fix: build {how}")
    objects = ", ".join(dict.fromkeys((f.object or "?").rsplit("/", 1)[-1] for f in result.frames))
    return (f"no frame has a file:line: the crash is in objects without debug info ({objects[:300]}), not in the "
            f"{build_type} build's own code")


def not_crashed_line(result: DebugResult) -> str:
    """The one line for a run that did not end in a backtrace."""
    if result.outcome == "exited":
        return f"the code did not crash: it exited with status {result.exit_code} under gdb"
    if result.outcome == "killed":
        return (f"the code did not crash: it was killed by signal {result.signal} before gdb could stop it "
                "(signal 9 is SIGKILL: the out-of-memory killer?)")
    if result.outcome == "timed_out":
        return (f"the code did not crash within {result.timeout_s or 0:g} s: gdb stopped it (every thread's backtrace "
                "is in the log above); fix: a longer --timeout if it needs more")
    if result.outcome == "crashed":
        return f"gdb stopped the code ({result.signal}) but read no frame of its stack"
    return f"gdb failed: {result.error}"


def frame_line(level: int, frame: Frame) -> str:
    where = f"{frame.file}:{frame.line}" if frame.file else f"in {(frame.object or '??').rsplit('/', 1)[-1]}"
    return f"  #{level:<2} {frame.function or '??'}  {where}"


def text_lines(result: DebugResult, shown: int = SHOWN_FRAMES) -> list[str]:
    """The crash as a person reads it: the signal, the top frames, the Python stack, the note."""
    facts = result.facts
    ran_on = f" on {facts['recipe']} {facts.get('key', '')} ({facts.get('build_type') or 'build type unrecorded'})" \
        if facts.get("recipe") else ""
    where = (f" at address {result.address}" if result.address else
             " (a general-protection fault: the kernel gives no address)" if result.si_code == SI_KERNEL else "")
    lines = [f"{result.signal} in thread {result.thread}{where}{ran_on}", "C++ backtrace (innermost first):"]
    lines += [frame_line(i, f) for i, f in enumerate(result.frames[:shown])]
    if len(result.frames) > shown:
        lines.append(f"  ... {len(result.frames) - shown} more frames (--json has them all)")
    if result.python_stack:
        lines.append("Python stack (most recent call first):")
        lines += [f'  File "{p.file}", line {p.line if p.line is not None else "?"}, in {p.function}'
                  for p in result.python_stack]
    else:
        lines.append("Python stack: not available (the faulting thread ran no Python, or faulthandler could not write)")
    if note(result):
        lines.append(f"note: {note(result)}")
    return lines
