"""Base images for hosts without a registry: `debootstrap --variant=minbase` + `docker import`.

The root file system is made in a temporary directory, streamed as a tar into the engine (no tar
file on disk) and removed afterwards, also on failure or interrupt. The image keeps the
/etc/apt/sources.list that debootstrap wrote (the mirror it used) and is labelled buildctl=1 and
buildctl.base-image=<the name it was made under> (how `invoke clean` tells it from images built FROM it).

    python -m buildctl.host.base_images bookworm [--mirror URL] [--tag REF] [--force] [--no-check-gpg]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests
from docker import errors as derr

from buildctl import engine, urls
from buildctl.errors import BuildctlError
from buildctl.host.apt_mirrors import (
    UBUNTU_SUITES,
    default_mirror,
)
from buildctl.recipe.fields import DISTROS
from buildctl.secrets import checked_argv, mask_url, url_secrets

DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
UBUNTU_KEYRING = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
SCRIPTS_DIR = "/usr/share/debootstrap/scripts"
# debootstrap lives in sbin, which is often missing from a user's PATH.
_SBIN = ("/usr/sbin", "/sbin")

LineSink = Callable[[str], None]


class BaseImageError(BuildctlError):
    """The base image could not be made (debootstrap missing, not root, bootstrap failed)."""


@dataclass(frozen=True)
class HostRun:
    """How debootstrap runs on this host: from `environ` (the command's: PATH, a proxy; never shown nor
    compared), its root file system under `tmpdir` (None: /var/tmp)."""

    environ: Mapping[str, str] = field(repr=False, compare=False)
    tmpdir: Path | None = None


def default_tag(distro: str) -> str:
    return f"buildctl/base:{distro}"


# ---------------------------------------------------------------------------------------------- debootstrap


def _is_root() -> bool:
    return os.geteuid() == 0


def _find_debootstrap() -> str | None:
    return shutil.which("debootstrap") or shutil.which("debootstrap", path=os.pathsep.join(_SBIN))


def debootstrap_command(distro: str, target: Path, mirror: str, *, no_check_gpg: bool = False) -> list[str]:
    """The debootstrap command line; BaseImageError when it cannot work on this host."""
    if distro not in DISTROS:
        raise BaseImageError(f"unknown distro {distro!r}; fix: use one of {', '.join(DISTROS)}")
    exe = _find_debootstrap()
    if exe is None:
        raise BaseImageError("debootstrap is not installed; fix: apt-get install debootstrap")
    if not _is_root():
        raise BaseImageError(
            "making a base image needs root (debootstrap creates device nodes and chroots); "
            "fix: run it with sudo, or `docker load` a base image made elsewhere"
        )
    cmd = [exe, "--variant=minbase"]
    if no_check_gpg:
        cmd.append("--no-check-gpg")
    elif distro in UBUNTU_SUITES:
        if not os.path.isfile(UBUNTU_KEYRING):
            raise BaseImageError(
                f"{distro} is Ubuntu and the Ubuntu archive keyring is missing ({UBUNTU_KEYRING}); "
                "fix: apt-get install ubuntu-keyring (or pass --no-check-gpg to skip signature checks)"
            )
        cmd.append(f"--keyring={UBUNTU_KEYRING}")
    elif not os.path.isfile(DEBIAN_KEYRING):
        raise BaseImageError(
            f"the Debian archive keyring is missing ({DEBIAN_KEYRING}); "
            "fix: apt-get install debian-archive-keyring (or pass --no-check-gpg)"
        )
    cmd += [distro, str(target), mirror]
    # An older debootstrap may lack the script for a newer suite; the family's script does it.
    if not os.path.exists(os.path.join(SCRIPTS_DIR, distro)):
        family = "gutsy" if distro in UBUNTU_SUITES else "sid"
        if os.path.exists(os.path.join(SCRIPTS_DIR, family)):
            cmd.append(os.path.join(SCRIPTS_DIR, family))
    return cmd


def _mounts_under(path: Path) -> list[str]:
    root = os.path.realpath(path)
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mnt = line.split()[4].encode().decode("unicode_escape")
                if mnt == root or mnt.startswith(root + "/"):
                    found.append(mnt)
    except OSError:
        pass
    return sorted(found, key=len, reverse=True)


def _remove_rootfs(path: Path) -> None:
    """Unmount what debootstrap left mounted (proc, sys, dev binds) below `path`, then delete it."""
    for mnt in _mounts_under(path):
        subprocess.run(checked_argv(["umount", "-l", mnt]), check=False, capture_output=True)
    left = _mounts_under(path)
    if left:
        raise BaseImageError(f"cannot unmount {left[0]}; fix: umount it by hand, then rm -rf {path}")
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _rootfs_dir(tmpdir: Path | None) -> Iterator[Path]:
    # /var/tmp rather than /tmp: the latter is often a noexec/nodev tmpfs, where a chroot cannot work.
    base = tmpdir or (Path("/var/tmp") if os.path.isdir("/var/tmp") else None)
    path = Path(tempfile.mkdtemp(prefix="buildctl-rootfs-", dir=str(base) if base else None))
    try:
        yield path
    finally:
        _remove_rootfs(path)


def _run_streamed(cmd: list[str], on_line: LineSink, what: str, environ: Mapping[str, str]) -> None:
    tail: list[str] = []
    env = {**environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.Popen(
        checked_argv(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", env=env
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail = (tail + [line])[-20:]
            on_line(line)
        rc = proc.wait()
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # debootstrap unmounts on INT
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise
    if rc != 0:
        hint = next(
            (ln for ln in reversed(tail) if ln.strip().startswith(("E:", "W:"))), tail[-1] if tail else ""
        )
        raise BaseImageError(f"{what} failed (exit code {rc}): {engine.one_line(hint, 300)}")


# ---------------------------------------------------------------------------------------------- import


def import_rootfs(
    client: docker.DockerClient,
    rootfs: Path,
    tag: str,
    *,
    labels: dict[str, str] | None = None,
    changes: tuple[str, ...] | list[str] = (),
) -> str:
    """Stream `tar -C rootfs -c .` into the engine as image `tag` (labelled with that name); the image id."""
    repo, _, tagpart = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    own = engine.buildctl_labels({**(labels or {}), engine.BASE_IMAGE_LABEL: f"{repo}:{tagpart}"})
    all_changes = [f"LABEL {k}={_quote(v)}" for k, v in own.items()] + list(changes)
    proc = subprocess.Popen(
        checked_argv(["tar", "-C", str(rootfs), "--numeric-owner", "--xattrs", "-c", "."]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        with engine.terminate_as_interrupt():
            answer = client.api.import_image(
                src=iter(lambda: proc.stdout.read(1 << 20), b""),
                repository=repo,
                tag=tagpart,
                changes=all_changes,
                stream_src=True,
            )
    except derr.APIError as e:
        raise engine.api_error(e, f"importing {tag}") from e
    except requests.exceptions.RequestException as e:
        raise engine.connection_lost(e, f"importing {tag}", client) from e
    finally:
        if proc.poll() is None:
            proc.stdout.close()
            proc.kill()
        rc = proc.wait()
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    if rc != 0:
        raise BaseImageError(f"tar of {rootfs} failed (exit code {rc}): {engine.one_line(err, 300)}")
    try:
        image_id = _imported_id(answer) or str(client.api.inspect_image(tag)["Id"])
        # Podman 4.3's Docker API imports as REPO:latest whatever tag it is given: name it as asked
        client.api.tag(image_id, repo, tagpart)
        if tagpart != "latest" and _image_id(client, f"{repo}:latest") == image_id:
            client.api.remove_image(f"{repo}:latest", noprune=True)
        return image_id
    except derr.APIError as e:
        raise engine.api_error(e, f"inspecting the imported {tag}") from e


def _imported_id(answer) -> str | None:
    """The image id an import answered with (its last JSON line's status), None if it named none."""
    for line in reversed(str(answer or "").splitlines()):
        with contextlib.suppress(ValueError, AttributeError):
            status = json.loads(line).get("status", "")
            if isinstance(status, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", status):
                return status
    return None


def _image_id(client, ref: str) -> str | None:
    facts = engine.inspect_image(client, ref)
    return str(facts["Id"]) if facts is not None else None


def _quote(v: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9._:/@+-]*", v):
        return v
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------------- main API


def make_base_image(
    client: docker.DockerClient,
    distro: str,
    *,
    host: HostRun,
    mirror: str | None = None,
    tag: str | None = None,
    on_line: LineSink | None = None,
    no_check_gpg: bool = False,
    labels: dict[str, str] | None = None,
) -> str:
    """debootstrap a minbase `distro` (as `host` says) and import it as `tag` (default buildctl/base:<distro>);
    the image id."""
    mirror = (mirror or default_mirror(distro)).rstrip("/")
    why = urls.problem(mirror) if "://" in mirror else None
    if why:  # a login tools read as a host name (it would stand in debootstrap's command line): not quoted
        raise BaseImageError(f"--mirror (value not shown): {why}")
    if url_secrets(mirror) or urls.login(mirror) is not None:
        raise BaseImageError(
            f"the mirror {mask_url(mirror)} carries credentials, which would be baked into the image's "
            "sources.list; fix: use a mirror without credentials"
        )
    tag = tag or default_tag(distro)
    emit = on_line or (lambda line: None)
    with _rootfs_dir(host.tmpdir) as rootfs:
        cmd = debootstrap_command(distro, rootfs, mirror, no_check_gpg=no_check_gpg)
        emit(f"$ {' '.join(cmd)}")
        with engine.terminate_as_interrupt():
            _run_streamed(cmd, emit, f"debootstrap {distro} from {mirror}", host.environ)
        # Leftovers of the bootstrap that do not belong in an image.
        for p in ("var/cache/apt/archives", "var/lib/apt/lists", "debootstrap"):
            target = rootfs / p
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        if child.name != "partial":
                            shutil.rmtree(child, ignore_errors=True)
                    elif child.name != "lock":
                        child.unlink(missing_ok=True)
        emit(f"importing {rootfs} as {tag}")
        image_id = import_rootfs(
            client,
            rootfs,
            tag,
            labels={engine.DISTRO_LABEL: distro, "buildctl.mirror": mirror, **(labels or {})},
            changes=['CMD ["/bin/bash"]'],
        )
    emit(f"made {tag} ({image_id})")
    return image_id


def ensure_base_image(client: docker.DockerClient, distro: str, *, host: HostRun, tag: str | None = None,
                      **options: Any) -> str:
    """The id of `tag` (default buildctl/base:<distro>), made with make_base_image (as `host` says, given
    `options`: its mirror, on_line, no_check_gpg, ...) only when missing."""
    tag = tag or default_tag(distro)
    found = _image_id(client, tag)
    if found is not None:
        return found
    return make_base_image(client, distro, host=host, tag=tag, **options)


def main(argv: list[str] | None = None, *, environ: Mapping[str, str]) -> int:
    """`python -m buildctl.host.base_images` (.ci/bootstrap's command line), from `environ`: the process's."""
    ap = argparse.ArgumentParser(prog="python -m buildctl.host.base_images", description=__doc__.split("\n\n")[0])
    ap.add_argument("distro", choices=DISTROS)
    ap.add_argument("--mirror", help="archive URL (default: the host's Debian mirror / archive.ubuntu.com)")
    ap.add_argument("--tag", help="image reference (default: buildctl/base:<distro>)")
    ap.add_argument("--force", action="store_true", help="make it even if the tag exists")
    ap.add_argument("--no-check-gpg", action="store_true",
                    help="skip archive signature checks (Ubuntu without ubuntu-keyring)")
    args = ap.parse_args(argv)

    def show(line: str) -> None:
        print(line, flush=True)

    try:
        client = engine.connect(environ=environ)
        fn = make_base_image if args.force else ensure_base_image
        image_id = fn(
            client,
            args.distro,
            mirror=args.mirror,
            tag=args.tag,
            on_line=show,
            no_check_gpg=args.no_check_gpg,
            host=HostRun(environ),
        )
    except BuildctlError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(f"{args.tag or default_tag(args.distro)} {image_id}")
    return 0


if __name__ == "__main__":  # a command line: it reads the environment, as the CLI does
    sys.exit(main(environ=os.environ))
