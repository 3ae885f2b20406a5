"""Normalise a wheel: the same files make the same bytes, whichever tool packed them and when.

Rewrites the zip container only; every member's bytes stay as they are, so the wheel's RECORD (the
hashes of those bytes) stays valid. Fixed: member order (sorted, the .dist-info folder last with
RECORD at the very end, as the wheel spec asks), every entry's date (SOURCE_DATE_EPOCH), permissions
(0644, or 0755 for a file with any execute bit), the zip's "made by" system (Unix), compression
(deflate, zlib's default level) and no comment or extra fields.

Standard library only: it is rendered into the build folder and runs in the build container after
`setup.py bdist_wheel` (templates/build.sh.j2):  python wheelnorm.py WHEEL  (SOURCE_DATE_EPOCH from
the environment).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# 1980-01-01T00:00:00Z: the earliest date a zip entry holds (spec.DEFAULT_SOURCE_DATE_EPOCH).
ZIP_EPOCH = 315532800
_UNIX = 3
ZIP64_LIMIT = (1 << 31) - 1  # zipfile's own threshold
_S_IFREG, _S_IFDIR = 0o100000, 0o040000
_MSDOS_DIRECTORY = 0x10


def member_order(names: list[str]) -> list[str]:
    """Sorted by name, the .dist-info folder's members last and its RECORD the very last."""

    def key(name: str) -> tuple[bool, bool, str]:
        top = name.split("/", 1)[0]
        in_dist_info = top.endswith(".dist-info") and "/" in name
        return in_dist_info, in_dist_info and name == f"{top}/RECORD", name

    return sorted(names, key=key)


def entry_date(epoch: int) -> tuple[int, int, int, int, int, int]:
    """The zip date of every entry: `epoch` in UTC, at the earliest 1980-01-01 (zip holds no earlier)."""
    return time.gmtime(max(int(epoch), ZIP_EPOCH))[:6]


def _mode(info: zipfile.ZipInfo) -> int:
    if info.is_dir():
        return 0o755
    return 0o755 if (info.external_attr >> 16) & 0o111 else 0o644


def normalize(src: Path, dest: Path, epoch: int) -> None:
    """Write `src`'s members to `dest` in the normal form (dest may be src: replaced atomically)."""
    src, dest = Path(src), Path(dest)
    date = entry_date(epoch)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with zipfile.ZipFile(src) as zin:
            infos = zin.infolist()
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                dup = next(n for n in names if names.count(n) > 1)
                raise ValueError(f"{src.name}: member {dup!r} appears twice; a wheel holds each file once")
            by_name = {i.filename: i for i in infos}
            with zipfile.ZipFile(tmp, "w") as zout:
                for name in member_order(names):
                    old = by_name[name]
                    new = zipfile.ZipInfo(name, date_time=date)
                    new.create_system = _UNIX
                    new.compress_type = zipfile.ZIP_STORED if old.is_dir() else zipfile.ZIP_DEFLATED
                    kind = _S_IFDIR if old.is_dir() else _S_IFREG
                    new.external_attr = ((kind | _mode(old)) << 16) | (_MSDOS_DIRECTORY if old.is_dir() else 0)
                    if old.is_dir():
                        zout.writestr(new, b"")
                        continue
                    new.file_size = old.file_size  # so that zipfile writes a ZIP64 entry for a member past 4 GiB
                    # streamed: a Debug build's libtorch_cpu.so is several GB
                    with zin.open(old) as src_member, zout.open(new, "w", force_zip64=old.file_size > ZIP64_LIMIT) as out:
                        shutil.copyfileobj(src_member, out, 1 << 20)
        tmp.chmod(0o644)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: wheelnorm.py WHEEL  (SOURCE_DATE_EPOCH from the environment)", file=sys.stderr)
        return 2
    raw = os.environ.get("SOURCE_DATE_EPOCH", str(ZIP_EPOCH))
    if not raw.isdigit():
        print(f"wheelnorm: SOURCE_DATE_EPOCH={raw!r} is not a number of seconds; fix: e.g. 315532800",
              file=sys.stderr)
        return 2
    wheel = Path(argv[0])
    normalize(wheel, wheel, int(raw))
    print(f"buildctl: normalised {wheel.name} (dates {time.strftime('%Y-%m-%dT%H:%M:%SZ', entry_date(int(raw)) + (0, 0, 0))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
