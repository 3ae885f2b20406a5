"""A wheel is an untrusted zip: the host reads its METADATA (and pip unpacks it) before anything else.

Each zip is made in the test, small on disk (hostile_zips.py). Each case says what the code before
(b74e6d9) did with it.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hostile_zips import DIST_INFO, MiB, many_members_zip, wheel, zeros_member_wheel
from invoke_here import invoke_here

from buildctl.errors import InputError
from buildctl.store import wheel_facts

ROOT = Path(__file__).resolve().parents[2]


def _peak_mib(fn) -> tuple[BaseException | None, float]:
    """(what fn raised, peak Python memory while it ran in MiB)."""
    tracemalloc.start()
    try:
        fn()
        raised = None
    except BaseException as e:  # noqa: BLE001 - returned to the test
        raised = e
    peak = tracemalloc.get_traced_memory()[1] / MiB
    tracemalloc.stop()
    return raised, peak


def test_metadata_zip_bomb_is_refused_with_bounded_memory(tmp_path):
    """METADATA inflating to 256 MiB from a 260 KB file. The old wheel_requires read it whole
    (z.read(meta) then .decode()): 557 MiB peak here, and the issue's 400 KB bomb took 836 MB; a 1 MB one
    took 2.1 GB RSS through `invoke verify --host`. Now refused from the declared size, a few MiB at most."""
    bomb = zeros_member_wheel(tmp_path, f"{DIST_INFO}/METADATA", 256 * MiB)
    assert bomb.stat().st_size < MiB
    raised, peak = _peak_mib(lambda: wheel_facts.wheel_requires(bomb))
    assert isinstance(raised, InputError), raised
    assert "METADATA unpacks to 268435456 bytes" in str(raised) and "zip bomb" in str(raised)
    assert peak < 8, f"{peak:.0f} MiB"


def test_a_wheel_that_unpacks_a_thousand_times_its_size_is_refused(tmp_path):
    """One member of 1.1 GiB zeros in a 1.1 MB wheel. The old code handed it to pip, which unpacked it:
    `pip install --target` of the same wheel at 1 GiB wrote 1.1 GB; 64 MB of such a wheel fills 64 GB."""
    bomb = zeros_member_wheel(tmp_path, "demofw/blob.bin", 1100 * MiB)
    with pytest.raises(InputError, match=r"unpacks to 1100 MiB from 1\.\d MiB .*zip bomb"):
        wheel_facts.wheel_requires(bomb)


def test_a_wheel_with_too_many_members_is_refused_before_they_are_parsed(tmp_path):
    """250,001 members in a 23 MB file. The old code's ZipFile() parsed every entry first: 119 MiB and 24 s
    here (a 1 GB directory: gigabytes). Now the count is read from the end record and refused first."""
    many = many_members_zip(tmp_path, 250_000)
    raised, peak = _peak_mib(lambda: wheel_facts.wheel_requires(many))
    assert isinstance(raised, InputError) and "250001 members" in str(raised), raised
    assert peak < 8, f"{peak:.0f} MiB"


@pytest.mark.parametrize("content, words", [
    (b"", "not a readable wheel"),
    (b"PK\x03\x04" + b"\0" * 100, "not a readable wheel"),
    (b"not a zip at all" * 100, "not a readable wheel"),
], ids=["empty", "truncated", "text"])
def test_files_that_are_not_zips_are_refused(tmp_path, content, words):
    path = tmp_path / "demofw-0.1.0-cp311-cp311-linux_x86_64.whl"
    path.write_bytes(content)
    with pytest.raises(InputError, match=words):
        wheel_facts.wheel_requires(path)


def test_a_wheel_without_metadata_is_refused(tmp_path):
    """The old code read no METADATA as 'no requirements' and went on to pip."""
    w = zeros_member_wheel(tmp_path, "demofw/x.bin", MiB)
    import zipfile

    with zipfile.ZipFile(w) as z:
        names = [n for n in z.namelist() if not n.endswith("METADATA")]
        keep = {n: z.read(n) for n in names}
    with zipfile.ZipFile(w, "w") as z:
        for n, data in keep.items():
            z.writestr(n, data)
    with pytest.raises(InputError, match="0 .dist-info/METADATA files"):
        wheel_facts.wheel_requires(w)


def test_requirements_are_read_with_packaging(tmp_path):
    w = wheel(tmp_path, "")
    assert wheel_facts.wheel_requires(w) == []
    assert wheel_facts.wheel_tags(w) == {"name": "demofw", "version": "0.1.0", "python_tag": "cp311", "abi": "cp311",
                                        "platform": "linux_x86_64", "python": "3.11"}
    assert wheel_facts.is_cuda_wheel(w, None, ["nvidia_nccl_cu12>=2.20; platform_system == 'Linux'"])
    assert not wheel_facts.is_cuda_wheel(w, None, ["numpy"])


def test_metadata_through_an_open_handle_is_the_same_as_by_path(tmp_path):
    """Publishing hashes the wheel through one open handle and reads METADATA through that same handle."""
    w = wheel(tmp_path, "")
    with open(w, "rb") as fh:
        fh.read()  # where a hash leaves it
        through_handle = wheel_facts.wheel_metadata(w, fh)
    assert through_handle == wheel_facts.wheel_metadata(w)
    assert b"Name: demofw" in through_handle


def test_markup_in_a_wheel_file_name_is_refused_as_a_name():
    """The old wheel_tags split on '-' and accepted 'x[bold]-1.0-cp311-...whl', printed as markup."""
    with pytest.raises(InputError, match="is not a wheel file name"):
        wheel_facts.wheel_tags(Path("x[bold]-1.0-cp311-cp311-linux_x86_64.whl"))


@pytest.mark.parametrize("extra", [[], ["--host"]], ids=["container", "host"])
def test_cli_verify_refuses_the_bomb_in_one_line(tmp_path, extra):
    """`invoke verify --wheel bomb.whl`: before, 2.1 GB RSS in wheel_requires; now exit 2 in one line,
    before any engine or pip call."""
    bomb = zeros_member_wheel(tmp_path, f"{DIST_INFO}/METADATA", 256 * MiB)
    proc = invoke_here("verify", *extra, "--wheel", str(bomb), cwd=ROOT, env={"BUILDCTL_DEBUG": "", "COLUMNS": "300"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {bomb.name}: its METADATA unpacks to 268435456 bytes")
