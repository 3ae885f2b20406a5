"""Hostile archives, bundles and pre-staged files: each case proved dangerous, then refused cleanly.

What arrives from outside a recipe is untrusted: the outputs a build or verification container leaves
in /work/out and /verify/out (copied out as tar streams), repro bundles (`invoke repro BUNDLE`, a
folder or a .tar.gz from anyone), the source carried inside a bundle, and files pre-staged in a
download cache. Every case below says in its docstring (or its `old` column) what the code before
this file did with it, measured on the reference host's Python 3.11.7; the test then shows the refusal:
a one-line InputError naming the archive, the member and the fix (exit 2 from the CLI), nothing
written outside the destination, nothing left in the destination, no temporary folder left behind.

Danger is also proved here, version-independently, by extracting each crafted archive with plain
`tarfile` (what an `extractall` without a filter does): the archive really writes outside its folder,
or really creates the special file. For CVE-2025-4517 the test also checks the stdlib's own
`filter="data"`: bypassed on this host's Python, refused on a fixed one.

No engine here: the cases that need one (a container that leaves a symlink or a terabyte-sized
sparse file in /work/out, bundles that need an image build) are in
tests/integration/test_hostile_archives_integration.py.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from repro_helpers import one_line_exit_2, repro_here

from buildctl import archive, engine
from buildctl.engine import transfer
from buildctl.errors import InputError
from buildctl.failure import repro
from buildctl.recipe.schema import Download
from buildctl.store import downloads

# CVE-2025-4517 and relatives were fixed in 3.11.13, 3.12.11 and 3.13.4 (python/cpython#135034).
STDLIB_FILTER_BYPASSABLE = (
    sys.version_info < (3, 11, 13)
    or (3, 12) <= sys.version_info < (3, 12, 11)
    or (3, 13) <= sys.version_info < (3, 13, 4)
)
VICTIM = b"the user's file\n"


# ---------------------------------------------------------------------------------------------- making tars


def _add(tf: tarfile.TarFile, name: str, *, kind: bytes = tarfile.REGTYPE, link: str = "", data: bytes = b"",
         mode: int = 0o644, size: int | None = None) -> None:
    ti = tarfile.TarInfo(name)
    ti.type, ti.linkname, ti.mode, ti.mtime = kind, link, mode, 1_700_000_000
    if kind == tarfile.CHRTYPE:
        ti.devmajor, ti.devminor = 1, 3  # /dev/null's numbers: harmless if it ever got made
    if kind in (tarfile.REGTYPE, tarfile.AREGTYPE):
        ti.size = len(data) if size is None else size
        tf.addfile(ti, io.BytesIO(data) if size is None else _Zeros(size))
    else:
        tf.addfile(ti)


class _Zeros(io.RawIOBase):
    """`size` zero bytes without holding them: a big member costs nothing to write into a test tar."""

    def __init__(self, size: int):
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def _tar(build, *, gz: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tf:
        build(tf)
    return buf.getvalue()


def cve_2025_4517(dest_len: int, top: str = ""):
    """The CPython advisory's technique: a chain of symlinks to long folder names, whose expansion outgrows
    PATH_MAX, so that `os.path.realpath` (and with it filter="data") stops resolving, then a link that
    climbs out, a hard link through it to ../victim, that hard link overwritten, and a new file beside.
    Component lengths are tuned to the destination's path length, as an attacker who knows it does."""
    steps = "abcdefghijklmnop"
    comp = "d" * ((os.pathconf("/", "PC_PATH_MAX") - dest_len - 1) // (len(steps) + 1))
    pre = f"{top}/" if top else ""

    def build(tf):
        if top:
            _add(tf, top, kind=tarfile.DIRTYPE, mode=0o755)
        path = ""
        for s in steps:
            _add(tf, pre + os.path.join(path, comp), kind=tarfile.DIRTYPE, mode=0o777)
            _add(tf, pre + os.path.join(path, s), kind=tarfile.SYMTYPE, link=comp)
            path = os.path.join(path, comp)
        linkpath = os.path.join(*steps, "l" * 254)
        _add(tf, pre + linkpath, kind=tarfile.SYMTYPE, link=os.path.join(*[".."] * len(steps)))
        _add(tf, pre + "escape", kind=tarfile.SYMTYPE, link=os.path.join(linkpath, ".."))
        _add(tf, pre + "flaglink", kind=tarfile.LNKTYPE, link=pre + "escape/victim")
        _add(tf, pre + "flaglink", data=b"overwritten\n")
        _add(tf, pre + "escape/newfile", data=b"new\n")

    return build


def _absolute(sandbox: Path):
    return lambda tf: _add(tf, str(sandbox / "victim"), data=b"overwritten\n")


# name: (builder(sandbox, dest), caps, what the problem says, what plain tarfile does with it)
CORPUS = {
    "symlink-then-write-through": (
        lambda sb, d: lambda tf: (_add(tf, "up", kind=tarfile.SYMTYPE, link=".."),
                                  _add(tf, "up/victim", data=b"overwritten\n")),
        None, "a symbolic link to '..'", "overwrites ../victim"),
    "hardlink-out-then-overwrite": (
        lambda sb, d: lambda tf: (_add(tf, "h", kind=tarfile.LNKTYPE, link="../victim"),
                                  _add(tf, "h", data=b"overwritten\n")),
        None, "a hard link to '../victim'", "overwrites ../victim"),
    "absolute-path": (lambda sb, d: _absolute(sb), None, "an absolute path", "overwrites the absolute path"),
    "dotdot-path": (lambda sb, d: lambda tf: _add(tf, "../victim", data=b"overwritten\n"),
                    None, "a '..' component", "overwrites ../victim"),
    "cve-2025-4517": (lambda sb, d: cve_2025_4517(len(str(d))), None, "a symbolic link",
                      "overwrites ../victim and writes ../newfile"),
    "character-device": (lambda sb, d: lambda tf: _add(tf, "null", kind=tarfile.CHRTYPE),
                         None, "a character device", "creates a device node"),
    "fifo": (lambda sb, d: lambda tf: _add(tf, "versions.txt", kind=tarfile.FIFOTYPE),
             None, "a fifo", "creates a fifo (a reader of versions.txt then hangs)"),
    "terminal-escape-in-name": (lambda sb, d: lambda tf: _add(tf, "\x1b]0;owned\x07x.whl", data=b"w"),
                                None, "a control character '\\x1b'", "creates the name with its escape"),
    "oversized-file": (lambda sb, d: lambda tf: _add(tf, "big.whl", size=64 << 20),
                       archive.Caps(total_bytes=1 << 30, members=10, file_bytes=1 << 20),
                       "67108864 bytes, over the 1048576-byte cap", "writes all 64 MiB"),
    "too-many-bytes": (lambda sb, d: lambda tf: [_add(tf, f"f{i}", size=1 << 20) for i in range(8)],
                       archive.Caps(total_bytes=4 << 20, members=100, file_bytes=4 << 20),
                       "past its 4194304-byte cap", "writes all 8 MiB"),
    "too-many-members": (lambda sb, d: lambda tf: [_add(tf, f"f{i}") for i in range(50)],
                         archive.Caps(total_bytes=1 << 20, members=20, file_bytes=1 << 20),
                         "more than 20 members", "writes all 50 files"),
    "pax-header-bomb": (lambda sb, d: _pax_bomb, None, "metadata header", "reads an 8 MiB header into memory"),
    "second-entry-same-path": (lambda sb, d: lambda tf: (_add(tf, "a.whl", data=b"1"), _add(tf, "a.whl", data=b"2")),
                               None, "a second entry of the same path", "keeps the last one silently"),
}


def _pax_bomb(tf: tarfile.TarFile) -> None:
    value = "x" * (8 << 20)
    record = f" comment={value}\n"
    n = len(record) + 1
    while len(f"{n}{record}") != n:
        n += 1
    body = f"{n}{record}".encode()
    head = tarfile.TarInfo("././@PaxHeader")
    head.type, head.size = tarfile.XHDTYPE, len(body)
    tf.fileobj.write(head.tobuf(tarfile.USTAR_FORMAT))
    tf.fileobj.write(body + bytes(-len(body) % 512))
    tf.offset += 512 + len(body) + (-len(body) % 512)
    _add(tf, "after", data=b"x")


def _sandbox(tmp_path: Path) -> tuple[Path, Path]:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "victim").write_bytes(VICTIM)
    return sandbox, sandbox / "dest"


