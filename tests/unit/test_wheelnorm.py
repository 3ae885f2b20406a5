"""The wheel normaliser (buildctl/in_container/wheelnorm.py), which runs in the build container after bdist_wheel:
the same files give the same bytes, whatever order, dates and permissions the packer used. Pure: no engine."""

import base64
import hashlib
import zipfile

import pytest

from buildctl.in_container import wheelnorm

FILES = {
    "pkg/__init__.py": b"from .version import __version__\n",
    "pkg/_C.so": b"\x7fELF" + bytes(range(256)) * 4,
    "pkg/bin/tool": b"#!/bin/sh\necho hi\n",
    "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
    "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n",
}


def _record(files):
    lines = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    lines.append("pkg-1.0.dist-info/RECORD,,")
    return ("\n".join(lines) + "\n").encode()


def make_wheel(path, *, order, date, mode=0o644, compression=zipfile.ZIP_DEFLATED):
    files = {**FILES, "pkg-1.0.dist-info/RECORD": _record(FILES)}
    with zipfile.ZipFile(path, "w") as z:
        for name in order(list(files)):
            info = zipfile.ZipInfo(name, date_time=date)
            info.compress_type = compression
            exe = name.endswith("/tool")
            info.external_attr = (0o100000 | (mode | 0o111 if exe else mode)) << 16
            z.writestr(info, files[name])
    return path


def test_two_packings_of_the_same_files_normalise_to_the_same_bytes(tmp_path):
    a = make_wheel(tmp_path / "a.whl", order=sorted, date=(2026, 12, 1, 10, 0, 0))
    b = make_wheel(tmp_path / "b.whl", order=lambda n: sorted(n, reverse=True), date=(2025, 3, 4, 5, 6, 7),
                   mode=0o664, compression=zipfile.ZIP_STORED)
    assert a.read_bytes() != b.read_bytes()
    for w in (a, b):
        wheelnorm.normalize(w, w, 1700000000)
    assert a.read_bytes() == b.read_bytes()


def test_the_normal_form(tmp_path):
    w = make_wheel(tmp_path / "w.whl", order=lambda n: sorted(n, reverse=True), date=(2026, 12, 1, 10, 0, 0),
                   mode=0o600)
    wheelnorm.normalize(w, tmp_path / "n.whl", 1700000000)
    with zipfile.ZipFile(tmp_path / "n.whl") as z:
        infos = z.infolist()
        names = [i.filename for i in infos]
        # sorted, the .dist-info last, RECORD the very last (the wheel spec asks for it at the end)
        assert names == ["pkg/_C.so", "pkg/__init__.py", "pkg/bin/tool", "pkg-1.0.dist-info/METADATA",
                         "pkg-1.0.dist-info/WHEEL", "pkg-1.0.dist-info/RECORD"]
        assert {i.date_time for i in infos} == {(2023, 11, 14, 22, 13, 20)}  # 1700000000 in UTC
        modes = {i.filename: (i.external_attr >> 16) & 0o7777 for i in infos}
        assert modes.pop("pkg/bin/tool") == 0o755 and set(modes.values()) == {0o644}
        assert {i.create_system for i in infos} == {3}
        assert all(i.compress_type == zipfile.ZIP_DEFLATED and i.extra == b"" for i in infos)
        # contents untouched: RECORD's hashes still hold
        for line in z.read("pkg-1.0.dist-info/RECORD").decode().splitlines():
            name, digest, _ = line.split(",")
            if digest:
                assert digest == "sha256=" + base64.urlsafe_b64encode(
                    hashlib.sha256(z.read(name)).digest()).rstrip(b"=").decode()


def test_normalising_twice_changes_nothing(tmp_path):
    w = make_wheel(tmp_path / "w.whl", order=sorted, date=(2026, 12, 1, 10, 0, 0))
    wheelnorm.normalize(w, w, 315532800)
    once = w.read_bytes()
    wheelnorm.normalize(w, w, 315532800)
    assert w.read_bytes() == once


def test_dates_before_1980_become_1980(tmp_path):
    """A zip entry holds no earlier date (zipfile refuses one): SOURCE_DATE_EPOCH=0 gives 1980-01-01."""
    w = make_wheel(tmp_path / "w.whl", order=sorted, date=(2026, 12, 1, 10, 0, 0))
    wheelnorm.normalize(w, w, 0)
    with zipfile.ZipFile(w) as z:
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_a_member_twice_is_refused_and_the_wheel_left_alone(tmp_path):
    w = tmp_path / "w.whl"
    with zipfile.ZipFile(w, "w") as z, pytest.warns(UserWarning):
        z.writestr("pkg/a.py", b"1")
        z.writestr("pkg/a.py", b"2")
    before = w.read_bytes()
    with pytest.raises(ValueError, match="member 'pkg/a.py' appears twice"):
        wheelnorm.normalize(w, w, 315532800)
    assert w.read_bytes() == before and list(tmp_path.iterdir()) == [w]


def test_command_line(tmp_path, monkeypatch, capsys):
    w = make_wheel(tmp_path / "w.whl", order=sorted, date=(2026, 12, 1, 10, 0, 0))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert wheelnorm.main([str(w)]) == 2
    assert "SOURCE_DATE_EPOCH='yesterday' is not a number of seconds; fix:" in capsys.readouterr().err
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert wheelnorm.main([str(w)]) == 0
    assert "normalised w.whl (dates 2023-11-14T22:13:20Z)" in capsys.readouterr().out
