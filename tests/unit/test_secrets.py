"""Credentials in recipe URLs: split off once (secrets.split_credentials), never rendered, keyed,
shown, stored or put in a container's configuration; handed to the build only at run time.

Every placement below was proved to leak before the fix (buildctl at b74e6d9, the commit this work
starts from), by these very tests:

* `--apt-mirror https://user:token@…` was written verbatim to apt/sources.list (COPY'd into both
  images) and so into every repro bundle's context;
* the pip index token stood in pip.conf (a COPY layer of the venv stages) and the bundle's context;
* tokens in framework.source.git, toolchain.nccl.git, torch_npu's git and in `?token=` download
  URLs stood unmasked in build.sh, the Dockerfile and recipe.resolved.yaml, in manifest.json's
  `source` and `resolved_recipe`, in bundle.json's `source`, and changed the artifact key;
* the proxy password went into the compile container's environment (`docker inspect` of a
  `--keep-container` run) and into the image build args.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from publish_helpers import assembled_artifact

from buildctl import recipe, render, secrets
from buildctl.engine import build as engine_build
from buildctl.errors import EngineError
from buildctl.failure import repro
from buildctl.pipeline import stages
from buildctl.pipeline.stages.compile import container_env
from buildctl.recipe.schema import Spec
from buildctl.store import key as key_mod

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def tokens(tag: str) -> dict[str, str]:
    return {k: f"{k}-{tag}-t0k3n" for k in ("apt", "pip", "extra", "proxy", "git", "runfile", "cudnn", "nccl",
                                             "npu", "installer", "env", "patch")}


def cuda_spec(t: dict[str, str]) -> Spec:
    """A CUDA recipe with credentials in every URL it has: site, source, downloads, NCCL's git, env."""
    data = recipe.load("cuda12.1-nccl2.18").model_dump(mode="json")
    data["framework"]["source"] = {"git": f"https://ci:{t['git']}@git.corp.example/pytorch.git", "ref": "v2.1.2"}
    tc = data["toolchain"]
    tc["cuda"]["runfile"]["url"] += f"?token={t['runfile']}"
    tc["cudnn"] = {"version": "8.9.2.26", "install": "archive", "archive": {
        "url": f"https://dl.corp.example/cudnn-linux-x86_64-8.9.2.26_cuda12-archive.tar.xz?X-Amz-Signature={t['cudnn']}",
        "sha256": "0123456789abcdef" * 4}}
    tc["nccl"] = {"version": "2.18.1", "install": "source", "git": f"https://{t['nccl']}@git.corp.example/nccl.git"}
    data["build"]["env"] = {"EXTRA_FILES": f"https://u:{t['env']}@files.corp.example/x"}
    data["framework"]["patches"] = [
        {"download": {"url": f"https://files.corp.example/fix.patch?token={t['patch']}", "sha256": "ab" * 32}},
        {"archive": {"url": f"https://u:{t['patch']}@files.corp.example/debian.tar.xz", "sha256": "cd" * 32},
         "series": "debian/patches/series"}]
    data["site"] = {
        "apt_mirror": f"http://aptuser:{t['apt']}@mirror.corp.example/ubuntu",
        "pip_index_url": f"https://pipuser:{t['pip']}@pypi.corp.example/simple",
        "pip_extra_index_urls": [f"https://extra.corp.example/simple?token={t['extra']}"],
        "http_proxy": f"http://px:{t['proxy']}@proxy.corp.example:3128",
        "https_proxy": f"http://px:{t['proxy']}@proxy.corp.example:3128",
        "no_proxy": "localhost",
    }
    return Spec.model_validate(data)


def ascend_spec(t: dict[str, str]) -> Spec:
    data = recipe.load("ascend-cann8.0").model_dump(mode="json")
    asc = data["toolchain"]["ascend"]
    asc["installer"]["url"] += f"?token={t['installer']}"
    asc["torch_npu"] = {"git": f"https://npu:{t['npu']}@git.corp.example/torch_npu.git", "ref": "v2.1.0"}
    return Spec.model_validate(data)


def leaks(text: str, t: dict[str, str]) -> list[str]:
    return sorted(k for k, v in t.items() if v in text)


@pytest.fixture(params=["cuda", "ascend"])
def hostile(request) -> tuple[Spec, dict[str, str]]:
    t = tokens("a")
    return (cuda_spec if request.param == "cuda" else ascend_spec)(t), t


# ---------------------------------------------------------------------------------------------- what is written


def test_rendered_files_carry_no_credentials(hostile):
    spec, t = hostile
    files = render.render(spec).files
    found = {name: leaks(text, t) for name, text in files.items() if leaks(text, t)}
    assert found == {}