def _outside_changed(sandbox: Path, allowed: set[str]) -> list[str]:
    """What differs outside the destination: the victim's bytes, or any new entry beside it."""
    changed = [] if (sandbox / "victim").read_bytes() == VICTIM else ["victim"]
    return changed + sorted(p.name for p in sandbox.iterdir() if p.name not in {"victim", *allowed})


def _plain_tarfile(data: bytes, dest: Path, filter: str) -> None:
    dest.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter=filter)


# ---------------------------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_plain_tarfile_shows_the_danger(case, tmp_path):
    """The proof half: extracted by tarfile without a filter, each archive does what its `old` column says."""
    make, _caps, _problem, effect = CORPUS[case]
    sandbox, dest = _sandbox(tmp_path)
    data = _tar(make(sandbox, dest))
    if case == "pax-header-bomb":
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            assert [m.name for m in tf.getmembers()] == ["after"]  # the 8 MiB header was read whole
        return
    _plain_tarfile(data, dest, "fully_trusted")
    escaped = _outside_changed(sandbox, {"dest"})
    if "../" in effect or "absolute" in effect:
        assert "victim" in escaped, effect
        if case == "cve-2025-4517":
            assert "newfile" in escaped
        return
    made = {p.name: p for p in dest.iterdir()}
    if case == "character-device":
        assert os.stat(made["null"], follow_symlinks=False).st_rdev == os.makedev(1, 3)
    elif case == "fifo":
        assert os.path.exists(made["versions.txt"]) and not made["versions.txt"].is_file()
    elif case == "terminal-escape-in-name":
        assert "\x1b]0;owned\x07x.whl" in made
    elif case == "second-entry-same-path":
        assert made["a.whl"].read_bytes() == b"2"
    else:  # the caps: everything lands
        assert sum(p.stat().st_size for p in made.values()) >= (64 << 20 if case == "oversized-file" else 0)
        assert len(made) == {"oversized-file": 1, "too-many-bytes": 8, "too-many-members": 50}[case]


