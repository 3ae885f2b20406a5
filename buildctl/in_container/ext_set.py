#!/usr/bin/env python3
"""Verify a framework's extension set where it is installed (a fresh container of the runtime image).
Standard library, binutils and abi_check.py beside it.

    python3 ext_set.py --set SET.json --out OUT.json

SET.json: {"framework": {"dist": "torch", "module": "torch"},
           "extensions": [{"name", "module", "smoke", "built_against": {...}}, ...],
           "beside": ["torchvision", ...]}   # installed next to the set, not built with it

For each extension (and each package beside the set): it is installed, it imports (in a child, so that
one crash is one result), its smoke check passes (a child running the recipe's code), the framework it
names in Requires-Dist and the one it was built against are the one installed (torch or another, such as
demofw), and, when the framework is torch, its .so files fit that torch (abi_check: undefined c10/at/torch
symbols, C++11 ABI, CUDA/HIP libraries). Each result carries one line saying what differs, naming both. Exit status: 0 written (whatever it says),
2 bad input.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abi_check  # noqa: E402  (beside this file in the container)

SMOKE_TIMEOUT_S = 900


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:400] if lines else "no output"


def run_child(code: str, timeout: float) -> tuple[bool, str, float]:
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"did not finish in {timeout:.0f} s", time.monotonic() - t0
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        why = last_line(done.stderr) if done.returncode > 0 else f"killed by signal {-done.returncode}"
        return False, why, seconds
    return True, last_line(done.stdout) if done.stdout.strip() else "", seconds


def requires_on(dist: md.Distribution, framework: str) -> list[str]:
    canon = re.sub(r"[-_.]+", "-", framework).lower()
    out = []
    for req in dist.requires or []:
        name = re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", name).lower() == canon and "extra ==" not in req:
            out.append(req)
    return out


def _packaging():
    """packaging's Requirement, Version and InvalidVersion: the installed one, else pip's own copy (the
    runtime venv has pip, which installed the set); None when neither is there."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:
        try:
            from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
            from pip._vendor.packaging.version import InvalidVersion, Version
        except ImportError:
            return None
    return Requirement, (InvalidRequirement, InvalidVersion, ValueError), Version


def unmet(requires: list[str], framework: str, installed: str | None) -> list[str]:
    """What of `requires` (Requires-Dist entries on the framework) the installed framework does not meet,
    one line each. Installs are --no-deps, so nothing else compares them: a pin on another torch would
    pass unseen. A pre-release installed (a source build's 2.7.0a0) is compared as it is."""
    if not requires:  # pip would take any framework for it (an index's newest): the set's pin is its contract
        return [f"no Requires-Dist on {framework}: pip would take another {framework} for it; fix: pin it "
                f"({framework}=={installed or 'VERSION'}), as buildctl's extension wheels are"]
    if installed is None:
        return [f"{framework} is not installed, and it requires {'; '.join(requires)}"]
    tools = _packaging()
    if tools is None:
        return ["Requires-Dist cannot be compared: neither packaging nor pip is in this Python"]
    Requirement, invalid, Version = tools
    try:
        version = Version(installed)
    except invalid:
        return [f"Requires-Dist cannot be compared: {framework} {installed} is no version pip reads"]
    out = []
    for text in requires:
        try:
            req = Requirement(text)
            applies = req.marker is None or req.marker.evaluate({"extra": ""})
        except invalid:
            out.append(f"Requires-Dist {text} does not read as a requirement")
            continue
        except Exception as e:  # noqa: BLE001 - a marker naming what this Python cannot tell
            out.append(f"Requires-Dist {text}: its marker cannot be evaluated ({e})")
            continue
        if applies and not req.specifier.contains(version, prereleases=True):
            out.append(f"Requires-Dist {text} is not met: {framework} {installed} is installed")
    return out


def installed_version(framework: dict, torch: dict | None) -> str | None:
    if torch is not None:
        return torch["version"]
    try:
        return md.version(framework["dist"])
    except md.PackageNotFoundError:
        return None


def shared_objects(dist: md.Distribution) -> list[str]:
    return sorted(str(dist.locate_file(f)) for f in (dist.files or []) if str(f).endswith(".so")
                  or re.search(r"\.so(\.\d+)*$", str(f)))


def describe_torch(t: dict) -> str:
    gpu = f"CUDA {t['cuda']}" if t.get("cuda") else f"HIP {t['hip']}" if t.get("hip") else "CPU"
    return f"torch {t['version']} ({gpu}, C++11 ABI {int(bool(t['cxx11_abi']))}, git {t.get('git_version')})"


