"""Comparing two builds' wheels (buildctl/store/wheel_diff.py): each differing member named once, with the kind
of difference (paths, timestamps, ordering, content) and how. Pure: no engine."""

import zipfile

from buildctl.store import wheel_diff

FIRST, SECOND = "/work/src", "/rebuild/work/src"  # the two build folders of --check-reproducible
DATE = (1980, 1, 1, 0, 0, 0)
FILES = {"pkg/__init__.py": b"x = 1\n", "pkg/_C.so": b"\x7fELF\0code\0", "pkg-1.0.dist-info/RECORD": b"r\n"}


def wheel(path, files=None, *, dates=None, modes=None, order=None, comment=b""):
    files = dict(FILES if files is None else files)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in order or files:
            info = zipfile.ZipInfo(name, date_time=(dates or {}).get(name, DATE))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100000 | (modes or {}).get(name, 0o644)) << 16
            z.writestr(info, files[name])
        z.comment = comment
    return path


def compare(tmp_path, a: dict, b: dict):
    """Two wheels of one name (one per build) made from `a` and `b`'s arguments to wheel(), compared."""
    paths = []
    for sub, kw in (("a", a), ("b", b)):
        (tmp_path / sub).mkdir(parents=True)
        paths.append(wheel(tmp_path / sub / "pkg-1.0-py3-none-any.whl", **kw))
    return wheel_diff.compare(*paths, build_paths=(FIRST, SECOND))


def only(result):
    assert len(result.differences) == 1, result.differences
    return result.differences[0]


def test_the_same_files_the_same_way_are_identical(tmp_path):
    result = compare(tmp_path, {}, {})
    assert result.identical and result.differences == ()
    assert result.first_sha256 == result.second_sha256
    assert result.reason() == f"the two builds made the same wheel (sha256 {result.first_sha256})"


def test_a_zip_entry_date(tmp_path):
    d = only(compare(tmp_path, {}, {"dates": {"pkg/__init__.py": (2026, 12, 1, 10, 0, 2)}}))
    assert (d.member, d.kinds) == ("pkg/__init__.py", ("timestamps",))
    assert d.detail == "zip date 1980-01-01 00:00:00 vs 2026-12-01 10:00:02"


def test_a_date_compiled_in(tmp_path):
    """__DATE__/__TIME__ in a binary (same length, other digits): embedded dates, not 'content'."""
    so = lambda stamp: b"\x7fELF\0built " + stamp + b"\0code\0"  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg/_C.so": so(b"Dec  1 2026 10:00:01")}},
                     {"files": {**FILES, "pkg/_C.so": so(b"Dec  1 2026 10:03:59")}}))
    assert (d.member, d.kinds) == ("pkg/_C.so", ("timestamps",))
    assert d.detail == "embedded date '10:00:01' vs '10:03:59'"


def test_a_generated_file_with_the_clock(tmp_path):
    py = lambda t: f"__version__ = '1.0'\nbuilt = '{t}'\n".encode()  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg/__init__.py": py("2026-12-01T10:07:07")}},
                     {"files": {**FILES, "pkg/__init__.py": py("2026-12-01T10:11:19")}}))
    assert d.kinds == ("timestamps",) and "'2026-12-01T10:07:07' vs '2026-12-01T10:11:19'" in d.detail


def test_a_build_path_in_a_binary_is_named_with_its_counts(tmp_path):
    """A path of another length moves what follows it: 'paths', whatever else moved with it. The
    first build's /work/src inside the second's /rebuild/work/src is not counted twice."""
    so = lambda p: b"\x7fELF\0BUILD_DIR=" + p.encode() + b"/build\0" + bytes([len(p)]) + b"code\0"  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg/_C.so": so(FIRST)}},
                     {"files": {**FILES, "pkg/_C.so": so(SECOND)}}))
    assert (d.member, d.kinds) == ("pkg/_C.so", ("paths",))
    assert d.detail == "embeds /rebuild/work/src (0x first, 1x second), /work/src (1x first, 0x second)"