def test_stdlib_data_filter_is_bypassed_on_this_python(tmp_path):
    """What the old code relied on: `extractall(filter="data")` (repro._open_bundle) lets CVE-2025-4517
    overwrite ../victim and write ../newfile on Python 3.11.7; a fixed Python refuses it."""
    sandbox, dest = _sandbox(tmp_path)
    data = _tar(cve_2025_4517(len(str(dest))))
    try:
        _plain_tarfile(data, dest, "data")
    except (tarfile.FilterError, OSError):
        assert not STDLIB_FILTER_BYPASSABLE, "refused, yet this Python is in the affected range"
    else:
        assert STDLIB_FILTER_BYPASSABLE
        assert _outside_changed(sandbox, {"dest"}) == ["victim", "newfile"]


@pytest.mark.parametrize("gz", [False, True], ids=["tar", "tar.gz"])
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_extract_refuses(case, gz, tmp_path):
    """The fix: one-line InputError naming archive, member and fix; nothing written anywhere."""
    make, caps, problem, _effect = CORPUS[case]
    sandbox, dest = _sandbox(tmp_path)
    src = tmp_path / ("hostile.tar.gz" if gz else "hostile.tar")
    src.write_bytes(_tar(make(sandbox, dest), gz=gz))
    with pytest.raises(InputError) as info:
        archive.extract(src, dest, what=f"bundle {src}", fix="use a bundle written by buildctl",
                        caps=caps or archive.Caps())
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"bundle {src}: ") and msg.endswith("; fix: use a bundle written by buildctl")
    assert problem in msg, msg
    assert _outside_changed(sandbox, set()) == []  # no dest, no .dest.extract-* left, victim intact


