"""`invoke debug` without an engine: what it makes of gdb's report and faulthandler's stack (real ones,
captured from the demo Debug build's `demofw.take([1.0], [1 << 50])`, trimmed), and the bad input it
refuses in one line before anything asks the engine (the unit suite's DOCKER_HOST leads nowhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl.verify import debug_report
from buildctl.verify.debug import CODE_NAME, Program, container_script, shell_command, shell_script

REPO = Path(__file__).resolve().parents[2]
MAIN = "/debug/in/debug_main.py"

# gdb_crash.py's GDB_CRASH_JSON from the demo Debug build (frames 4, 5 and 8-23 left out)
DEMO_REPORT = """{"command": "/usr/bin/python3.11", "outcome": "crashed", "signal": "SIGSEGV", "thread": 1,
 "si_code": 128, "address": "0x0", "frames": [
 {"level": 0, "pc": "0x7f1ca895e34a", "function": "dfw::(anonymous namespace)::take_kernel<double>",
  "file": "./csrc/ops/take.cpp", "line": 16,
  "object": "/opt/venv/lib/python3.11/site-packages/demofw/_C.cpython-311-x86_64-linux-gnu.so"},
 {"level": 1, "pc": "0x7f1ca895d75c", "function": "operator()", "file": "./csrc/ops/take.cpp", "line": 23,
  "object": "/opt/venv/lib/python3.11/site-packages/demofw/_C.cpython-311-x86_64-linux-gnu.so"},
 {"level": 2, "pc": "0x7f1ca895dbfe", "function": "operator()", "file": "./csrc/ops/take.cpp", "line": 23,
  "object": "/opt/venv/lib/python3.11/site-packages/demofw/_C.cpython-311-x86_64-linux-gnu.so"},
 {"level": 3, "pc": "0x7f1ca895dd6a", "function": "dfw::(anonymous namespace)::take_impl",
  "file": "./csrc/ops/take.cpp", "line": 23,
  "object": "/opt/venv/lib/python3.11/site-packages/demofw/_C.cpython-311-x86_64-linux-gnu.so"},
 {"level": 6, "pc": "0x7f1ca8960b38", "function": "dfw::(anonymous namespace)::py_binary",
  "file": "./csrc/python/module.cpp", "line": 314,
  "object": "/opt/venv/lib/python3.11/site-packages/demofw/_C.cpython-311-x86_64-linux-gnu.so"},
 {"level": 7, "pc": "0x548488", "function": null, "file": null, "line": null, "object": "/usr/bin/python3.11"},
 {"level": 24, "pc": "0x7f1ca8d23305", "function": "__libc_start_main", "file": null, "line": null,
  "object": "/lib/x86_64-linux-gnu/libc.so.6"},
 {"level": 25, "pc": "0x628f41", "function": "_start", "file": null, "line": null, "object": "/usr/bin/python3.11"}],
 "python": null, "no_line_info": ["/usr/bin/python3.11", "/lib/x86_64-linux-gnu/libc.so.6"], "status": 139}"""

# faulthandler's file of the same run, as debug_main.py has it write
DEMO_STACK = """Fatal Python error: Segmentation fault

Stack (most recent call first):
  File "/opt/venv/lib/python3.11/site-packages/demofw/__init__.py", line 31 in fn
  File "<string>", line 2 in <module>
  File "/debug/in/debug_main.py", line 24 in main
  File "/debug/in/debug_main.py", line 28 in <module>