def test_a_path_and_a_date_in_one_text_file(tmp_path):
    py = lambda p, t: f"src = '{p}'\nbuilt = '{t}'\n".encode()  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg/__init__.py": py(FIRST, "2026-12-01T10:00:00")}},
                     {"files": {**FILES, "pkg/__init__.py": py(SECOND, "2026-12-01T10:05:00")}}))
    assert d.kinds == ("paths", "timestamps")


def test_member_order(tmp_path):
    result = compare(tmp_path, {}, {"order": ["pkg/_C.so", "pkg/__init__.py", "pkg-1.0.dist-info/RECORD"]})
    assert [(d.member, d.kinds, d.detail) for d in result.differences] == [
        ("pkg/__init__.py", ("ordering",), "member #1 vs #2"), ("pkg/_C.so", ("ordering",), "member #2 vs #1")]


def test_other_bytes_are_content_with_where(tmp_path):
    d = only(compare(tmp_path, {}, {"files": {**FILES, "pkg/_C.so": b"\x7fELF\0cOde\0"}}))
    assert (d.kinds, d.detail) == (("content",), "10 vs 10 bytes, first difference at byte 6")


def test_a_member_only_one_wheel_has(tmp_path):
    d = only(compare(tmp_path, {}, {"files": {**FILES, "pkg/extra.py": b""}}))
    assert (d.member, d.kinds, d.detail) == ("pkg/extra.py", ("content",), "only in the second wheel")


def test_permissions(tmp_path):
    d = only(compare(tmp_path, {}, {"modes": {"pkg/_C.so": 0o755}}))
    assert (d.member, d.kinds, d.detail) == ("pkg/_C.so", ("content",), "mode 0644 vs 0755")


def test_record_names_the_hashes_that_moved(tmp_path):
    record = lambda h: f"pkg/__init__.py,sha256=aaa,6\npkg/_C.so,sha256={h},10\n".encode()  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg-1.0.dist-info/RECORD": record("bbb")}},
                     {"files": {**FILES, "pkg-1.0.dist-info/RECORD": record("ccc")}}))
    assert (d.kinds, d.detail) == (("content",), "the recorded hashes of pkg/_C.so")


def test_a_difference_outside_every_member_still_gets_a_line(tmp_path):
    d = only(compare(tmp_path, {}, {"comment": b"built on host-7"}))
    assert (d.member, d.kinds) == (wheel_diff.ARCHIVE, ("content",))


def test_the_reason_is_one_line_naming_members_and_kinds(tmp_path):
    so = lambda p: b"\x7fELF\0" + p.encode() + b"\0"  # noqa: E731
    result = compare(tmp_path, {"files": {**FILES, "pkg/_C.so": so(FIRST)}},
                     {"files": {**FILES, "pkg/_C.so": so(SECOND), "pkg/__init__.py": b"x = 2\n"},
                      "dates": {"pkg-1.0.dist-info/RECORD": (2026, 1, 1, 0, 0, 0)}})
    reason = result.reason(limit=2)
    assert "\n" not in reason and not result.identical
    assert reason == ("the two builds' wheels differ: pkg/__init__.py (content); pkg/_C.so (paths); "
                      "and 1 more member(s)")
    assert result.to_dict()["differences"][2] == {
        "member": "pkg-1.0.dist-info/RECORD", "kinds": ["timestamps"],
        "detail": "zip date 1980-01-01 00:00:00 vs 2026-01-01 00:00:00"}


def test_nvcc_anonymous_namespace_hashes_are_a_build_path(tmp_path):
    """cudafe++ hashes the .cu file's absolute path into _GLOBAL__N__<hash>: a path of the same length
    in other bytes, so named as paths (measured on demo-cuda13: the only difference of its _C.so)."""
    so = lambda h: b"\x7fELF\0_ZN3dfw4cuda43_GLOBAL__N__" + h + b"_10_kernels_cu_cb64d34b5checkE\0"  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg/_C.so": so(b"2d94f17e")}},
                     {"files": {**FILES, "pkg/_C.so": so(b"70f1f35a")}}))
    assert d.kinds == ("paths",)
    assert d.detail == ("nvcc's anonymous-namespace names hash the source file's path: _GLOBAL__N__2d94f17e "
                        "vs _GLOBAL__N__70f1f35a")