def test_extract_names_the_link_and_its_target(tmp_path):
    data = _tar(lambda tf: (_add(tf, "out", kind=tarfile.DIRTYPE),
                            _add(tf, "out/x.whl", kind=tarfile.SYMTYPE, link="/etc/shadow")))
    with pytest.raises(InputError, match=r"member 'out/x.whl': a symbolic link to '/etc/shadow' \(only regular"):
        archive.extract(io.BytesIO(data), tmp_path / "dest", what="w", fix="f", strip="out")
    assert list(tmp_path.iterdir()) == []


def test_extract_keeps_regular_files_and_folders(tmp_path):
    """What buildctl itself writes comes through whole: nested folders, exec bits, mtimes, the top stripped,
    and a destination folder already there is replaced (no stale wheel from an earlier attempt)."""
    def build(tf):
        _add(tf, "out", kind=tarfile.DIRTYPE, mode=0o755)
        _add(tf, "out/torch-2.0-cp311.whl", data=b"wheel")
        _add(tf, "out/bin/tool", data=b"#!/bin/sh\n", mode=0o4755)  # setuid is dropped, exec kept
        _add(tf, "out/pip.conf", data=b"[global]\n", mode=0o600)  # private stays private
        _add(tf, "out/shared.txt", data=b"s", mode=0o666)  # no group/other write
        _add(tf, "out/./deep//a/b/c.txt", data=b"c")
        _add(tf, "out/empty", kind=tarfile.DIRTYPE)
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "stale.whl").write_bytes(b"old attempt")
    archive.extract(io.BytesIO(_tar(build)), dest, what="w", fix="f", strip="out")
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert files == ["bin", "bin/tool", "deep", "deep/a", "deep/a/b", "deep/a/b/c.txt", "empty", "pip.conf",
                     "shared.txt", "torch-2.0-cp311.whl"]
    assert (dest / "torch-2.0-cp311.whl").read_bytes() == b"wheel"
    assert (dest / "bin" / "tool").stat().st_mode & 0o7777 == 0o755
    assert (dest / "pip.conf").stat().st_mode & 0o7777 == 0o600
    assert (dest / "shared.txt").stat().st_mode & 0o7777 == 0o644
    assert (dest / "torch-2.0-cp311.whl").stat().st_mtime == 1_700_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# ---------------------------------------------------------------------------------------------- build outputs


class _ArchiveAPI:
    """The engine's get_archive answer, replayed from bytes (what a remote engine, or a man in the middle
    of tcp://, can send): the archive logic under test is real, only the transport is canned."""

    def __init__(self, data: bytes):
        self.data, self.read = data, 0

    def get_archive(self, cid, path):
        def chunks():
            for i in range(0, len(self.data), 1 << 16):
                self.read = i + (1 << 16)
                yield self.data[i:i + (1 << 16)]
        return chunks(), {"name": "out", "mode": (1 << 31) | 0o755}


class _Client:
    def __init__(self, data: bytes):
        self.api = _ArchiveAPI(data)


def test_output_stream_with_cve_2025_4517_is_refused(tmp_path):
    """Before: transfer.get_output ran tarfile's data filter member by member and extracted with
    "fully_trusted"; this stream overwrote ../victim and wrote ../newfile (measured on 3.11.7)."""
    sandbox, dest = _sandbox(tmp_path)
    dest.mkdir()
    client = _Client(_tar(cve_2025_4517(len(str(dest)), top="out")))
    with pytest.raises(InputError) as info:
        transfer.get_output(client, "c0ffee" * 4, "/work/out", dest)
    msg = str(info.value)
    assert msg.startswith("the output /work/out of container c0ffeec0ffee: member 'out/a': a symbolic link")
    assert "fix: write only regular files and folders into /work/out" in msg and "\n" not in msg
    assert _outside_changed(sandbox, {"dest"}) == [] and list(dest.iterdir()) == []


