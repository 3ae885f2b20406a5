"""portability.json, as the build container wrote it (in_container/wheelrepair.py), shaped for the manifest.

The file is a build output: untrusted. It is read within MAX_BYTES, never through a link; only the known
fields are kept, each of its type, strings cut to a length and stripped of control characters, lists
capped; a file that is not such a record becomes one that says so, so the wheel's portability is still
checked and the manifest still says the repair ran.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NAME = "portability.json"
MAX_BYTES = 1 << 20
MAX_LIBRARIES = 500
MAX_TEXT = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LIBRARY_FIELDS = {"vendored": ("soname", "file", "bytes", "package"),
                   "excluded": ("soname", "pattern", "reason", "package"),
                   "external": ("soname", "package")}


def _text(value, limit: int = MAX_TEXT) -> str | None:
    if not isinstance(value, str):
        return None
    return _CONTROL.sub("?", value)[:limit] or None


def _library(entry, fields: tuple[str, ...]) -> dict | None:
    if not isinstance(entry, dict) or _text(entry.get("soname")) is None:
        return None
    out = {}
    for name in fields:
        value = entry.get(name)
        if name == "bytes":
            out[name] = value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        else:
            out[name] = _text(value)
    return out


def shape(data, wheel_names: list[str]) -> dict:
    """The manifest's portability section from what the container wrote, for one of `wheel_names` (the
    wheels the build really left): the one the record names, else the first; its tag from its file name."""
    named = data.get("wheel") if isinstance(data, dict) else None
    wheel_name = named if named in wheel_names else wheel_names[0]
    tag = wheel_name[: -len(".whl")].split("-")[-1]
    if not isinstance(data, dict):
        return {"repaired": False, "tag": tag, "wheel": wheel_name,
                "reason": "the build's portability.json is not a JSON object"}
    repaired = data.get("repaired") is True and named == wheel_name
    reason = None if repaired else (_text(data.get("reason")) or (
        "the build's portability.json names a wheel the build did not leave" if data.get("repaired") is True
        else "the repair recorded no reason"))
    out = {"repaired": repaired, "tag": tag, "wheel": wheel_name, "original": _text(data.get("original")),
           "tool": _text(data.get("tool"), 60), "reason": reason,
           "glibc": _version(data.get("glibc")), "glibcxx": _version(data.get("glibcxx"))}
    for key, fields in _LIBRARY_FIELDS.items():
        entries = data.get(key) if isinstance(data.get(key), list) else []
        out[key] = [lib for lib in (_library(e, fields) for e in entries[:MAX_LIBRARIES]) if lib is not None]
    return out


def _version(value) -> str | None:
    return value if isinstance(value, str) and re.fullmatch(r"\d{1,4}(\.\d{1,4}){0,3}", value) else None


def read(out_dir: Path, wheel_names: list[str]) -> dict | None:
    """The shaped section, or None when the build wrote no record (repair off, or no framework wheel)."""
    path = Path(out_dir) / NAME
    if not wheel_names or path.is_symlink() or not path.is_file():
        return None
    with open(path, "rb") as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        return shape(None, wheel_names) | {"reason": f"the build's portability.json is larger than {MAX_BYTES >> 20} MiB"}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return shape(None, wheel_names) | {"reason": "the build's portability.json is not JSON"}
    return shape(data, wheel_names)


def growth_refusal(section: dict | None, limit: int | None, limit_text: str = "") -> str | None:
    """Why the repair grew the wheel too much (the libraries it vendored, unpacked, past the recipe's
    build.wheel.max_vendored), naming the three largest; None within the limit or with no limit."""
    if limit is None or not section or not section.get("repaired"):
        return None
    vendored = sorted(section.get("vendored") or [], key=lambda lib: -(lib.get("bytes") or 0))
    total = sum(lib.get("bytes") or 0 for lib in vendored)
    if total <= limit:
        return None
    largest = ", ".join(f"{lib['soname']} {_mb(lib.get('bytes') or 0)}"
                        + (f" (from {lib['package']})" if lib.get("package") else "") for lib in vendored[:3])
    return (f"the repair vendored {len(vendored)} libraries, {_mb(total)} unpacked, past build.wheel.max_vendored "
            f"{limit_text or _mb(limit)}; largest: {largest}; fix: leave what a dependency or the target provides to it "
            "(build.wheel.exclude), or raise build.wheel.max_vendored")


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