def test_nvcc_hashes_where_one_list_is_the_start_of_the_other(tmp_path):
    """One build has one more anonymous namespace than the other (the same first hash): named, not a
    StopIteration (which ended --check-reproducible as an internal error)."""
    ns = lambda h: b"_ZN3dfw4cuda43_GLOBAL__N__" + h + b"_10_kernels_cu_cb64d34b5checkE\0"  # noqa: E731
    d = only(compare(tmp_path, {"files": {**FILES, "pkg/_C.so": b"\x7fELF\0" + ns(b"2d94f17e")}},
                     {"files": {**FILES, "pkg/_C.so": b"\x7fELF\0" + ns(b"2d94f17e") + ns(b"70f1f35a")}}))
    assert d.kinds == ("paths",)
    assert d.detail == ("nvcc's anonymous-namespace names hash the source file's path: (none) "
                        "vs _GLOBAL__N__70f1f35a")


BIG = 8 << 20  # a member of a CUDA wheel is easily 1-2 GB; 8 MiB shows the memory it takes


def big_member(marker: bytes) -> bytes:
    half = b"\0" * (BIG // 2)
    return half + b"BUILD_DIR=" + marker + b"\0" + half


def test_big_members_are_compared_in_chunks_not_in_memory(tmp_path):
    """Two wheels with an 8 MiB member embedding each build's path (and one the same in both): compared
    and classified in less memory than half a member (suspected in issue 20 and proved: the members were
    read whole, and copied, 6x their size at the peak)."""
    import tracemalloc

    same = {**FILES, "pkg/libbig.so": big_member(b"same")}
    paths = [wheel(tmp_path / f"{n}.whl", {**same, "pkg/libpath.so": big_member(p.encode())})
             for n, p in (("a", FIRST), ("b", SECOND))]
    tracemalloc.start()
    try:
        result = wheel_diff.compare(*paths, build_paths=(FIRST, SECOND))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(d.member, d.kinds) for d in result.differences] == [("(file name)", ("content",)),
                                                                 ("pkg/libpath.so", ("paths",))]
    assert peak < BIG // 2, f"peak {peak / 2**20:.1f} MiB"


def test_chunk_boundaries_change_nothing(tmp_path, monkeypatch):
    """Build paths, dates and nvcc hashes split across the reads are found as in one piece."""
    so = lambda p, t, h: (b"\x7fELF\0" + p.encode() + b"\0built " + t + b"\0_GLOBAL__N__" + h  # noqa: E731
                          + b"_x\0" + p.encode() + b"\0")
    cases = [({"files": {**FILES, "pkg/_C.so": so(FIRST, b"2026-12-01T10:00:00", b"2d94f17e")}},
              {"files": {**FILES, "pkg/_C.so": so(SECOND, b"2026-12-01T10:05:00", b"2d94f17e")}}),
             ({"files": {**FILES, "pkg/_C.so": so("", b"Dec  1 2026", b"2d94f17e")}},
              {"files": {**FILES, "pkg/_C.so": so("", b"Dec  1 2026", b"70f1f35a")}})]
    details = []
    for n, (a, b) in enumerate(cases):
        whole = only(compare(tmp_path / f"{n}-whole", a, b))
        for size in (1, 3, 7, 16):
            monkeypatch.setattr(wheel_diff, "CHUNK", size)
            assert only(compare(tmp_path / f"{n}-{size}", a, b)) == whole
        monkeypatch.undo()
        details.append((whole.kinds, whole.detail))
    assert details == [
        (("paths", "timestamps"), "embeds /rebuild/work/src (0x first, 2x second), /work/src (2x first, 0x second); "
                                  "embedded date '2026-12-01T10:00:00' vs '2026-12-01T10:05:00'"),
        (("paths",), "nvcc's anonymous-namespace names hash the source file's path: _GLOBAL__N__2d94f17e "
                     "vs _GLOBAL__N__70f1f35a")]