def test_output_with_a_terabyte_file_is_refused_at_its_header(tmp_path, monkeypatch):
    """Before: no cap; a container's `truncate -s 1T /work/out/x.whl` (sparse: free in the container)
    was streamed whole onto the host disk (a 256 MiB member was written out in full, measured)."""
    monkeypatch.setattr(transfer, "OUTPUT_CAPS", archive.Caps(total_bytes=1 << 20, members=10, file_bytes=1 << 20))
    top, big = tarfile.TarInfo("out"), tarfile.TarInfo("out/x.whl")
    top.type, big.size = tarfile.DIRTYPE, 1 << 40
    data = top.tobuf() + big.tobuf() + bytes(64 << 20)
    client = _Client(data)  # its first 64 MiB: the refusal comes before the data is read
    dest = tmp_path / "out"
    with pytest.raises(InputError, match=r"member 'out/x.whl': 1099511627776 bytes, over the 1048576-byte cap"):
        transfer.get_output(client, "c" * 64, "/work/out", dest)
    assert client.api.read <= 4 << 20 and not dest.exists()  # the read-ahead of two buffers at most
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------- pre-staged downloads


def test_tampered_prestaged_file_with_restored_mtime_is_caught(tmp_path):
    """Before: the sha256 was remembered in .<name>.sha256 keyed by size and mtime, so a same-size
    tampered file with its mtime restored (`touch -d`) logged "sha256 verified" (measured), and so did a
    forged sidecar. Now the file is hashed on every build."""
    good = b"A" * 4096
    f = tmp_path / "cuda_12.8.0_linux.run"
    f.write_bytes(good)
    dl = Download(url="https://developer.download.nvidia.com/cuda_12.8.0_linux.run",
                  sha256=hashlib.sha256(good).hexdigest())
    staged, log = downloads.stage([("cuda", dl)], tmp_path)
    assert log == ["buildctl: using pre-staged cuda_12.8.0_linux.run (sha256 verified)"]
    st = f.stat()
    f.write_bytes(b"B" * 4096)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    (tmp_path / f".{f.name}.sha256").write_text(json.dumps({"size": 4096, "mtime_ns": st.st_mtime_ns,
                                                             "sha256": dl.sha256}))  # a forged old-style sidecar
    with pytest.raises(engine.StepFailed) as info:
        downloads.stage([("cuda", dl)], tmp_path)
    assert f"sha256 mismatch for {f.name}: expected {dl.sha256}, got {hashlib.sha256(b'B' * 4096).hexdigest()}" \
        in str(info.value)


# ---------------------------------------------------------------------------------------------- never pull


def test_base_image_refs_resolve_unset_args_and_copy_from():
    """Before: `FROM ${UNSET}alpine` gave no ref (the "$?" placeholder skipped it) and COPY --from=IMAGE was
    not looked at, so the never-pull check passed and the classic builder pulled alpine."""
    assert engine.base_image_refs("FROM ${UNSET}alpine\n", {}) == ["alpine"]
    df = "ARG A\nARG B=${A:-x/y:1}\nFROM $B AS b\nFROM b\nCOPY --from=b /a /b\nCOPY --from=0 /a /b\n" \
         "COPY --from=alpine:3 /x /y\nFROM ${A:+never}scratch\nFROM ${A-}\n"
    assert engine.base_image_refs(df, {}) == ["x/y:1", "alpine:3"]
    assert engine.base_image_refs("ARG A\nFROM ${A:-z}\n", {"A": ""}) == ["z"]
    with pytest.raises(engine.EngineError, match="cannot tell which image"):
        engine.base_image_refs("FROM ${A:-${B}}x\n", {})


# ---------------------------------------------------------------------------------------------- bundles


