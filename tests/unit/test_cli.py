"""The command line as users and CI run it: `invoke TASK ...` from the repository root.

Most calls run invoke's Program in this process (tests/invoke_here.py: the real argument parsing,
tasks.py, error lines and exit codes, without the ~1 s interpreter start of a process); a few start
`python -m invoke` as a user does, for what only a process shows: tasks.py found from the working
directory, an error that is the one line a fresh interpreter prints, and a partial install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke_here import invoke_here

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.cli.common import load_spec

REPO = Path(__file__).resolve().parents[2]
TASKS = ("recipes", "show", "render", "matrix", "build")


def invoke_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # The venv's interpreter runs invoke, so the venv's packages and tasks.py are what is tested.
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "BUILDCTL_DEBUG": "", "COLUMNS": "80", **(env or {})})


def invoke(*args: str, env: dict | None = None):
    return invoke_here(*args, env={"BUILDCTL_DEBUG": "", "COLUMNS": "80", **(env or {})})


def assert_one_line_error(proc, *parts: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_list_shows_the_tasks():
    """The venv's `invoke` entry point, as the README runs it, finds tasks.py from the working directory."""
    proc = subprocess.run([str(Path(sys.executable).with_name("invoke")), "--list"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert set(TASKS) <= listed


@pytest.mark.parametrize("task", TASKS)
def test_task_help(task):
    proc = invoke(task, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"] {task} [" in proc.stdout.splitlines()[0]
    assert "Docstring:" in proc.stdout and "Traceback" not in proc.stderr
    if task in ("show", "render"):
        assert "--recipe=STRING" in proc.stdout and "--set" in proc.stdout
    if task == "build":  # several recipes: repeatable
        assert "--recipe" in proc.stdout and "repeatable" in proc.stdout and "--set" in proc.stdout
    if task in ("render", "build"):
        for env in ("BUILDCTL_BASE_IMAGE", "BUILDCTL_PIP_INDEX_URL", "BUILDCTL_CA_CERT", "BUILDCTL_NETWORK"):
            assert env in proc.stdout


def test_recipes_json():
    proc = invoke("recipes", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == [p.stem for p in recipe.list_recipes()]
    for r in rows:
        assert set(r) == {"name", "accelerator", "labels", "description", "path"}
        assert r["accelerator"] in ("cpu", "cuda", "rocm", "ascend")
        assert (REPO / r["path"]).is_file()
    by_name = {r["name"]: r for r in rows}
    assert by_name["cuda12.1-nccl2.18"]["accelerator"] == "cuda"
    assert by_name["rocm6.2"]["accelerator"] == "rocm"


def test_show_json():
    proc = invoke("show", "--recipe", "cuda12.1-nccl2.18", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["name"] == "cuda12.1-nccl2.18"
    assert data["toolchain"]["cuda"]["version"] == "12.1.1"
    assert data["toolchain"]["cuda"]["install"] == "runfile"
    assert data["toolchain"]["nccl"] == {"version": "2.18.1", "install": "pip", "archive": None,
                                         "git": "https://github.com/NVIDIA/nccl", "ref": None}
    assert data["build"]["cuda_arch"] == ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
    assert data["python"] == {"version": "3.10", "venv": "/opt/venv", "packages": data["python"]["packages"],
                              "constraints": data["python"]["constraints"], "lock": "recipes/locks/cuda12.1-nccl2.18.txt"}
    assert "nvidia-cublas-cu12==12.1.3.1" in data["python"]["constraints"]
    assert "extends" not in data


def test_show_applies_set_and_masks_credentials():
    proc = invoke("show", "--recipe", "demo-cpu", "--json", "--set", "build.type=Debug",
                  "--set", "site.pip_index_url=https://user:t0ps3cret@pypi.example/simple")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["build"]["type"] == "Debug"
    assert data["site"]["pip_index_url"] == "https://***@pypi.example/simple"
    assert "t0ps3cret" not in proc.stdout + proc.stderr


def test_matrix_json_shape():
    proc = invoke("matrix", "--label", "demo")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) == {"include"} and data["include"]
    for row in data["include"]:
        assert set(row) == {"recipe", "runs-on", "labels"}
        assert "demo" in row["labels"]
        assert isinstance(row["runs-on"], (str, list))
    assert {r["recipe"] for r in data["include"]} == {"demo-cpu", "demo-cuda13", "demo-rocm", "demo-skbuild-cpu"}


def test_render_cuda12_1_nccl2_18(tmp_path):
    """The done-criterion command: the written folder is what the in-process render gives."""
    out = tmp_path / "out"
    proc = invoke("render", "--recipe", "cuda12.1-nccl2.18", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dir"] == str(out)
    dockerfile, build = (out / "Dockerfile").read_text(), (out / "build.sh").read_text()
    assert "sh /tmp/cuda.run --silent --toolkit --override --toolkitpath=/usr/local/cuda-12.1" in dockerfile
    assert "buildctl-fetch https://developer.download.nvidia.com/" in dockerfile
    assert " d74022d41d80105319dfa21beea39b77a5b9919539c0487a05caaf2446d6a70e /tmp/cuda.run" in dockerfile
    assert "nvidia-nccl-cu12==2.18.1" in dockerfile
    assert "export USE_SYSTEM_NCCL=1\n" in build
    assert "export TORCH_CUDA_ARCH_LIST='5.0;6.0;7.0;7.5;8.0;8.6;9.0'\n" in build
    assert 'export PYTHON_EXECUTABLE="$VENV/bin/python"\n' in build and "VENV=/opt/venv\n" in build
    expected = render_mod.render(load_spec("cuda12.1-nccl2.18")[0]).files
    for rel, text in expected.items():
        assert (out / rel).read_text() == text, rel


def test_unknown_recipe(tmp_path):
    proc = invoke_process("render", "--recipe", "cuda99-nope", "--out", str(tmp_path / "out"))
    assert_one_line_error(proc, "recipes/cuda99-nope.yaml: file not found", "fix: ")
    assert list(tmp_path.iterdir()) == []


def test_set_invalid_value_names_the_field(tmp_path):
    proc = invoke("render", "--recipe", "demo-cpu", "--set", "build.type=Nightly", "--out", str(tmp_path / "out"))
    assert_one_line_error(proc, "--set build.type: build.type: ", "'Release', 'Debug' or 'RelWithDebInfo'", "fix: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "parts"), [
    (("show",), ("--recipe is required", "fix: ")),
    (("show", "--recipe", "demo-cpu", "--set", "build.type"), ("--set: build.type: expected KEY=VALUE",)),
    (("show", "--recipe", "demo-cpu", "--base-image", "UBUNTU;reboot"), ("base.image: malformed value",)),
    (("matrix", "--label", "no-such-label"), ("--label no-such-label: no recipe has it",)),
    (("render", "--recipe", "demo-cpu", "--ca-cert", "/nonexistent/ca.pem"), ("CA certificate /nonexistent/ca.pem (--ca-cert",)),
    (("build", "--recipe", "demo-cpu", "--jobs", "many"), ("--jobs many: not a positive integer",)),
])
def test_bad_input_is_one_line_exit_2(args, parts):
    assert_one_line_error(invoke(*args), *parts)


def test_placeholder_sha256_renders_but_build_refuses(tmp_path):
    """`invoke render` of the shipped ascend recipe (placeholder installer digest) writes the folder with a
    warning (it used to exit 2 and write nothing); `invoke build` refuses it in one line, before any engine."""
    out = tmp_path / "out"
    proc = invoke("render", "--recipe", "ascend-cann8.0", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("warning: toolchain.ascend.installer.sha256: placeholder sha256 for ")
    assert "`invoke build` refuses it until pinned; fix: " in proc.stderr
    assert "# PLACEHOLDER, NOT BUILDABLE AS IS: toolchain.ascend.installer.sha256" in (out / "Dockerfile").read_text()
    build = invoke("build", "--recipe", "ascend-cann8.0", "--no-preflight",
                   env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert_one_line_error(build, "recipes/ascend-cann8.0.yaml: toolchain.ascend.installer.sha256: placeholder sha256",
                          "put it in a --download-cache folder and pin it: --set toolchain.ascend.installer.sha256=")


def test_env_vars_feed_the_options(tmp_path):
    """BUILDCTL_* variables stand in for the flags (here: the base image and a pip index)."""
    out = tmp_path / "out"
    proc = invoke("render", "--recipe", "demo-cpu", "--out", str(out), "--json",
                  env={"BUILDCTL_BASE_IMAGE": "debian:bookworm-slim",
                       "BUILDCTL_PIP_INDEX_URL": "https://pypi.corp.example/simple"})
    assert proc.returncode == 0, proc.stderr
    assert "ARG BUILDCTL_BASE_IMAGE=debian:bookworm-slim\nFROM ${BUILDCTL_BASE_IMAGE} AS base" in \
        (out / "Dockerfile").read_text()
    assert "index-url = https://pypi.corp.example/simple" in (out / "pip.conf").read_text()


def test_recipes_table_at_80_columns_keeps_one_line_per_recipe():
    """`invoke recipes` at 80 columns folded descriptions into 4-5 line cells; now one line per recipe and
    the descriptions in full under the table."""
    import io

    from rich.console import Console

    from buildctl import cli

    rows = cli.recipe_rows()
    con = Console(file=io.StringIO(), width=80, record=True, color_system=None)
    cli.print_recipes(rows, con)
    lines = con.export_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i, line in enumerate(lines) if line.startswith("└"))
    assert [line.split("│")[1].strip() for line in lines[head + 1:end]] == [r["name"] for r in rows]
    flat = " ".join(" ".join(lines[end + 1:]).split())
    for r in rows:
        assert f"{r['name']}: {r['description']}" in flat
    assert max(len(r["description"]) for r in rows) > 80  # long enough to have wrapped a cell before


def test_a_regular_install_without_the_checkout_is_refused_in_one_line(tmp_path):
    """`pip install .` (not -e) puts only the buildctl package in site-packages (pyproject: packages
    buildctl*; checked with `pip wheel`: buildctl/ and its dist-info, nothing else), without templates/,
    recipes/ or tasks.py. Used so (here that layout, beside the venv's dependencies), buildctl said there
    were no recipes and rendered as 'internal error: TemplateNotFound'; now one line, exit 2, with the fix.
    (Suspected in issue 20, proved.)"""
    import shutil
    import sysconfig

    site = tmp_path / "site-packages"
    tracked = subprocess.run(["git", "ls-files", "buildctl"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    for name in tracked:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, site / name)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{sysconfig.get_paths()['purelib']}",
           "BUILDCTL_DEBUG": "", "COLUMNS": "300"}
    fix = ("error: buildctl is installed without its checkout: templates, recipes, tasks.py are not beside "
           f"{site / 'buildctl'}; fix: install it editable from a checkout (pip install -e CHECKOUT) and run "
           "invoke there")
    calls = ["cli.recipes(as_json=True)",
             f"cli.render({str(REPO / 'recipes' / 'demo-cpu.yaml')!r}, [], out_dir={str(tmp_path / 'r')!r}, "
             "as_json=True, settings=Settings())"]
    # One interpreter for both calls (each one's stdout and stderr apart); -S: not the venv's
    # site-packages, whose editable install would win over PYTHONPATH.
    script = ("import contextlib, io, json, sys\nimport buildctl.cli as cli\nfrom buildctl.settings import Settings\n"
              "from invoke import Exit\nseen = []\n"
              f"for call in {calls!r}:\n"
              "    out, err = io.StringIO(), io.StringIO()\n"
              "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
              "        try:\n            exec(call)\n            code = 0\n"
              "        except Exit as e:\n            code = e.code\n"
              "    seen.append([code, out.getvalue(), err.getvalue().splitlines()])\n"
              "print(json.dumps(seen))")
    proc = subprocess.run([sys.executable, "-S", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    assert json.loads(proc.stdout) == [[2, "", [fix]]] * len(calls)
    assert not (tmp_path / "r").exists()
