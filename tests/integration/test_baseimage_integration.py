"""buildctl.host.base_images against the real engine: the session's base image, and import of a (fake) debootstrap.

Mirror choice, the debootstrap command line and its errors (no engine) are in tests/unit/test_baseimage.py."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from buildctl import engine
from buildctl.host import base_images
from buildctl.host.base_images import BaseImageError

integration = pytest.mark.integration


@integration
def test_session_base_image_is_usable(docker_client, base_image, test_labels):
    assert engine.image_exists(docker_client, base_image)
    res = engine.run_container(docker_client, engine.ContainerSpec(base_image, [
            "bash",
            "-c",
            "cat /etc/apt/sources.list; . /etc/os-release; echo codename=$VERSION_CODENAME; apt-get --version | head -1",
        ], labels=test_labels))
    assert res.exit_code == 0, res.log
    assert "codename=bookworm" in res.log
    assert any(ln.startswith("deb http") and " bookworm " in ln for ln in res.log.splitlines())
    assert "apt " in res.log


@integration
def test_ensure_base_image_reuses_the_existing_tag(docker_client, base_image, monkeypatch):
    def must_not_run(*a, **k):
        raise AssertionError("make_base_image called although the image exists")

    monkeypatch.setattr(base_images, "make_base_image", must_not_run)
    image_id = base_images.ensure_base_image(docker_client, "bookworm", host=base_images.HostRun(os.environ))
    assert image_id == docker_client.api.inspect_image(base_image)["Id"]


@integration
def test_cli_reports_the_existing_image(base_image, capsys):
    assert base_images.main(["bookworm"], environ=os.environ) == 0
    assert capsys.readouterr().out.strip().startswith(f"{base_image} sha256:")


FAKE_DEBOOTSTRAP = """#!/bin/sh
# A stand-in for debootstrap: records its arguments and makes a tiny root file system.
echo "$@" > "$FAKE_ARGS"
for last; do :; done
if [ -n "$FAKE_FAIL" ]; then echo "I: Retrieving InRelease"; echo "E: Failed getting release file $last"; exit 1; fi
eval target=\\${$(($# - 1))}
mkdir -p "$target/etc/apt" "$target/var/lib/apt/lists/partial" "$target/var/cache/apt/archives/partial"
echo "deb $last $2 main" > "$target/etc/apt/sources.list"
touch "$target/var/lib/apt/lists/junk_Packages" "$target/var/cache/apt/archives/x.deb"
echo "I: Base system installed successfully."
"""


@pytest.fixture
def fake_debootstrap(monkeypatch, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "debootstrap"
    exe.write_text(FAKE_DEBOOTSTRAP)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ARGS", str(tmp_path / "args"))
    monkeypatch.setattr(base_images, "_SBIN", ())
    monkeypatch.setattr(base_images, "_is_root", lambda: True)
    work = tmp_path / "work"
    work.mkdir()
    return tmp_path / "args", work


def _read_file(client, image: str, path: str) -> str:
    cid = client.api.create_container(image, command=["/none"])["Id"]
    try:
        chunks, _ = client.api.get_archive(cid, path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tf:
            member = tf.getmembers()[0]
            return tf.extractfile(member).read().decode()
    finally:
        client.api.remove_container(cid, force=True)


def _exists(client, image: str, path: str) -> bool:
    cid = client.api.create_container(image, command=["/none"])["Id"]
    try:
        client.api.get_archive(cid, path)
        return True
    except Exception:
        return False
    finally:
        client.api.remove_container(cid, force=True)


@integration
def test_make_base_image_runs_debootstrap_and_imports(docker_client, fake_debootstrap, test_labels):
    args_file, work = fake_debootstrap
    tag = f"buildctl-test/base:{test_labels['buildctl.test']}"
    lines: list[str] = []
    image_id = base_images.make_base_image(
        docker_client,
        "trixie",
        host=base_images.HostRun(os.environ, tmpdir=work),
        mirror="http://mirror.example/debian/",
        tag=tag,
        on_line=lines.append,
        labels=test_labels,
    )
    try:
        args = args_file.read_text().split()
        assert args[0] == "--variant=minbase" and args[1] == "trixie"
        assert (
            args[2].startswith(str(work / "buildctl-rootfs-")) and args[3] == "http://mirror.example/debian"
        )
        assert "I: Base system installed successfully." in lines
        assert list(work.iterdir()) == []  # the root file system is gone
        attrs = docker_client.api.inspect_image(tag)
        assert attrs["Id"] == image_id
        labels = attrs["Config"]["Labels"]
        assert labels["buildctl"] == "1" and labels["buildctl.distro"] == "trixie"
        assert labels["buildctl.mirror"] == "http://mirror.example/debian"
        assert attrs["Config"]["Cmd"] == ["/bin/bash"]
        assert (
            _read_file(docker_client, tag, "/etc/apt/sources.list")
            == "deb http://mirror.example/debian trixie main\n"
        )
        assert not _exists(docker_client, tag, "/var/lib/apt/lists/junk_Packages")
        assert _exists(docker_client, tag, "/var/lib/apt/lists/partial")
    finally:
        docker_client.images.remove(tag, force=True)


@integration
def test_failed_debootstrap_is_one_line_and_cleans_up(
    docker_client, fake_debootstrap, monkeypatch, test_labels
):
    _, work = fake_debootstrap
    monkeypatch.setenv("FAKE_FAIL", "1")
    tag = f"buildctl-test/base-fail:{test_labels['buildctl.test']}"
    with pytest.raises(BaseImageError) as info:
        base_images.make_base_image(
            docker_client, "bookworm", host=base_images.HostRun(os.environ, tmpdir=work),
            mirror="http://mirror.example/debian", tag=tag,
        )
    msg = str(info.value)
    assert "\n" not in msg and "exit code 1" in msg and "E: Failed getting release file" in msg
    assert list(work.iterdir()) == []
    assert not engine.image_exists(docker_client, tag)