def _valid_bundle(root: Path) -> Path:
    """A bundle as `invoke build` writes it: write_bundle on the real demo-cpu recipe, rendered (pure)."""
    from buildctl.cli.common import load_spec
    from buildctl.render.rendering import render

    spec, _ = load_spec("demo-cpu", [], preflight=False)
    rendered = render(spec)
    return repro.write_bundle(
        spec=spec,
        rendered=rendered,
        context_dir=None,
        secrets=[],
        root=root,
        failure=repro.FailedStep(step="compile", exit_code=2, log="boom", diagnosis=None),
        replay=repro.ReplayFacts(
            image_id="sha256:" + "0" * 64,
            command=["/usr/local/bin/buildctl-build"],
            env={"MAX_JOBS": "2", "HTTPS_PROXY": "http://user:tok3n@proxy:3128"},
            volumes={
                "buildctl-work-demo-cpu-0123456789abcdef": "/work",
                "buildctl-cache-ccache-0123456789ab": "/cache",
            },
            network="host",
            memory="2g",
        ),
    )


@pytest.fixture(scope="module")
def _written_bundle(tmp_path_factory) -> Path:
    return _valid_bundle(tmp_path_factory.mktemp("written"))


@pytest.fixture
def valid_bundle(_written_bundle):
    """valid_bundle(root): a copy, under root as write_bundle puts it, of the one bundle the module writes
    (writing packs demofw's source: 0.1 s a bundle on a loaded machine)."""
    def copy_to(root: Path) -> Path:
        return Path(shutil.copytree(_written_bundle, root / _written_bundle.relative_to(_written_bundle.parents[1]),
                                    symlinks=True))
    return copy_to


def test_buildctl_bundles_open_and_summarise(tmp_path):
    """The writer and the reader agree (folder and packed), and the summary masks every env value."""
    bundle = _valid_bundle(tmp_path)
    for given in (bundle, repro.pack(bundle)):
        with repro.open_bundle(given) as b:
            assert b.data.step == "compile" and b.bases == ("buildctl/base:bookworm",)
            text = "\n".join(repro.summary(b))
            shell = "\n".join(repro.summary(b, shell=True))
    assert "command: /usr/local/bin/buildctl-build" in text and "network: host, memory 2g" in text
    assert "a fresh volume buildctl-work-demo-cpu-0123456789abcdef-repro-… at /work" in text
    assert "env:     MAX_JOBS=***, HTTPS_PROXY=***" in text and "tok3n" not in text and "=2" not in text
    assert "command: bash, interactive" in shell


def _hostile(data: dict, case: str) -> None:
    if case == "host-root-volume":
        data["volumes"] = {"/:/host": "rw"}
    elif case == "host-path-volume":
        data["volumes"] = {"/root/.ssh": "/work"}
    elif case == "volume-at-another-path":
        data["volumes"] = {"buildctl-work-x": "/etc"}
    elif case == "network-of-another-container":
        data["network"] = "container:buildctl-f936f0426829"
    elif case == "unknown-step":
        data["step"] = "publish"
    elif case == "compile-without-command":
        data["command"] = None
    elif case == "memory-malformed":
        data["memory"] = "2g --privileged"
    elif case == "env-name-with-escape":
        data["env"] = {"A\x1b[2J": "x"}
    elif case == "unknown-key":
        data["privileged"] = True
    elif case == "oversized-bundle-json":
        data["first_error"] = ["x" * 60000] * 20


# case: (what the message says, what the old code did)
BUNDLE_CASES = {
    "host-root-volume": ("'/:/host' is not a buildctl volume name",
                         "--shell ran `docker run -it -v /:/host-repro-…:rw --network host`: the host's / writable"),
    "host-path-volume": ("'/root/.ssh' is not a buildctl volume name",
                         "--shell ran `-v /root/.ssh-repro-…:/work`: a bind mount Docker creates on the host"),
    "volume-at-another-path": ("mounted at '/etc'", "a volume over the image's /etc"),
    "network-of-another-container": ("network: Input should be 'host', 'bridge', 'none' or 'default'",
                                     "joined another container's network namespace (its localhost services)"),
    "unknown-step": ("step: Input should be 'fetch', 'image', 'source', 'configure', 'compile', 'wheel' or 'extensions'",
                     "built the image and ran the command of an unknown step"),
    "compile-without-command": ("step compile ran a command in a container, but the bundle names none",
                                "TypeError after building the image: 'internal error', exit 1"),
    "memory-malformed": ("memory: '2g --privileged' is not a memory limit",
                         "a DockerException after the image build: 'internal error', exit 1"),
    "env-name-with-escape": ("env.A\\x1b[2J.[key]: String should match pattern",
                             "passed to Docker as is; the summary now prints env names, so they must be plain"),
    "unknown-key": ("privileged: Extra inputs are not permitted", "ignored silently"),
    "oversized-bundle-json": ("bundle.json: larger than 1048576 bytes", "read whole into memory, any size"),
}


