"""buildctl.host.base_images: mirror choice, debootstrap command line and errors (no engine).

The import into the real engine is in tests/integration/test_baseimage_integration.py."""

from __future__ import annotations

import textwrap

import pytest

from buildctl.host import apt_mirrors, base_images
from buildctl.host.base_images import BaseImageError

# ---------------------------------------------------------------------------------------------- mirror


def test_default_mirror_from_one_line_sources(tmp_path):
    (tmp_path / "sources.list").write_text(
        textwrap.dedent(
            """
            # deb http://commented.example/debian bookworm main
            deb http://security.debian.org/debian-security bookworm-security main
            deb [arch=amd64 signed-by=/k.gpg] http://mirror.corp.example/debian/ bookworm main
            deb http://deb.debian.org/debian bookworm main
            """
        )
    )
    assert base_images.default_mirror("bookworm", tmp_path) == "http://mirror.corp.example/debian"
    assert base_images.default_mirror("noble", tmp_path) == apt_mirrors.UBUNTU_MIRROR


def test_default_mirror_from_deb822_sources(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        textwrap.dedent(
            """
            Types: deb-src
            URIs: http://src-only.example/debian
            Suites: bookworm

            Types: deb
            URIs: http://disabled.example/debian
            Suites: bookworm
            Enabled: no

            Types: deb
            # a comment
            URIs: http://snapshot.debian.org/archive/debian/20250520T000000Z
             http://second.example/debian
            Suites: bookworm bookworm-updates
            Components: main
            """
        )
    )
    (d / "other.list").write_text("deb https://nodesource.example/node_20.x nodistro main\n")
    (d / "ignored.list.disabled").write_text("deb http://ignored.example/debian bookworm main\n")
    uris = apt_mirrors.host_apt_uris(tmp_path)
    assert uris == [  # apt's order: sources.list.d by file name
        "http://snapshot.debian.org/archive/debian/20250520T000000Z",
        "http://second.example/debian",
        "https://nodesource.example/node_20.x",
    ]
    assert (
        base_images.default_mirror("trixie", tmp_path)
        == "http://snapshot.debian.org/archive/debian/20250520T000000Z"
    )


def test_default_mirror_falls_back(tmp_path):
    (tmp_path / "sources.list").write_text("deb http://archive.ubuntu.com/ubuntu jammy main\n")
    assert base_images.default_mirror("bookworm", tmp_path) == "http://deb.debian.org/debian"


# ---------------------------------------------------------------------------------------------- command


def test_missing_debootstrap_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(base_images, "_SBIN", ())
    with pytest.raises(BaseImageError, match="apt-get install debootstrap"):
        base_images.debootstrap_command("bookworm", tmp_path / "root", "http://m/debian")


def test_not_root_is_explained(monkeypatch, tmp_path):
    monkeypatch.setattr(base_images, "_find_debootstrap", lambda: "/usr/sbin/debootstrap")
    monkeypatch.setattr(base_images, "_is_root", lambda: False)
    with pytest.raises(BaseImageError, match="needs root") as info:
        base_images.debootstrap_command("bookworm", tmp_path / "root", "http://m/debian")
    assert "\n" not in str(info.value)


def test_ubuntu_needs_its_keyring_or_the_flag(monkeypatch, tmp_path):
    monkeypatch.setattr(base_images, "_find_debootstrap", lambda: "/usr/sbin/debootstrap")
    monkeypatch.setattr(base_images, "_is_root", lambda: True)
    monkeypatch.setattr(base_images, "UBUNTU_KEYRING", str(tmp_path / "absent.gpg"))
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "gutsy").write_text("# ubuntu family script\n")
    monkeypatch.setattr(base_images, "SCRIPTS_DIR", str(scripts))
    with pytest.raises(BaseImageError, match="ubuntu-keyring"):
        base_images.debootstrap_command("noble", tmp_path / "root", apt_mirrors.UBUNTU_MIRROR)
    cmd = base_images.debootstrap_command(
        "noble", tmp_path / "root", apt_mirrors.UBUNTU_MIRROR, no_check_gpg=True
    )
    assert cmd == [
        "/usr/sbin/debootstrap",
        "--variant=minbase",
        "--no-check-gpg",
        "noble",
        str(tmp_path / "root"),
        apt_mirrors.UBUNTU_MIRROR,
        str(scripts / "gutsy"),  # an older debootstrap without a noble script
    ]


def test_debian_command_line(monkeypatch, tmp_path):
    monkeypatch.setattr(base_images, "_find_debootstrap", lambda: "/usr/sbin/debootstrap")
    monkeypatch.setattr(base_images, "_is_root", lambda: True)
    monkeypatch.setattr(base_images, "DEBIAN_KEYRING", __file__)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "bookworm").write_text("")
    monkeypatch.setattr(base_images, "SCRIPTS_DIR", str(scripts))
    cmd = base_images.debootstrap_command("bookworm", tmp_path / "r", "http://m/debian")
    assert cmd == [
        "/usr/sbin/debootstrap",
        "--variant=minbase",
        "bookworm",
        str(tmp_path / "r"),
        "http://m/debian",
    ]


def test_mirror_with_credentials_is_refused():
    with pytest.raises(BaseImageError, match="credentials") as info:
        base_images.make_base_image(None, "bookworm", host=base_images.HostRun({}),
                                    mirror="http://u:hunter22@m.example/debian")
    assert "hunter22" not in str(info.value)