def test_rendered_files_carry_the_urls_without_their_credentials():
    t = tokens("a")
    files = render.render(cuda_spec(t)).files
    assert files["apt/sources.list"].startswith("deb http://mirror.corp.example/ubuntu jammy ")
    assert "index-url = https://pypi.corp.example/simple\n" in files["pip.conf"]
    assert "extra-index-url = https://extra.corp.example/simple\n" in files["pip.conf"]
    assert "buildctl-git-fetch https://git.corp.example/pytorch.git v2.1.2" in files["build.sh"]
    assert "export EXTRA_FILES=https://files.corp.example/x" in files["build.sh"]
    assert "buildctl-git-fetch https://git.corp.example/nccl.git v2.18.1-1" in files["Dockerfile"]
    assert "cuda_12.1.1_530.30.02_linux.run " in files["Dockerfile"]  # the URL without ?token=
    assert "cuda12-archive.tar.xz " in files["Dockerfile"]
    assert "buildctl-fetch https://files.corp.example/fix.patch " in files["build.sh"]
    assert "buildctl-fetch https://files.corp.example/debian.tar.xz " in files["build.sh"]


def test_artifact_key_does_not_depend_on_credentials():
    def key(spec: Spec) -> str:
        rendered = render.render(spec)
        return key_mod.artifact_key(rendered.files, key_mod.source_digest(rendered.spec), "sha256:base")

    plain = cuda_spec(tokens("a")).model_dump(mode="json", exclude_defaults=True)
    plain["framework"]["source"]["git"] = "https://git.corp.example/pytorch.git"
    assert key(cuda_spec(tokens("a"))) == key(cuda_spec(tokens("b")))
    assert recipe.spec_hash(cuda_spec(tokens("a"))) == recipe.spec_hash(cuda_spec(tokens("b")))
    assert key_mod.source_digest(render.render(cuda_spec(tokens("a"))).spec) == \
        key_mod.source_digest(Spec.model_validate(plain))


def test_shown_recipe_masks_every_url(hostile):
    """`invoke show`, manifest.json's resolved_recipe and recipe.resolved.yaml: `***` where credentials were."""
    spec, t = hostile
    assert leaks(json.dumps(recipe.masked_dump(spec)) + recipe.resolved_yaml(spec), t) == []
    if "@" in spec.framework.source.git:
        assert recipe.masked_dump(spec)["framework"]["source"]["git"] == "https://***@git.corp.example/pytorch.git"


def test_manifest_carries_no_credentials(tmp_path):
    t = tokens("a")
    spec = cuda_spec(t)
    staging, manifest = assembled_artifact(spec, tmp_path, "torch-2.1.2-cp310-cp310-linux_x86_64.whl",
                                           "gcc=11.4.0\nsource_commit=abc\n")
    assert leaks(json.dumps(manifest), t) == []
    assert manifest["source"]["git"] == "https://***@git.corp.example/pytorch.git"
    # nor does any file of the artifact: the runtime image's context it records included
    assert (staging / "context" / "Dockerfile").is_file()
    found = {str(p.relative_to(staging)): leaks(p.read_text(errors="replace"), t)
             for p in staging.rglob("*") if p.is_file()}
    assert {k: v for k, v in found.items() if v} == {}


def test_container_env_and_build_args_carry_no_credentials(tmp_path):
    t = tokens("a")
    spec = cuda_spec(t)
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    assert leaks(json.dumps([container_env(run, 4), secrets.proxy_env(spec)]), t) == []
    # the proxies themselves still reach the build, without their credentials
    assert secrets.proxy_env(spec)["https_proxy"] == "http://proxy.corp.example:3128"


def test_repro_bundle_carries_no_credentials(tmp_path, hostile):
    spec, t = hostile
    rendered = render.render(spec)
    context = render.write(rendered, tmp_path / "build" / spec.name)
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE, render_root=tmp_path / "build"))
    log = f"fatal: unable to access '{spec.framework.source.git or spec.toolchain.ascend.torch_npu.git}'"
    bundle = repro.write_bundle(
        spec=spec,
        rendered=rendered,
        context_dir=context,
        secrets=run.secrets,
        root=tmp_path / "artifacts",
        failure=repro.FailedStep(step="compile", exit_code=128, log=log, diagnosis=None),
        replay=repro.ReplayFacts(
            image_id="sha256:img",
            command=list(render.BUILD_COMMAND),
            env=container_env(run, 2),
            volumes={"w": "/work"},
            network="host",
            memory=None,
        ),
    )
    found = {str(p.relative_to(bundle)): leaks(p.read_text(errors="replace"), t)
             for p in bundle.rglob("*") if p.is_file()}
    assert {k: v for k, v in found.items() if v} == {}


# ---------------------------------------------------------------------------------------------- what is handed over