Extension modules: demofw._C (total: 1)
"""

FACTS = {"recipe": "demo-cpu", "key": "fbecd7a790608b6d", "build_type": "Debug"}


def demo(**facts) -> debug_report.DebugResult:
    return debug_report.parse(DEMO_REPORT, DEMO_STACK, hidden_files=(MAIN,), facts={**FACTS, **facts})


def test_the_demo_crash_reads_as_signal_top_frame_at_its_source_line_and_python_stack():
    result = demo()
    assert result.crashed and result.signal == "SIGSEGV" and result.thread == 1 and result.exit_code == 139
    top = result.frames[0]
    assert (top.function, top.file, top.line) == ("dfw::(anonymous namespace)::take_kernel<double>",
                                                  "csrc/ops/take.cpp", 16)  # the prefix map's ./ dropped
    assert top.object.endswith("/demofw/_C.cpython-311-x86_64-linux-gnu.so")
    assert result.frames[5] == debug_report.Frame(None, None, None, "/usr/bin/python3.11")
    # the runner's own frames are not the program's
    assert [(p.file, p.line, p.function) for p in result.python_stack] == [
        ("/opt/venv/lib/python3.11/site-packages/demofw/__init__.py", 31, "fn"), ("<string>", 2, "<module>")]
    assert result.address is None  # si_code 128: a general-protection fault, no address (not a NULL deref)
    assert debug_report.note(result) is None


def test_the_json_has_signal_frames_python_stack_and_exit_code():
    data = json.loads(json.dumps(demo().to_dict()))
    assert data["signal"] == "SIGSEGV" and data["exit_code"] == 139 and data["outcome"] == "crashed"
    assert data["frames"][0] == {"function": "dfw::(anonymous namespace)::take_kernel<double>",
                                 "file": "csrc/ops/take.cpp", "line": 16,
                                 "object": "/opt/venv/lib/python3.11/site-packages/demofw/_C.cpython-311-x86_64-linux-gnu.so"}
    assert data["python_stack"][-1] == {"file": "<string>", "line": 2, "function": "<module>"}
    assert data["build_type"] == "Debug"


def test_the_text_shows_the_top_frames_with_file_line_or_object():
    lines = debug_report.text_lines(demo(), shown=6)
    assert lines[0] == ("SIGSEGV in thread 1 (a general-protection fault: the kernel gives no address) on demo-cpu "
                        "fbecd7a790608b6d (Debug)")
    assert "  #0  dfw::(anonymous namespace)::take_kernel<double>  csrc/ops/take.cpp:16" in lines
    assert "  #5  ??  in python3.11" in lines
    assert "  ... 2 more frames (--json has them all)" in lines
    assert '  File "<string>", line 2, in <module>' in lines


def test_a_release_build_says_the_frames_have_no_lines_and_names_the_fix():
    no_lines = json.loads(DEMO_REPORT)
    for frame in no_lines["frames"]:
        frame["file"] = frame["line"] = None
    result = debug_report.parse(json.dumps(no_lines), DEMO_STACK, facts={**FACTS, "build_type": "Release"})
    assert result.crashed and not result.has_lines
    assert "no debug info" in debug_report.note(result) and "build.type=Debug" in debug_report.note(result)
    assert debug_report.text_lines(result)[-1].startswith("note: the frames have no file:line")
    debug_build = debug_report.parse(json.dumps(no_lines), None, facts=FACTS)
    assert "objects without debug info (_C.cpython-311-x86_64-linux-gnu.so, python3.11, libc.so.6)" in \
        debug_report.note(debug_build)


def test_a_release_build_with_a_debug_recipe_beside_it_names_that_recipe(tmp_path, monkeypatch):
    from buildctl.cli.debug import debug_recipe_of

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "torch-cpu.yaml").write_text("description: x\nbuild:\n  type: Release\n")
    (recipes / "torch-cpu-relwithdebinfo.yaml").write_text("extends: torch-cpu.yaml\nbuild:\n  type: RelWithDebInfo\n")
    (recipes / "broken.yaml").write_text("extends: [unclosed\n")
    monkeypatch.setenv("BUILDCTL_RECIPES_DIR", str(recipes))
    assert debug_recipe_of("torch-cpu") is None
    (recipes / "torch-cpu-debug.yaml").write_text("extends: torch-cpu.yaml\nbuild:\n  type: Debug\n")
    assert debug_recipe_of("torch-cpu") == "torch-cpu-debug"

    no_lines = json.loads(DEMO_REPORT)
    for frame in no_lines["frames"]:
        frame["file"] = frame["line"] = None
    result = debug_report.parse(json.dumps(no_lines), DEMO_STACK,
                                facts={**FACTS, "build_type": "Release", "debug_recipe": "demo-cpu-debug"})
    assert debug_report.note(result).endswith("fix: build its Debug recipe (invoke build --recipe demo-cpu-debug)")


@pytest.mark.parametrize("report, line", [
    ('{"outcome": "exited", "exit_code": 0, "status": 0}', "the code did not crash: it exited with status 0 under gdb"),
    ('{"outcome": "killed", "signal": 9, "status": 137}', "the code did not crash: it was killed by signal 9"),
    ('{"outcome": "timed_out", "timeout_s": 5, "status": 124}', "the code did not crash within 5 s"),
    ('{"status": 125, "error": "RuntimeError: x"}', "gdb failed: gdb's report failed: RuntimeError: x"),
    (None, "gdb failed: gdb wrote no report"),
    ("[1, 2]", "gdb failed: gdb's report is not a JSON object"),
    ("{not json", "gdb failed: gdb's report is not JSON"),
    # issue 35, item 6: the program under test can write this file; json.loads raised RecursionError
    ('{"outcome": "crashed", "frames": ' + "[" * 100_000 + "]" * 100_000 + "}", "gdb failed: gdb's report is not JSON"),
    ('{"outcome": "crashed", "status": ' + "9" * 5000 + "}", "gdb failed: gdb's report is not JSON"),
])
def test_a_run_that_did_not_crash_is_one_line(report, line):
    result = debug_report.parse(report, None)
    assert not result.crashed
    assert debug_report.not_crashed_line(result).startswith(line)


def test_the_report_is_untrusted_text():
    """The program under test can write into /debug/out: controls are stripped, types checked, sizes capped."""
    hostile = {"outcome": "crashed", "signal": "SIGSEGV\x1b[2J", "thread": "1", "status": True,
               "frames": [{"function": "f\x1b]0;pwned\x07" + "x" * 5000, "file": "./a.cpp\r", "line": "16",
                           "object": ["no"]}, "not a frame"] + [{"function": "g"}] * 500}
    result = debug_report.parse(json.dumps(hostile), '  File "\x1b[31mx.py", line 3 in \x07f\n')
    assert result.signal == "SIGSEGV" and result.thread is None and result.exit_code is None
    top = result.frames[0]
    assert top.function.startswith("fx") and len(top.function) == debug_report.MAX_TEXT
    assert (top.file, top.line, top.object) == ("a.cpp", None, None)
    assert len(result.frames) == debug_report.MAX_FRAMES - 1  # at most 64 read, one of them not a frame
    assert result.python_stack == (debug_report.PyFrame("x.py", 3, "f"),)
    assert not any("\x1b" in line or "\x07" in line for line in debug_report.text_lines(result))


def test_the_container_runs_the_program_under_gdb_after_installing_the_wheel():
    script = container_script("/opt/venv", "3.11", "demofw-0.1.0-cp311-cp311-linux_x86_64.whl", [],
                              Program("import demofw", CODE_NAME))
    lines = script.splitlines()
    assert lines[0] == "set -e" and "--no-index --find-links /verify/wheelhouse" in script
    assert lines[-1] == ("exec gdb -q -nx -batch -x /debug/in/gdb_crash.py --args /opt/venv/bin/python "
                         "/debug/in/debug_main.py /debug/out/python-stack.txt /debug/program/code.py '<string>'")
    script = Program.of(None, str(Path(__file__)))
    assert script.name == str(Path(__file__)) and script.container_path == "/debug/program/test_debug.py"


def test_the_shell_installs_the_wheel_points_gdb_at_the_sources_and_leaves_bash():
    script = shell_script("/opt/venv", "3.11", "demofw-0.1.0-cp311-cp311-linux_x86_64.whl", [],
                          Program("import demofw", CODE_NAME), sources=True)
    lines = script.splitlines()
    assert lines[0] == "set -e" and "--no-index --find-links /verify/wheelhouse" in script
    assert "printf '%s\\n' 'set disable-randomization off' 'directory /work/src' > /root/.gdbinit" in lines
    assert "echo 'try: gdb -q --args /opt/venv/bin/python /debug/program/code.py'" in lines
    assert lines[-1] == "exec bash"
    bare = shell_script("/opt/venv", "3.11", "x.whl", [], None, sources=False)
    assert "directory /work/src" not in bare and "echo 'try: gdb -q --args /opt/venv/bin/python'" in bare


def docker_mounts(cmd: list[str]) -> dict[str, tuple[str, bool] | None]:
    """{source: (target, read-only)} as the docker CLI reads `-v SRC:DST:ro` (split at ':'; another number
    of parts is refused: None) and `--mount type=...,source=...,target=...,readonly` (CSV fields)."""
    import csv

    found: dict[str, tuple[str, bool] | None] = {}
    for flag, value in zip(cmd, cmd[1:], strict=False):
        if flag == "-v":
            parts = value.split(":")
            found[parts[0]] = (parts[1], parts[2] == "ro") if len(parts) == 3 else None
        elif flag == "--mount":
            fields = dict(f.split("=", 1) if "=" in f else (f, "true") for f in next(csv.reader([value])))
            found[fields["source"]] = (fields["target"], fields.get("readonly") == "true")
    return found


def test_the_shell_runs_interactive_read_only_and_keeps_values_off_the_command_line():
    cmd = shell_command("img:tag", "exec bash", mounts={"/tmp/w.whl": "/verify/in/w.whl", "vol": "/work"},
                        env={"UCX_ERROR_SIGNALS": "", "HTTPS_PROXY": "http://u:secret@proxy:3128"},
                        labels={"buildctl.role": "debug"}, network="host")
    assert cmd[:4] == ["docker", "run", "--rm", "-it"]
    assert docker_mounts(cmd) == {"/tmp/w.whl": ("/verify/in/w.whl", True), "vol": ("/work", True)}
    assert "HTTPS_PROXY" in cmd and not any("secret" in a for a in cmd)
    assert cmd[-4:] == ["img:tag", "/bin/sh", "-c", "exec bash"] and ["--network", "host"] == cmd[-6:-4]


def test_the_shell_mounts_an_artifacts_path_holding_colons_and_commas():
    """Issue 35, suspicion: `invoke debug --shell` with an artifacts path containing ':' (a time in a folder
    name, 12:30) passed `-v /art/12:30/w.whl:/verify/in/w.whl:ro`, which the docker CLI splits at every ':'
    (refused, or the wrong source). Proved; mounts are now --mount fields, quoted as CSV where they must be."""
    mounts = {"/srv/ci 12:30/demo/k/w.whl": "/verify/in/w.whl", '/srv/a,b"c/wheelhouse': "/verify/wheelhouse",
              "buildctl-work-demo-0123456789abcdef": "/work"}
    cmd = shell_command("img:tag", "exec bash", mounts=mounts, env={}, labels={}, network=None)
    assert docker_mounts(cmd) == {src: (dst, True) for src, dst in mounts.items()}


def invoke(*args: str, cwd: Path = REPO, env: dict | None = None):
    return invoke_here("-r", str(REPO), "debug", *args, cwd=cwd, env={"BUILDCTL_DEBUG": "", "COLUMNS": "200", **(env or {})})


def artifact(root: Path, recipe: str, wheels: list[dict], extensions=None) -> Path:
    folder = root / recipe / "0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"recipe": recipe, "key": folder.name, "wheels": wheels,
                                                      "extensions": extensions}))
    return folder


@pytest.fixture
def artifacts_root(tmp_path) -> Path:
    root = tmp_path / "artifacts"
    artifact(root, "demo-skbuild-cpu", [{"file": "x.whl", "sha256": "0" * 64}])
    prebuilt = artifact(root, "demo-cpu", [{"file": "ext.whl", "sha256": "0" * 64}],
                        {"extensions": [{"file": "ext.whl"}]})
    (prebuilt / "ext.whl").write_bytes(b"")
    return root


@pytest.mark.parametrize("args, words", [
    (("--recipe", "demo-cpu"), "give the Python to run: --code"),
    (("--recipe", "demo-cpu", "--code", "1", "--script", "x.py"), "(one of them)"),
    (("--recipe", "demo-cpu", "--script", "/nonexistent/x.py"), "--script /nonexistent/x.py: not a file"),
    (("--recipe", "demo-cpu", "--script", "/"), "--script /: not a file"),
    (("--recipe", "no-such-recipe", "--code", "1"), "no-such-recipe.yaml: file not found"),
    (("--code", "1"), "--recipe is required"),
    (("--recipe", "demo-cpu", "--code", "1", "--timeout", "0"), "--timeout 0: not a positive number"),
    (("--recipe", "demo-cuda13", "--code", "1"), "no artifact of demo-cuda13 yet; fix: invoke build"),
    (("--recipe", "demo-cpu", "--code", "1", "--artifact", "/"), "--artifact /: not an artifact folder"),
    (("--recipe", "demo-cpu", "--code", "1", "--artifact", "{root}/demo-skbuild-cpu/0123456789abcdef"),
     "is an artifact of demo-skbuild-cpu, not of demo-cpu; fix: --recipe demo-skbuild-cpu"),
    (("--recipe", "demo-cpu", "--code", "1", "--key", "0123456789abcdef"), "holds no wheel of its own framework"),
    (("--recipe", "demo-cpu", "--code", "1", "--key", "fedcba9876543210"),
     "--key fedcba9876543210: no artifact of demo-cpu with that key in "),
    (("--recipe", "demo-cpu", "--code", "1", "--key", "0123456789abcdef", "--artifact", "/"),
     "--artifact and --key both name an artifact"),
    (("--recipe", "demo-cpu", "--shell", "--json"), "--shell opens an interactive terminal, which has no JSON"),
    (("--recipe", "demo-cpu", "--shell", "--key", "0123456789abcdef"),
     "holds no wheel of its own framework"),  # a shell needs no program
])
def test_bad_input_is_refused_in_one_line_without_the_engine(artifacts_root, args, words):
    proc = invoke(*(a.replace("{root}", str(artifacts_root)) for a in args),
                  env={"BUILDCTL_ARTIFACTS": str(artifacts_root)})
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("number", ["9" * 400, "-" + "9" * 400, "1e400", "-1e400", "NaN", "Infinity", "-Infinity",
                                    "1e308", "-5", "123456789012345678901234567890"])
def test_hostile_numbers_in_the_report_are_passed_over_never_raised(number):
    """issue 43, item 8: parse promises never to raise; a 400-digit timeout_s raised OverflowError in float().
    Every number of the report may be hostile: out of range or not finite, it is read as absent."""
    report = ('{"outcome": "timed_out", "timeout_s": N, "status": N, "thread": N, "si_code": N, "signal": N, '
              '"frames": [{"function": "f", "file": "./a.cpp", "line": N}]}').replace("N", number)
    result = debug_report.parse(report, None)
    assert result.outcome == "timed_out"
    for value in (result.timeout_s, result.exit_code, result.thread, result.si_code, result.frames[0].line):
        assert value is None or (abs(value) < 2 ** 63 and value == value)
    assert result.timeout_s is None or 0 <= result.timeout_s < float("inf")
    json.dumps(result.to_dict(), allow_nan=False)  # what --json prints is JSON
    assert debug_report.not_crashed_line(result).startswith("the code did not crash within")
    assert all(isinstance(line, str) for line in debug_report.text_lines(result))
