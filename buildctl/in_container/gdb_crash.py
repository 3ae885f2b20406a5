"""Run a command under gdb and report how it ended (`invoke debug`); sourced by gdb, standard library only:

    gdb -q -nx -batch -x gdb_crash.py --args python debug_main.py ...

On a crash it prints the signal (and the faulting address), the faulting thread's backtrace (function,
file:line where the binary has line info, its shared object otherwise), the Python frames where the
interpreter's gdb helpers are installed (python3.X-dbg), and which objects in the backtrace have no line
info; then it hands the signal to the program, so that Python's faulthandler (debug_main.py) writes the
Python stack too. On a time-out: every thread's backtrace.

gdb's exit status says how the command ended: the command's own status when it exited, 128+N when
signal N stopped or killed it (as a shell reports it), 124 when it ran past GDB_CRASH_TIMEOUT seconds
(default 600), 125 when this report itself failed.

Environment: GDB_CRASH_TIMEOUT (seconds); GDB_CRASH_JSON (a path that gets the report as JSON).
"""
import glob
import json
import os
import signal
import threading

import gdb

TIMEOUT = float(os.environ.get("GDB_CRASH_TIMEOUT", "600"))
# Signals that mean "crashed"; every other signal goes to the program unseen (Python's SIGCHLD,
# SIGALRM, SIGUSR1 handlers keep working). SIGINT keeps gdb's default (stop): the time limit uses it.
FATAL = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "SIGSYS", "SIGTRAP")
# Pointers as addresses: the interpreter's pretty-printers would print whole dicts in every frame.
BT = "bt -frame-arguments scalars -raw-frame-arguments on 64"
HANDLER_S = 10  # how long the program's own signal handler (faulthandler) may take once the signal is passed


def run(command, quiet=False):
    """gdb's output of `command`; on an error None (quiet) or the error as text."""
    try:
        return gdb.execute(command, to_string=True)
    except gdb.error as e:
        return None if quiet else f"({command}: {e})\n"


def frames_of_selected_thread(limit=64):
    out, frame = [], gdb.newest_frame()
    while frame is not None and len(out) < limit:
        sal, pc = frame.find_sal(), frame.pc()
        out.append({
            "level": len(out), "pc": hex(pc), "function": frame.name(),
            "file": sal.symtab.filename if sal.symtab else None, "line": sal.line if sal.symtab else None,
            "object": gdb.solib_name(pc) or gdb.current_progspace().filename,
        })
        try:
            frame = frame.older()
        except gdb.error:  # a corrupt stack: what was read so far
            break
    return out


def python_helpers():
    """PyFramePtr of the interpreter's gdb helpers (python3.X-gdb.py): auto-loaded for /usr/bin/python3.X
    (a venv's python is a symlink to it), sourced here when the interpreter is a copy."""
    import __main__
    if not hasattr(__main__, "PyFramePtr"):
        for helper in sorted(glob.glob("/usr/share/gdb/auto-load/usr/bin/python3*-gdb.py")):
            run(f"source {helper}", quiet=True)
    return getattr(__main__, "PyFramePtr", None)


def python_stack(tstate, frame_ptr):
    """File, line and function of each Python frame of one thread state, innermost first."""
    try:
        current = tstate["current_frame"]  # 3.13
    except gdb.error:
        current = tstate["cframe"]["current_frame"]  # 3.11, 3.12
    lines = []
    while int(current) != 0 and len(lines) < 200:  # the raw chain: 3.11's helper fails on a NULL frame
        frame = frame_ptr(current)
        if not getattr(frame, "is_shim", lambda: False)():  # 3.12+: C-stack shims (3.11 has none)
            line = frame.current_line_num()
            lines.append(f'  File "{frame.co_filename.proxyval(set())}", line {line if line is not None else "?"}, '
                         f"in {frame.co_name.proxyval(set())}")
        current = current["previous"]
    return lines


def python_frames():
    """The Python stack of the faulting thread; None without the interpreter's helpers and debug info, or
    when the faulting thread runs no Python. Read from the thread states (current_frame), not with py-bt:
    py-bt reads the `frame` variable of _PyEval_EvalFrameDefault, which an -O2 interpreter has optimized
    out (Debian's python3.13: '(unable to read python frame information)')."""
    frame_ptr = python_helpers()
    if frame_ptr is None:
        return None
    try:
        tstate = gdb.parse_and_eval("_PyRuntime.interpreters.head->threads.head")
    except gdb.error:  # no debug info for the interpreter
        return None
    stacks = {}
    while int(tstate) != 0:
        stacks[int(tstate["native_thread_id"])] = python_stack(tstate, frame_ptr)
        tstate = tstate["next"]
    lines = stacks.get(gdb.selected_thread().ptid[1])
    return "Traceback (most recent call first):\n" + "\n".join(lines) + "\n" if lines else None