@pytest.mark.parametrize("case", sorted(BUNDLE_CASES))
def test_hostile_bundle_json_is_refused_by_invoke_repro(case, tmp_path, valid_bundle):
    """`invoke repro` on an edited bundle.json: exit 2, one line on stderr, nothing run, no summary.
    The old behaviour of each case is in BUNDLE_CASES (the --shell ones measured by the command it built:
    `docker run --rm -it -v /:/host-repro-1234abcd:rw --network host img bash` for host-root-volume)."""
    bundle = valid_bundle(tmp_path)
    data = json.loads((bundle / "bundle.json").read_text())
    _hostile(data, case)
    (bundle / "bundle.json").write_text(json.dumps(data))
    line = one_line_exit_2(repro_here(bundle, "--shell"), f"bundle {bundle}: bundle.json", BUNDLE_CASES[case][0],
                            "fix: use a bundle written by `invoke build`, unchanged")
    assert "\x1b" not in line


def test_packed_bundle_with_cve_2025_4517_is_refused_by_invoke_repro(tmp_path):
    """Before: `_open_bundle` ran `extractall(tmp, filter="data")` on the .tar.gz before reading anything:
    this 1.5 KB archive overwrote $TMPDIR/victim and wrote $TMPDIR/newfile (measured on 3.11.7)."""
    sandbox, _ = _sandbox(tmp_path)
    old_dest = sandbox / "buildctl-repro-abcdefgh"  # where the old code unpacked (mkdtemp in TMPDIR)
    bundle = tmp_path / "bundle.tar.gz"
    bundle.write_bytes(_tar(cve_2025_4517(len(str(old_dest))), gz=True))
    assert bundle.stat().st_size < 2048
    proc = repro_here(bundle, env={"TMPDIR": str(sandbox)})
    one_line_exit_2(proc, f"bundle {bundle}: member 'a': a symbolic link", "fix: use a bundle written by")
    assert _outside_changed(sandbox, set()) == []  # nothing unpacked left in TMPDIR either


def test_bundle_with_a_symlinked_context_is_refused(tmp_path, valid_bundle):
    """A bundle folder whose context/ points elsewhere would send that folder to the engine as the build
    context (before: used as is)."""
    bundle = valid_bundle(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.rename(bundle / "context", tmp_path / "elsewhere" / "context")
    (bundle / "context").symlink_to(tmp_path / "elsewhere" / "context")
    one_line_exit_2(repro_here(bundle), "context is a symbolic link")


def test_bundle_source_travels_as_files(tmp_path):
    """A local source with symlinks is bundled as files (in-tree targets) or not at all (out of the tree),
    so a replay's extraction accepts what buildctl wrote and no host file rides along."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("a")
    (src / "b.py").symlink_to("a.py")
    (src / "leak").symlink_to("/etc/hostname")
    repro.writer._pack_source(src, tmp_path / "source.tar.gz")
    with tarfile.open(tmp_path / "source.tar.gz") as tf:
        assert [(m.name, m.type) for m in tf.getmembers()] == [("a.py", tarfile.REGTYPE), ("b.py", tarfile.REGTYPE)]
    archive.extract(tmp_path / "source.tar.gz", tmp_path / "out", what="w", fix="f", caps=repro.SOURCE_CAPS)
    assert (tmp_path / "out" / "b.py").read_text() == "a"
