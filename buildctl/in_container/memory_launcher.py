#!/usr/bin/env python3
"""buildctl's memory launcher: in front of every compile, link and nvcc call of a build (ccache's
CCACHE_PREFIX, the dist launcher's local compiles, CMAKE_<LANG>_LINKER_LAUNCHER, or
CMAKE_<LANG>_COMPILER_LAUNCHER without a cache), run as `memory_launcher.py COMPILER ARGS...`.

Each unit (named by its -o, relative to the build directory) waits here until the memory predicted for it
fits the build's budget beside the units running; the largest waiting unit goes first, and a unit larger
than the whole budget runs alone. Then it runs the compiler as its only child and records the peak resident
memory of the largest process it waited for (getrusage(RUSAGE_CHILDREN).ru_maxrss: cc1plus under gcc, cicc
or ptxas under nvcc, ld under collect2), one JSON line per unit in BUILDCTL_MEM_OUT. A unit killed by
SIGKILL (the kernel's OOM killer) is recorded larger than predicted, so the next attempt gives it room.

Standard library only. The environment (set by buildctl, pipeline/memory_budget.py):
  BUILDCTL_MEM_TABLE    the prediction table (memory_predict.table), JSON
  BUILDCTL_MEM_DEFAULT  bytes for a unit with no prediction (conservative; learning replaces it)
  BUILDCTL_MEM_BUDGET   bytes the units may take together; unset: the container's cgroup memory.max (else
                        MemTotal) less a margin (BUILDCTL_MEM_MARGIN bytes; default min(2 GiB, max(256 MiB, 1/8)))
  BUILDCTL_MEM_LEDGER   the folder of the shared ledger (who runs, who waits), fcntl-locked
  BUILDCTL_MEM_OUT      the file the measurements are appended to
  BUILDCTL_MEM_WORK     the build's root (stripped from the units' paths)
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

if __package__:  # imported on the host (tests, bench) or run by path beside memory_predict.py in the container
    from . import memory_predict
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import memory_predict

MiB, GiB = 1024**2, 1024**3
POLL_S = 0.1  # a waiting unit looks at the ledger again this often (production only; tests drive `pause`)
KILLED_GROWTH = 1.25  # a unit the OOM killer took is recorded this much larger than it was given
# Compiles CMake runs while configuring (try_compile): not a build's units.
SCRATCH = ("CMakeScratch", "CMakeTmp", "CMakeFiles/CMakeTmp")


def unit_of(argv: list[str], cwd: str, work: str) -> str | None:
    """The unit a compiler command line makes: its -o, relative to the build directory (the CMake tree
    under WORK/src/build, else WORK); None when it writes no named file or CMake is only probing."""
    out = None
    for i, arg in enumerate(argv):
        if arg == "-o" and i + 1 < len(argv):
            out = argv[i + 1]
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("-o="):
            out = arg[2:]
        elif arg.startswith("--output-file="):
            out = arg.split("=", 1)[1]
    if not out or out == "/dev/null" or any(s in out or s in cwd for s in SCRATCH):
        return None
    path = os.path.normpath(os.path.join(cwd, out))
    for root in (os.path.join(work, "src", "build"), work):
        if root and path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1:]
    return path.lstrip("/")


def may_start(me: str, running: dict[str, int], waiting: dict[str, list], budget: int) -> bool:
    """Whether waiting unit `me` starts now: it is the largest waiting (the earliest of equals), and it fits
    beside the running units, or nothing runs (a unit larger than the whole budget runs alone)."""
    if me not in waiting:
        return False
    head = max(waiting, key=lambda k: (waiting[k][0], -waiting[k][1]))
    if head != me:
        return False
    used = sum(running.values())
    return used == 0 or used + waiting[me][0] <= budget


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Ledger:
    """Who runs and who waits, with their bytes: a JSON file changed only under an fcntl lock. Entries of
    processes that are gone (a launcher killed with its unit) are dropped whenever it is read."""

    def __init__(self, folder: Path, alive=_alive):
        self.folder, self.alive = Path(folder), alive
        self.folder.mkdir(parents=True, exist_ok=True)
        self.state_path = self.folder / "ledger.json"

    def _change(self, fn):
        with open(self.folder / "ledger.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = json.loads(self.state_path.read_text())
            except (OSError, ValueError):
                state = {}
            state.setdefault("seq", 0)
            for part in ("running", "waiting"):
                state[part] = {k: v for k, v in (state.get(part) or {}).items() if self.alive(int(k))}
            result = fn(state)
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(state))
            tmp.replace(self.state_path)
            return result

    def arrive(self, pid: int, need: int) -> None:
        def fn(state):
            state["seq"] += 1
            state["waiting"][str(pid)] = [need, state["seq"]]
        self._change(fn)

    def try_start(self, pid: int, budget: int) -> bool:
        def fn(state):
            me = str(pid)
            if not may_start(me, state["running"], state["waiting"], budget):
                return False
            state["running"][me] = state["waiting"].pop(me)[0]
            return True
        return self._change(fn)

    def finish(self, pid: int) -> None:
        def fn(state):
            state["running"].pop(str(pid), None)
            state["waiting"].pop(str(pid), None)
        self._change(fn)

    def snapshot(self) -> dict:
        return self._change(lambda state: json.loads(json.dumps(state)))


def wait_for_memory(ledger: Ledger, pid: int, need: int, budget: int, pause=lambda: time.sleep(POLL_S)) -> float:
    """Block until this unit may start (its bytes then count as running); the seconds it waited."""
    started = time.monotonic()
    ledger.arrive(pid, need)
    while not ledger.try_start(pid, budget):
        pause()
    return time.monotonic() - started


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def container_limit(root: str = "/") -> int | None:
    """The container's memory limit: cgroup v2 memory.max, v1 memory.limit_in_bytes, else MemTotal."""
    for rel in ("sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"):
        text = _read(os.path.join(root, rel))
        if text.isdigit() and int(text) < 2**62:
            return int(text)
    for line in _read(os.path.join(root, "proc/meminfo")).splitlines():
        if line.startswith("MemTotal:") and line.split()[1].isdigit():
            return int(line.split()[1]) * 1024
    return None


