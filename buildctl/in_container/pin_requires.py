#!/usr/bin/env python3
"""Pin a wheel's Requires-Dist on its framework to the exact build it was compiled against (an
extension's compiled ops fit one torch only, and pip would otherwise take PyPI's). Standard library only.

    python3 pin_requires.py WHEEL --dist torch --version VERSION [--require NAME==VERSION]... [--out DIR]

Every `Requires-Dist: torch...` line without an `extra ==` marker becomes `torch==VERSION` (its
environment marker kept); a wheel that names no torch (torch-scatter's setup.py has
install_requires=[]) gets one. Each --require (another extension of the set, built here, that this
one imports) is pinned, or added, the same way. METADATA's sha256 and size in RECORD are rewritten; every other
member is copied byte for byte, in order, with its date and mode, written to DIR (default: over WHEEL).
--label LABEL gives the wheel's version a local label naming the torch it fits (PyG's scheme, 2.1.2 ->
2.1.2+pt214cu130): Version, the .dist-info/.data folders, RECORD and the file name follow, so that one index
holds a set per torch. Without it the file name and version are unchanged.
Exit status: 0 written, 2 bad input.
"""

import argparse
import base64
import hashlib
import os
import re
import sys
import tempfile
import zipfile

# PEP 440, with a local version label (2.6.0+buildctl).
VERSION = re.compile(
    r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9]+([._-][a-z0-9]+)*)?$", re.I
)
DIST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


def requirement_line(dist):
    """`Requires-Dist: <dist>...` (any spelling PEP 503 normalises to the same name)."""
    name = "[-_.]+".join(re.escape(part) for part in re.split(r"[-_.]+", dist))
    return re.compile(rf"^Requires-Dist:\s*{name}(?![-_.\w])\s*(?:\[[^\]]*\])?\s*(?:\(?[^;]*\)?)?(;.*)?$", re.I)


class BadInput(Exception):
    pass


def pin_metadata(text, dist, version):
    head, sep, body = text.partition("\n\n")
    trailing = head[len(head.rstrip("\n")):]  # METADATA without a body ends its headers with a newline
    lines = head[:len(head) - len(trailing)].split("\n")
    out, pinned = [], False
    wanted = requirement_line(dist)
    for line in lines:
        m = wanted.match(line)
        if m and not re.search(r"\bextra\s*==", m.group(1) or ""):
            marker = (m.group(1) or "").strip()
            line = f"Requires-Dist: {dist}=={version}" + (f" {marker}" if marker else "")
            pinned = True
        out.append(line)
    if not pinned:
        last = max(
            (i for i, line in enumerate(out) if line.startswith("Requires-Dist:")), default=len(out) - 1
        )
        out.insert(last + 1, f"Requires-Dist: {dist}=={version}")
    return "\n".join(out) + trailing + sep + body


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def relabel(name, old_version, new_version):
    """A member's name with the wheel's `dist-version.dist-info/` or `.data/` folder renamed."""
    top, sep, rest = name.partition("/")
    for suffix in (".dist-info", ".data"):
        if sep and top.endswith(f"-{old_version}{suffix}"):
            return top[: -len(f"{old_version}{suffix}")] + f"{new_version}{suffix}/" + rest
    return name


def checked_pins(dist, version, requires, label):
    """[(name, exact version)] to pin: the framework, then each --require; bad input refused."""
    if label is not None and not re.fullmatch(r"[a-z0-9]+", label):
        raise BadInput(f"--label {label!r}: not a local version label; give one like pt214cu130")
    pins = [(dist, version)]
    for req in requires:
        name, sep, exact = req.partition("==")
        if not sep:
            raise BadInput(f"--require {req!r}: not NAME==VERSION; give one like torch-scatter==2.1.2")
        pins.append((name, exact))
    for name, exact in pins:
        if not DIST.match(name):
            raise BadInput(f"{name!r}: not a distribution name; give one like torch")
        if not VERSION.match(exact):
            raise BadInput(f"{name}=={exact}: not a PEP 440 version; give one like 2.6.0 or 2.6.0+buildctl")
    return pins


def metadata_members(src, wheel):
    """(METADATA's member name, RECORD's): a wheel holds one .dist-info/METADATA, its RECORD beside it."""
    names = [i.filename for i in src.infolist()]
    meta = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if len(meta) != 1:
        raise BadInput(f"{wheel}: {len(meta)} .dist-info/METADATA files; a wheel has exactly one")
    record_name = meta[0].rsplit("/", 1)[0] + "/RECORD"
    if record_name not in names:
        raise BadInput(f"{wheel}: no {record_name}; a wheel needs one")
    return meta[0], record_name


