"""buildctl.engine and buildctl.secrets without an engine: connect errors, canned build streams, masking.

The runs against the real Docker engine are in tests/integration/test_engine_integration.py."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from buildctl import engine, secrets
from buildctl.errors import EngineError


def write_context(ctx: Path, dockerfile: str) -> Path:
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "Dockerfile").write_text(textwrap.dedent(dockerfile).lstrip())
    return ctx


@pytest.mark.parametrize(
    ("host", "words"),
    [
        ("unix:///nonexistent.sock", ["/nonexistent.sock", "does not exist", "start dockerd"]),
        ("tcp://127.0.0.1:1", ["127.0.0.1:1", "connection refused", "DOCKER_HOST"]),
        ("nonsense", ["not an engine address"]),
    ],
)
def test_connect_errors_are_one_line_with_the_fix(monkeypatch, host, words):
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(EngineError) as info:
        engine.connect()
    msg = str(info.value)
    assert "\n" not in msg and "Traceback" not in msg
    assert "fix:" in msg
    for w in words:
        assert w in msg


def test_connect_over_ssh_failure_names_the_ssh_error(monkeypatch, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(
        "#!/bin/sh\necho 'ssh: connect to host gpu-host port 22: No route to host' >&2\nexit 255\n"
    )
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_HOST", "ssh://builder@gpu-host")
    with pytest.raises(EngineError) as info:
        engine.connect()
    msg = str(info.value)
    assert "\n" not in msg
    assert "No route to host" in msg and "`ssh builder@gpu-host docker system dial-stdio`" in msg


def test_connect_error_classification():
    """Permission denied and ssh failures cannot be staged as root here; the classifier is shared."""
    perm = OSError("Connection aborted.")
    perm.__cause__ = PermissionError(13, "Permission denied")
    msg = engine.explain_connect_error(perm, "")
    assert "docker group" in msg and "sudo" in msg and "\n" not in msg

    proxied = RuntimeError(
        "Error while fetching server API version: 404 Client Error for http://h:2375/version"
    )
    msg = engine.explain_connect_error(
        proxied, "tcp://h:2375", {"HTTP_PROXY": "http://u:pw12345@proxy:3128"}
    )
    assert "NO_PROXY" in msg and "HTTP 404" in msg and "pw12345" not in msg


def _fake_client(chunks):
    """Just enough of a DockerClient for build_image to consume a canned build stream."""
    from types import SimpleNamespace

    return SimpleNamespace(api=SimpleNamespace(build=lambda **kw: iter(chunks), close=lambda: None))


def test_build_disk_full_is_an_engine_error_with_the_fix(tmp_path):
    ctx = write_context(tmp_path / "ctx", "FROM x\nRUN make\n")
    chunks = [
        {"stream": "Step 2/2 : RUN make\n"},
        {"stream": "cc1plus: fatal error: cannot write: No space left on device\n"},
        {"error": "The command '/bin/sh -c make' returned a non-zero code: 1", "errorDetail": {"code": 1}},
    ]
    with pytest.raises(EngineError, match="invoke clean") as info:
        engine.build_image(_fake_client(chunks), ctx, "t:1", allow_pull=True)
    assert "\n" not in str(info.value)


def test_build_exit_137_is_not_reported_as_oom(tmp_path):
    """A RUN step that exits 137 was SIGKILLed, by the OOM killer or by anything else: the image
    build's container is gone, its OOMKilled unknown, so the log decides (diagnose), not the code."""
    ctx = write_context(tmp_path / "ctx", "FROM x\nRUN make\n")
    chunks = [
        {"stream": "Step 2/2 : RUN make\nKilled\n"},
        {
            "error": "The command '/bin/sh -c make' returned a non-zero code: 137",
            "errorDetail": {"code": 137, "message": "x"},
        },
    ]
    with pytest.raises(engine.StepFailed) as info:
        engine.build_image(_fake_client(chunks), ctx, "t:1", allow_pull=True)
    assert info.value.returncode == 137 and not info.value.oom_killed
    assert "out of memory" not in str(info.value)


def test_base_image_refs_resolve_args_and_skip_stages():
    df = """
    ARG BASE=buildctl/base:bookworm
    ARG OTHER
    FROM --platform=linux/amd64 ${BASE} AS build
    FROM build AS second
    FROM $OTHER
    FROM scratch
    """
    assert engine.base_image_refs(textwrap.dedent(df), {}) == ["buildctl/base:bookworm"]
    assert engine.base_image_refs(textwrap.dedent(df), {"BASE": "x:1", "OTHER": "y:2"}) == ["x:1", "y:2"]


def test_mask_literals_userinfo_and_token_params():
    text = (
        "GET https://user:p%40ss@pypi.corp/simple?a=1&token=abc123xyz&X-Amz-Signature=deadbeef "
        "git clone https://ghp_tokenvalue1@github.com/o/r ssh://git@github.com/o/r p@ss hunter22"
    )
    out = secrets.mask(text, ["hunter22", *secrets.url_secrets("https://user:p%40ss@pypi.corp/")])
    assert "p%40ss" not in out and "p@ss" not in out and "hunter22" not in out
    assert "https://***@pypi.corp/simple?a=1&token=***&X-Amz-Signature=***" in out
    assert "https://***@github.com/o/r" in out
    assert "ssh://git@github.com/o/r" in out  # a bare ssh user name is not a secret


def test_mask_url():
    assert secrets.mask_url("http://u:pw@proxy:3128") == "http://***@proxy:3128"
    assert secrets.mask_url("https://h/x?private_token=zzz&b=2") == "https://h/x?private_token=***&b=2"
    assert secrets.mask_url("http://deb.debian.org/debian") == "http://deb.debian.org/debian"


def test_secret_values_from_env_and_site():
    class Site:
        http_proxy = "http://px:proxypass1@proxy:3128"
        https_proxy = None
        pip_index_url = "https://idx/simple?token=idxtoken9"
        pip_extra_index_urls = ("https://extra:extrapass@idx2/simple",)
        apt_mirror = None

    env = {
        "GITHUB_TOKEN": "ghs_valuevalue",
        "HOME": "/root",
        "ALL_PROXY": "socks5://a:allpass@h:1080",
        "CI": "true",
    }
    vals = secrets.secret_values_from_env_and_site(Site(), environ=env)
    assert {"proxypass1", "idxtoken9", "extrapass", "ghs_valuevalue", "allpass"} <= vals
    assert "/root" not in vals and "true" not in vals


def test_network_mode_default_is_the_engines_own():
    """One place says that the site's `network: default` (or none given) means the engine's own mode."""
    modes = [None, "", "default", "host", "bridge", "none"]
    assert [engine.network_mode_for(m) for m in modes] == [None, None, None, "host", "bridge", "none"]


def test_buildctl_labels():
    """One place writes the label set of buildctl's engine objects: buildctl=1 always (what clean selects)."""
    assert engine.buildctl_labels() == {"buildctl": "1"}
    assert engine.buildctl_labels({"buildctl.step": "compile"}, recipe="demo-cpu", namespace="ci-1") == {
        "buildctl": "1", "buildctl.recipe.loader": "demo-cpu", "buildctl.namespace": "ci-1", "buildctl.step": "compile"}
    assert engine.buildctl_labels({"attempt": 2}, namespace=None) == {"buildctl": "1", "attempt": "2"}