def oom_kills(root: str = "/") -> int:
    """How many processes the container's OOM killer has killed (cgroup v2 memory.events, v1 oom_control)."""
    for rel in ("sys/fs/cgroup/memory.events", "sys/fs/cgroup/memory/memory.oom_control"):
        for line in _read(os.path.join(root, rel)).splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


def budget_bytes(env: dict, root: str = "/") -> int:
    """The bytes the build's units may take together (BUILDCTL_MEM_BUDGET, else the limit less a margin)."""
    given = env.get("BUILDCTL_MEM_BUDGET", "")
    if given.isdigit():
        return int(given)
    limit = container_limit(root) or 4 * GiB
    margin = env.get("BUILDCTL_MEM_MARGIN", "")
    margin_bytes = int(margin) if margin.isdigit() else min(2 * GiB, max(256 * MiB, limit // 8))
    return max(1, limit - margin_bytes)


def load_table(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run(argv: list[str], env: dict, ledger: Ledger | None = None, pause=None) -> int:
    """The launcher's work for one command line; its exit status (a signal death as 128 + the signal)."""
    work = env.get("BUILDCTL_MEM_WORK", "/work")
    unit = unit_of(argv, os.getcwd(), work)
    if unit is None:
        return subprocess.call(argv)
    default = env.get("BUILDCTL_MEM_DEFAULT", "")
    need, how = memory_predict.predict(load_table(env.get("BUILDCTL_MEM_TABLE", "")), unit,
                                       int(default) if default.isdigit() else 2 * GiB)
    budget = budget_bytes(env)
    ledger = ledger or Ledger(Path(env.get("BUILDCTL_MEM_LEDGER", "/tmp/buildctl-memory")))
    pid = os.getpid()
    waited = wait_for_memory(ledger, pid, need, budget, **({"pause": pause} if pause else {}))
    started, kills_before = time.monotonic(), oom_kills()
    try:
        child = subprocess.Popen(argv)
        while True:
            try:
                rc = child.wait()
                break
            except KeyboardInterrupt:  # ninja's Ctrl-C reaches the whole group; wait for the compiler's end
                continue
    finally:
        ledger.finish(pid)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    # gcc reports its cc1plus killed and exits 1; the container's OOM count says memory did it
    killed = rc == -signal.SIGKILL or (rc != 0 and oom_kills() > kills_before)
    record = {"unit": unit, "peak_bytes": peak, "predicted_bytes": need, "how": how, "wait_s": round(waited, 3),
              "seconds": round(time.monotonic() - started, 3), "budget_bytes": budget}
    if killed:
        record.update(killed=True, peak_bytes=int(max(peak, need) * KILLED_GROWTH))
    out = env.get("BUILDCTL_MEM_OUT")
    if out:
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of one short line: whole under O_APPEND
        finally:
            os.close(fd)
    return 128 - rc if rc < 0 else rc


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: memory_launcher.py COMPILER ARGS...", file=sys.stderr)
        return 2
    return run(sys.argv[1:], dict(os.environ))


if __name__ == "__main__":
    sys.exit(main())