def pinned_metadata(text, pins, label, wheel):
    """(METADATA with each pin, its Version before, its Version now: --label's local label added)."""
    for name, exact in pins:
        text = pin_metadata(text, name, exact)
    old_version = re.search(r"^Version:[ \t]*(\S+)", text, re.M)
    if old_version is None:
        raise BadInput(f"{wheel}: its METADATA has no Version; a wheel needs one")
    old_version = old_version.group(1)
    new_version = old_version
    if label is not None:
        if "+" in old_version:
            raise BadInput(f"{wheel}: version {old_version} has a local label already; build it without one")
        new_version = f"{old_version}+{label}"
        text = re.sub(r"^Version:[ \t]*\S+", f"Version: {new_version}", text, count=1, flags=re.M)
    return text, old_version, new_version


def rewritten_record(text, meta_name, new_meta, rename):
    """RECORD with METADATA's new sha256 and size, and every path renamed."""
    record = []
    for row in text.splitlines():
        if row.split(",")[0] == meta_name:
            row = f"{rename(meta_name)},{record_hash(new_meta)},{len(new_meta)}"
        elif row:
            path, comma, rest = row.partition(",")
            row = rename(path) + comma + rest
        record.append(row)
    return ("\n".join(record) + "\n").encode("utf-8")


def wheel_file_name(wheel, old_version, new_version):
    """The wheel's file name, its version part following a relabelled version."""
    base = os.path.basename(wheel)
    if new_version != old_version:
        parts = base.split("-")
        parts[1] = new_version.replace("-", "_")
        base = "-".join(parts)
    return base


def write_members(src, path, replaced, rename):
    """Every member of `src`, renamed, into a new zip at `path`, in order, with its date, mode and
    compression; those in `replaced` ({name: bytes}) with their new content."""
    with zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            if info.filename.endswith("/RECORD.jws") or info.filename.endswith("/RECORD.p7s"):
                continue  # a signature over the old RECORD no longer holds
            data = replaced.get(info.filename)
            if data is None:
                data = src.read(info)
            renamed = rename(info.filename)
            if renamed != info.filename:
                moved = zipfile.ZipInfo(renamed, info.date_time)
                moved.external_attr, moved.compress_type = info.external_attr, info.compress_type
                info = moved
            dst.writestr(info, data, compress_type=info.compress_type)


def pin(wheel, dist, version, out_dir=None, requires=(), label=None):
    pins = checked_pins(dist, version, requires, label)
    try:
        src = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as e:
        raise BadInput(f"{wheel}: not a readable wheel ({e}); name a .whl file") from None
    with src:
        meta_name, record_name = metadata_members(src, wheel)
        text = src.read(meta_name).decode("utf-8")
        text, old_version, new_version = pinned_metadata(text, pins, label, wheel)
        rename = lambda n: relabel(n, old_version, new_version)  # noqa: E731
        new_meta = text.encode("utf-8")
        new_record = rewritten_record(src.read(record_name).decode("utf-8"), meta_name, new_meta, rename)
        target = os.path.join(out_dir or os.path.dirname(os.path.abspath(wheel)),
                              wheel_file_name(wheel, old_version, new_version))
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), suffix=".whl.part")
        os.close(fd)
        try:
            write_members(src, tmp, {meta_name: new_meta, record_name: new_record}, rename)
            os.replace(tmp, target)
            if target != os.path.abspath(wheel) and out_dir is None:
                os.unlink(wheel)
        except BaseException:
            os.unlink(tmp)
            raise
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel")
    parser.add_argument("--dist", required=True, metavar="NAME", help="the framework's distribution, e.g. torch")
    parser.add_argument("--version", required=True, metavar="VERSION", help="its exact version to pin")
    parser.add_argument("--require", action="append", default=[], metavar="NAME==VERSION",
                        help="another distribution to pin (an extension of the set this one imports); repeatable")
    parser.add_argument("--label", metavar="LABEL", help="a local version label for the wheel, e.g. pt214cu130")
    parser.add_argument("--out", metavar="DIR", help="folder for the pinned wheel (default: over WHEEL)")
    args = parser.parse_args(argv)
    try:
        if args.out and not os.path.isdir(args.out):
            raise BadInput(f"--out {args.out}: no such folder; create it first")
        print(pin(args.wheel, args.dist, args.version, args.out, args.require, args.label))
    except BadInput as e:
        print(f"pin_requires: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