def kill_after(pid, seconds, sig, flag=None):
    """A started daemon timer that sends `sig` to `pid` after `seconds` (and sets `flag`)."""
    def fire():
        if flag is not None:
            flag.set()
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def run_with_time_limit():
    """Run the program; True when the time limit stopped it (with SIGINT, which gdb stops on)."""
    timed_out, timer = threading.Event(), []

    def start_timer(event):  # the first thread: the process exists, its pid is known
        if not timer:
            timer.append(kill_after(event.inferior_thread.ptid[0], TIMEOUT, signal.SIGINT, timed_out))

    gdb.events.new_thread.connect(start_timer)
    run("run", quiet=True)
    if timer:
        timer[0].cancel()
    return timed_out.is_set()


def report_crash(report, name):
    report.update(outcome="crashed", signal=name, thread=gdb.selected_thread().num)
    try:
        siginfo = gdb.parse_and_eval("$_siginfo")
        report["si_code"] = int(siginfo["si_code"])
        if name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"):
            report["address"] = hex(int(siginfo["_sifields"]["_sigfault"]["si_addr"]))
    except gdb.error:
        pass
    print(f"\n== crashed: {name} in thread {report['thread']}"
          + (f", address {report['address']}" if "address" in report else ""))
    report["frames"] = frames_of_selected_thread()
    print(run(BT), end="")
    report["python"] = python_frames()
    if report["python"]:
        print("== Python frames (gdb):\n" + report["python"], end="")
    # Objects whose frames all lack a line: built without -g, or their debug info is elsewhere.
    objects = list(dict.fromkeys(f["object"] for f in report["frames"]))
    report["no_line_info"] = [o for o in objects if not any(f["file"] for f in report["frames"] if f["object"] == o)]
    if report["no_line_info"]:
        print("== no line info in: " + ", ".join(report["no_line_info"]))
    return 128 + int(getattr(signal, name, 0)) if name else 1


def pass_signal(name):
    """Continue with the signal delivered: the program's handler (faulthandler writing the Python stack)
    runs, re-raises, and gdb stops again; bounded by a SIGKILL in case a handler carries on instead."""
    pid = gdb.selected_inferior().pid
    if not name or not pid:
        return
    timer = kill_after(pid, HANDLER_S, signal.SIGKILL)
    run(f"signal {name}", quiet=True)
    timer.cancel()


def main(report):
    # debuginfod: never a network lookup (or the "Enable debuginfod?" question); randomization: a
    # container's seccomp refuses personality(ADDR_NO_RANDOMIZE), and gdb warns on every run.
    for setting in ("set debuginfod enabled off", "set disable-randomization off"):
        run(setting, quiet=True)  # quiet: a gdb built without debuginfod has no such setting
    for setting in ("set pagination off", "set confirm off", "set width 0", "set height 0",
                    "set print thread-events off", "set print inferior-events off",
                    "set auto-load safe-path /", "handle all nostop noprint pass",
                    "handle " + " ".join(FATAL) + " stop print nopass"):
        gdb.execute(setting)
    stops = []
    gdb.events.stop.connect(lambda event: stops.append(getattr(event, "stop_signal", None)))
    timed_out = run_with_time_limit()
    if gdb.selected_inferior().pid == 0:  # it ended by itself
        code = gdb.convenience_variable("_exitcode")
        sig = gdb.convenience_variable("_exitsignal")  # killed without a stop (SIGKILL: the OOM killer)
        if sig is not None:
            report.update(outcome="killed", signal=int(sig))
            print(f"\n== killed: signal {int(sig)}")
            return 128 + int(sig)
        report.update(outcome="exited", exit_code=int(code) if code is not None else 0)
        print(f"\n== exited: status {report['exit_code']}")
        return report["exit_code"]
    try:
        if timed_out:
            report.update(outcome="timed_out", timeout_s=TIMEOUT)
            print(f"\n== timed out after {TIMEOUT:g} s: every thread's backtrace")
            print(run("thread apply all " + BT), end="")
            return 124
        name = stops[-1] if stops else None
        status = report_crash(report, name)
        pass_signal(name)
        return status
    finally:
        run("kill", quiet=True)


report = {"command": gdb.current_progspace().filename}
try:
    status = main(report)
except Exception as e:  # the report failed, not the program: say so, and never exit 0
    print(f"gdb_crash.py: the report failed: {type(e).__name__}: {e}")
    report["error"] = f"{type(e).__name__}: {e}"
    status = 125
report["status"] = status
if os.environ.get("GDB_CRASH_JSON"):
    with open(os.environ["GDB_CRASH_JSON"], "w") as f:
        json.dump(report, f, indent=1)
gdb.execute(f"quit {status}")
