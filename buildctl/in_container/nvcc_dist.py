"""nvcc with its device and host compiles on an sccache-dist cluster, making the objects nvcc makes here.

`python3 nvcc_dist.py SCCACHE NVCC ARGS...` (dist_launcher.sh, for a compile ccache did not find): nvcc's own
plan (`nvcc ARGS --dryrun`) run step by step, with `cicc`, `ptxas` and the host compiler's `-c` step through
sccache's client, which sends each to a build server; the preprocessing, cudafe++ and fatbinary run here.
sccache's own nvcc support plans the same steps under names of its own (x_0.cudafe1.cpp), which end up in
the object; nvcc's plan keeps nvcc's (with --objdir-as-tempdir, the object's), so an object made this way
is the one a local nvcc makes. nvcc's dependency file (-MD) is its one step no shell can run: written here
from the preprocessors' line markers, as nvcc does.

Standard library only; exit status: the first failing step's (its output passed through), 2 for a plan
this does not know (the launcher then compiles with nvcc here).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
MARKER = re.compile(rb'^# \d+ "((?:[^"\\]|\\.)*)"', re.MULTILINE)
FILTER = "-- Filter Dependencies -- > "
NVCC_TOOLS = ("cudafe++", "fatbinary", "nvlink", "bin2c")
REMOTE_TOOLS = ("cicc", "ptxas")
# nvcc -t/--threads runs its steps in parallel; the plan is run in order (ninja runs units in parallel)
THREADS = re.compile(r"^(-t|--threads)(=.*)?$")


class UnknownPlan(Exception):
    pass


def plan(nvcc: str, args: list[str]) -> list[str]:
    """The `#$ ` lines of `nvcc ARGS --dryrun`."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if THREADS.match(arg):
            skip = "=" not in arg and arg in ("-t", "--threads")
            continue
        kept.append(arg)
    dry = subprocess.run([nvcc, *kept, "--dryrun"], capture_output=True, text=True)
    if dry.returncode != 0:  # nvcc refused the arguments: it says why when it runs for real
        raise UnknownPlan("nvcc --dryrun failed")
    return [line[3:] for line in (dry.stderr + dry.stdout).splitlines() if line.startswith("#$ ")]


def steps(lines: list[str], environ: dict[str, str]):
    """(kind, argv or path) for each line, with nvcc's variable assignments applied to `environ`:
    ("run", argv), ("remote", argv), ("rm", paths), ("deps", depfile)."""
    for text in lines:
        m = ASSIGNMENT.fullmatch(text.strip())
        if m and " " not in m.group(1):
            environ[m.group(1)] = _value(m.group(2), environ)
            continue
        if text.startswith(FILTER):
            yield "deps", text[len(FILTER):].strip()
            continue
        try:
            argv = shlex.split(text)
        except ValueError as e:
            raise UnknownPlan(f"a step that is not a command line: {e}") from None
        if not argv:
            continue
        argv[0] = VARIABLE.sub(lambda v: environ.get(v.group(1) or v.group(2), ""), argv[0])
        tool = os.path.basename(argv[0])
        if tool == "rm":
            yield "rm", [a for a in argv[1:] if not a.startswith("-")]
        elif tool in REMOTE_TOOLS:
            yield "remote", argv
        elif tool in NVCC_TOOLS or "-E" in argv or "-c" not in argv:
            yield "run", argv
        else:  # the host compiler's compile of the cudafe1.cpp
            yield "remote", argv


def _value(raw: str, environ: dict[str, str]) -> str:
    raw = raw.strip()
    try:
        words = shlex.split(raw)
    except ValueError:
        words = []
    value = words[0] if len(words) == 1 else raw
    return VARIABLE.sub(lambda v: environ.get(v.group(1) or v.group(2), ""), value)


def dependencies(target: str, preprocessed: list[str]) -> str:
    """A make rule naming every file the preprocessors read, as nvcc -MD writes it."""
    seen: dict[str, None] = {}
    for path in preprocessed:
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        for m in MARKER.finditer(text):
            name = m.group(1).decode("utf-8", "surrogateescape").replace('\\"', '"').replace("\\\\", "\\")
            if not name.startswith("<"):
                seen.setdefault(name, None)
    files = [name.replace(" ", "\\ ") for name in seen]
    return f"{target} : " + " \\\n    ".join(files) + "\n"


def dep_target(args: list[str]) -> str:
    for i, arg in enumerate(args):
        if arg in ("-MT", "--dependency-target-name") and i + 1 < len(args):
            return args[i + 1]
    for i, arg in enumerate(args):
        if arg in ("-o", "--output-file") and i + 1 < len(args):
            return args[i + 1]
    raise UnknownPlan("-MD without -MT or -o")


def main(argv: list[str]) -> int:
    sccache, nvcc, args = argv[0], argv[1], argv[2:]
    environ = dict(os.environ)
    preprocessed: list[str] = []
    try:
        for kind, what in steps(plan(nvcc, args), environ):
            if kind == "rm":
                for path in what:
                    try:
                        os.remove(path)
                    except FileNotFoundError:
                        pass
            elif kind == "deps":
                with open(what, "w") as fh:
                    fh.write(dependencies(dep_target(args), preprocessed))
            else:
                if "-E" in what and "-o" in what:
                    preprocessed.append(what[what.index("-o") + 1])
                command = [sccache, *what] if kind == "remote" else what
                code = subprocess.run(command, env=environ).returncode
                if code != 0:
                    return code
    except UnknownPlan as e:
        print(f"buildctl: nvcc_dist: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
