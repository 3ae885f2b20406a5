"""The archive a base image is bootstrapped from: the host's own Debian mirror (its apt sources, one-line
or deb822), else deb.debian.org; Ubuntu's archive for Ubuntu suites."""

from __future__ import annotations

import re
from pathlib import Path

DEBIAN_SUITES = ("bookworm", "trixie")
UBUNTU_SUITES = ("jammy", "noble")
DEBIAN_FALLBACK_MIRROR = "http://deb.debian.org/debian"
UBUNTU_MIRROR = "http://archive.ubuntu.com/ubuntu"
APT_SOURCES = Path("/etc/apt")


def _is_debian_archive(uri: str) -> bool:
    """A Debian package archive (not security, ports or another distribution's)."""
    u = uri.rstrip("/").lower()
    if not u.startswith(("http://", "https://", "ftp://")):
        return False
    host = re.sub(r"^\w+://", "", u).split("/", 1)[0].split("@")[-1].split(":")[0]
    if "security" in u or "ubuntu" in u or "debian-ports" in u:
        return False
    return u.endswith("/debian") or host == "debian.org" or host.endswith(".debian.org")


def host_apt_uris(apt_dir: Path = APT_SOURCES) -> list[str]:
    """The deb URIs of the host's apt sources, in apt's order (sources.list, then sources.list.d)."""
    uris: list[str] = []
    files: list[Path] = []
    if (apt_dir / "sources.list").is_file():
        files.append(apt_dir / "sources.list")
    d = apt_dir / "sources.list.d"
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources") and p.is_file())
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        if f.suffix == ".sources":
            uris += _deb822_uris(text)
        else:
            for line in text.splitlines():
                line = line.split("#", 1)[0].strip()
                m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", line)
                if m:
                    uris.append(m.group(1))
    return uris


def _deb822_uris(text: str) -> list[str]:
    uris: list[str] = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        uris += fields.get("uris", "").split()
    return uris


def default_mirror(distro: str, apt_dir: Path = APT_SOURCES) -> str:
    """Debian: the first Debian archive in the host's apt sources, else deb.debian.org; Ubuntu: archive.ubuntu.com."""
    if distro in UBUNTU_SUITES:
        return UBUNTU_MIRROR
    for uri in host_apt_uris(apt_dir):
        if _is_debian_archive(uri):
            return uri.rstrip("/")
    return DEBIAN_FALLBACK_MIRROR