def built_for(abi: list[dict], requires: list[str], built_against: dict | None, framework: str) -> str:
    """What the package's files say it was built for: its framework pin, CUDA/HIP libraries, C++11 ABI."""
    parts = []
    if built_against:
        parts.append(f"built against {framework} {built_against.get('version')}")
    parts.append("; ".join(f"Requires-Dist: {r}" for r in requires) or f"no {framework} in Requires-Dist")
    libs = sorted({lib for r in abi for lib in r["gpu_libraries"]})
    cuda = sorted({m.group(1) for lib in libs for m in [re.match(r"libcudart\.so\.(\d+)", lib)] if m})
    if cuda:
        parts.append(f"CUDA {', '.join(cuda)}")
    elif libs:
        parts.append("GPU libraries " + ", ".join(libs[:3]))
    abis = {r["cxx11_abi"] for r in abi if r["cxx11_abi"] in (True, False)}
    if len(abis) == 1:
        parts.append(f"C++11 ABI {int(abis.pop())}")
    return ", ".join(parts)


def check_one(entry: dict, framework: dict, torch: dict | None, symbols) -> dict:
    name, module = entry["name"], entry.get("module") or entry["name"].replace("-", "_")
    result = {"name": name, "module": module, "role": entry["role"], "version": None, "requires": [],
              "import": None, "smoke": None, "abi": [], "differs": [], "ok": False}
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        result["differs"].append(f"{name} is not installed")
        result["reason"] = f"{name} is not installed in the runtime venv"
        return result
    result["version"] = dist.version
    result["requires"] = requires_on(dist, framework["dist"])
    installed = installed_version(framework, torch)
    result["differs"] += unmet(result["requires"], framework["dist"], installed)
    ok, why, seconds = run_child(f"import {module}", 600)
    result["import"] = {"ok": ok, "error": None if ok else why, "seconds": round(seconds, 2)}
    if not ok:
        result["differs"].append(f"import {module} fails: {why}")
    if entry.get("smoke"):
        if ok:
            passed, why, seconds = run_child(entry["smoke"], SMOKE_TIMEOUT_S)
            result["smoke"] = {"ok": passed, "detail": why, "seconds": round(seconds, 2)}
            if not passed:
                result["differs"].append(f"smoke check fails: {why}")
        else:
            result["smoke"] = {"ok": None, "detail": "not run: the import failed", "seconds": 0}
    built_against = entry.get("built_against")
    if built_against and built_against.get("version") != installed:
        fw = framework["dist"]
        result["differs"].append(f"built against {fw} {built_against.get('version')}, {fw} {installed} is installed")
    if torch is not None:
        for so in shared_objects(dist):
            try:
                checked = abi_check.check(so, torch, *symbols)
            except abi_check.BadInput as e:
                checked = {"so": so, "cxx11_abi": None, "torch_symbols": 0, "gpu_libraries": [],
                           "differs": [f"unreadable ({e})"]}
            result["abi"].append({k: checked[k] for k in ("so", "cxx11_abi", "torch_symbols", "gpu_libraries",
                                                          "differs")}
                                 | {"missing": checked.get("missing_demangled", [])[:20]})
        for r in result["abi"]:
            if r["differs"]:
                result["differs"].append(f"{os.path.basename(r['so'])}: {'; '.join(r['differs'])}")
    result["ok"] = not result["differs"]
    if not result["ok"]:
        here = describe_torch(torch) if torch else f"{framework['dist']} as installed"
        files_say = built_for(result["abi"], result["requires"], built_against, framework["dist"])
        result["reason"] = f"{name} {dist.version} ({files_say}) does not fit {here}: {' | '.join(result['differs'])}"[:1500]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", required=True, dest="set_file")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        with open(args.set_file, encoding="utf-8") as fh:
            wanted = json.load(fh)
        framework = wanted["framework"]
        entries = [{**e, "role": "extension"} for e in wanted.get("extensions", [])]
        entries += [{"name": n, "role": "beside"} for n in wanted.get("beside", [])]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"ext_set: {args.set_file}: not a set description ({e}); fix: let buildctl write it", file=sys.stderr)
        return 2
    torch = symbols = None
    out: dict = {"framework": framework, "torch": None, "results": []}
    if framework.get("module") == "torch":
        try:
            torch = abi_check.torch_facts(sys.executable)
            libs = abi_check.torch_libraries(torch["dir"])
            defined: set[str] = set()
            for real in libs:
                defined.update(abi_check.dynamic_symbols(real, "defined"))
            untagged = {s.replace(abi_check.ABI_TAG, "") for s in defined if abi_check.ABI_TAG in s}
            symbols = (defined, set().union(*libs.values()), untagged)
        except abi_check.BadInput as e:
            out["error"] = f"the installed torch cannot be read: {e}"
        out["torch"] = torch
    if "error" not in out:
        for entry in entries:
            result = check_one(entry, framework, torch, symbols)
            out["results"].append(result)
            print(f"{entry['role']} {entry['name']}: {'ok' if result['ok'] else result['reason']}", flush=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
