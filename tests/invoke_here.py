"""`invoke ARGS` in the test's own process: what an `invoke` process prints and exits with, without
the interpreter start and the imports it pays for (about 1 s on a loaded 2-core machine, 0.3 s idle).

It is the real command line from argv on: invoke's Program (the one `python -m invoke` builds) parses
the arguments, loads tasks.py from the checkout, runs the task and turns Exit into the exit code; only
the process is missing. So a test of what a command prints, refuses or exits with belongs here; a
test of what only a fresh process shows (the console script, warnings at import, a partial install,
a signal) starts one (tests/unit/test_cli.py keeps those).

`env` is laid over os.environ for the call (a value of None unsets the variable); the call runs in
`cwd`; stdout and stderr are captured; sys.path, sys.modules['tasks'], sys.dont_write_bytecode (which
invoke turns on), the environment, the working directory and tempfile's folder (read again from a
TMPDIR given in `env`, as a process would) are as they were afterwards.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import invoke
from invoke import Program

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Ran:
    """What subprocess.run(capture_output=True, text=True) would have returned."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _environment(env: Mapping[str, str | None]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}
    try:
        _set_environment(env)
        yield
    finally:
        _set_environment(saved)


def _set_environment(values: Mapping[str, str | None]) -> None:
    """Each variable to its value; None: unset."""
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _no_exec(*args, **kwargs):
    raise AssertionError(f"the command would replace this process (os.exec* {args[:2]}); test it in a subprocess")


def invoke_here(*args: str, env: Mapping[str, str | None] | None = None, cwd: Path | str = REPO) -> Ran:
    program = Program(name="Invoke", binary="inv[oke]", binary_names=["invoke", "inv"], version=invoke.__version__)
    out, err = io.StringIO(), io.StringIO()
    saved_path, saved_tasks, saved_cwd = list(sys.path), sys.modules.get("tasks"), os.getcwd()
    saved_exec, saved_tempdir, saved_bytecode = os.execvp, tempfile.tempdir, sys.dont_write_bytecode
    code = 0
    try:
        os.chdir(cwd)
        os.execvp = _no_exec
        if {"TMPDIR", "TEMP", "TMP"} & set(env or {}):
            tempfile.tempdir = None  # tempfile keeps the folder it found first
        with _environment(dict(env or {})), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                program.run(["invoke", *args], exit=True)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
            except Exception:  # what the interpreter would print before exiting 1
                traceback.print_exc()
                code = 1
    finally:
        os.execvp, tempfile.tempdir, sys.dont_write_bytecode = saved_exec, saved_tempdir, saved_bytecode
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        if saved_tasks is None:
            sys.modules.pop("tasks", None)
        else:
            sys.modules["tasks"] = saved_tasks
    return Ran(("invoke", *args), code, out.getvalue(), err.getvalue())