def test_credentials_hold_what_the_tools_need():
    t = tokens("a")
    creds = secrets.split_credentials(cuda_spec(t))[1]
    urls = dict(creds.urls)
    assert urls["https://git.corp.example/pytorch.git"] == f"https://ci:{t['git']}@git.corp.example/pytorch.git"
    assert urls["https://git.corp.example/nccl.git"] == f"https://{t['nccl']}@git.corp.example/nccl.git"
    assert any(real.endswith(f"?token={t['runfile']}") for real in urls.values())
    env = dict(creds.env)
    assert env["PIP_INDEX_URL"] == f"https://pipuser:{t['pip']}@pypi.corp.example/simple"
    assert env["PIP_EXTRA_INDEX_URL"] == f"https://extra.corp.example/simple?token={t['extra']}"
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        assert env[name] == f"http://px:{t['proxy']}@proxy.corp.example:3128"
    assert env["EXTRA_FILES"] == f"https://u:{t['env']}@files.corp.example/x"
    assert creds.apt_auth == f"machine http://mirror.corp.example/ubuntu login aptuser password {t['apt']}\n"
    assert {v for k, v in t.items() if k not in ("installer", "npu")} <= creds.values()
    assert urls["https://files.corp.example/fix.patch"].endswith(f"?token={t['patch']}")


def test_a_recipe_without_credentials_needs_none():
    spec = recipe.load("demo-cpu", site={"http_proxy": "http://proxy.corp.example:3128"})
    clean, creds = secrets.split_credentials(spec)
    assert not creds and clean == spec


@pytest.mark.parametrize(("url", "clean"), [
    ("https://user:p%40ss@h.example/simple", "https://h.example/simple"),
    ("https://ghp_abcdef@github.example/o/r.git", "https://github.example/o/r.git"),
    ("https://h.example/f.run?token=abc&v=2", "https://h.example/f.run?v=2"),
    ("https://h.example/f.run?a=1&X-Amz-Signature=zz;sig=yy", "https://h.example/f.run?a=1"),
    ("http://deb.debian.org/debian", "http://deb.debian.org/debian"),
])
def test_strip_credentials(url, clean):
    assert secrets.strip_credentials(url) == clean


def test_payload_is_inert_shell_that_sets_exactly_the_values(tmp_path):
    """Whatever a credential holds (quotes, $(…), newlines), sourcing the payload only assigns it."""
    nasty = "p'w\"$(touch /tmp/pwned-buildctl)`id`\n;x"
    creds = secrets.Credentials(urls=(("https://h/r.git", "https://u:" + nasty + "@h/r.git"),),
                                env=(("HTTP_PROXY", "http://u:" + nasty + "@p:1"),), apt_auth="machine h login u password x\n")
    payload = tmp_path / "payload"
    payload.write_text(creds.payload())
    out = subprocess.run(["bash", "-c", f'. {payload}; printf "%s\\0" "$HTTP_PROXY" "$BUILDCTL_URL_MAP" '
                          '"$buildctl_apt_auth"'], capture_output=True, text=True, check=True).stdout
    assert out.split("\0")[:3] == ["http://u:" + nasty + "@p:1", "https://h/r.git https://u:" + nasty + "@h/r.git",
                                   "machine h login u password x\n"]
    assert not Path("/tmp/pwned-buildctl").exists()


def test_secret_server_answers_only_its_token():
    with secrets.SecretServer(b"export X=1\n", "127.0.0.1") as server:
        def ask(line: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(line)
                return b"".join(iter(lambda: s.recv(4096), b""))

        assert ask(b"wrong\n") == b""
        assert ask(server.token.encode() + b"\n") == b"export X=1\n"
        assert secrets.SECRET_HOST_RE.fullmatch(server.host_name)
    with pytest.raises(OSError):  # stopped with the block
        socket.create_connection(("127.0.0.1", server.port), timeout=2)


def test_fetch_helper_takes_the_real_url_from_the_map(tmp_path):
    """buildctl-fetch is given the URL without its token and downloads the real one from the map."""
    src = tmp_path / "file.bin"
    src.write_bytes(b"payload")
    import hashlib

    sha = hashlib.sha256(b"payload").hexdigest()
    real = f"file://{src}?token=abcd1234"
    out = tmp_path / "out.bin"
    env = {"PATH": "/usr/bin:/bin", "BUILDCTL_URL_MAP": f"file://{src}-other x\nfile://{src} {real}",
           "BUILDCTL_SECRETS_TAKEN": "1"}
    proc = subprocess.run(["bash", str(TEMPLATES / "fetch.sh"), f"file://{src}", sha, str(out)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == b"payload" and "abcd1234" not in proc.stdout + proc.stderr


def test_remote_engine_with_credentials_is_refused_in_one_line():
    class Remote:
        api = type("api", (), {"base_url": "http://10.0.0.9:2375"})()

    creds = secrets.Credentials(env=(("X", "y"),))
    with pytest.raises(EngineError) as info, engine_build._credential_hosts(Remote(), creds, "host"):
        pass
    assert "\n" not in str(info.value) and "fix:" in str(info.value)

