#!/usr/bin/env python3
"""An extension set's CUDA facts, checked in the builder before anything is published (docs/extensions.md).
Standard library, binutils (readelf) and cuobjdump (CUDA recipes) only.

    python3 cuda_checks.py match --facts BUILT-AGAINST.json --nvcc RELEASE
    python3 cuda_checks.py label --facts BUILT-AGAINST.json --dist torch
    python3 cuda_checks.py wheel WHEEL --facts BUILT-AGAINST.json --dist torch [--archs "8.0;9.0"] --report OUT.json

match: the nvcc's CUDA major is the installed torch's (torch.version.cuda decides; a minor above or below is
reported); label: the local version label naming torch and CUDA (PyG's `pt214cu130`); wheel: its
Requires-Dist pins the exact torch, every .so's libcudart is torch's CUDA major, and, with --archs, the wheel
has device code for every arch asked (SASS each, PTX where `+PTX`).
Each refusal is one line on stderr (`error: ...`: the build's failure message quotes it). Exit status: 0 fits, 1 refused, 2 bad input.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abi_check  # noqa: E402  (beside this file in the container)


class BadInput(Exception):
    pass


def major_minor(text):
    m = re.match(r"^(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def toolchain_match(torch, nvcc):
    """(fits, one line): torch's CUDA decides the nvcc's major; another minor is allowed and said."""
    have, want = major_minor(nvcc), major_minor(torch.get("cuda"))
    if have is None:
        return False, f"nvcc reports no CUDA release ({nvcc!r}); fix: check toolchain.cuda's install"
    if want is None:
        return False, (f"torch {torch['version']} has no CUDA, but the recipe builds CUDA kernels with nvcc {nvcc}; "
                       "fix: drop toolchain.cuda and build.cuda_arch, or take a CUDA torch")
    if have[0] != want[0]:
        return False, (f"nvcc is CUDA {nvcc}, torch {torch['version']} was built with CUDA {torch['cuda']}: "
                       f"another major; fix: set toolchain.cuda.version to {want[0]}.x (pip: nvidia-cuda-nvcc "
                       f"{want[0]}.x; CUDA 12: install apt, Debian trixie's 12.4)")
    if have == want:
        return True, f"nvcc {nvcc} for torch's CUDA {torch['cuda']}"
    side = "below" if have < want else "above"
    return True, f"nvcc {nvcc} for torch's CUDA {torch['cuda']}: a minor {side} torch's {torch['cuda']}: allowed"


def local_label(dist, facts):
    """PyG's scheme: pt<major><minor> and cu<major><minor> (or cpu), e.g. pt214cu130 for torch 2.14.1, CUDA 13.0."""
    m = re.match(r"^(\d+)\.(\d+)", facts["version"])
    if not m:
        raise BadInput(f"{dist} {facts['version']}: not a version a label can name")
    prefix = "pt" if dist == "torch" else re.sub(r"[^a-z0-9]", "", dist.lower())
    cuda = major_minor(facts.get("cuda"))
    return f"{prefix}{m.group(1)}{m.group(2)}" + (f"cu{cuda[0]}{cuda[1]}" if cuda else "cpu")


def device_code(list_elf, list_ptx):
    """The archs cuobjdump lists: {"sass": ["80", "90"], "ptx": ["90"]} (from `x.1.sm_80.cubin`, `x.sm_90.ptx`)."""
    def archs(text, suffix):
        return sorted({m.group(1) for m in re.finditer(rf"\bsm_(\d+[af]?)\.{suffix}\b", text or "")}, key=_arch_key)
    return {"sass": archs(list_elf, "cubin"), "ptx": archs(list_ptx, "ptx")}


def _arch_key(arch):
    return (int(re.match(r"\d+", arch).group(0)), arch)


def missing_archs(found, arch_list):
    """What TORCH_CUDA_ARCH_LIST asks that the device code lacks: ["SASS sm_100", "PTX compute_80"]."""
    missing = []
    for item in filter(None, re.split(r"[;\s]+", arch_list or "")):
        arch, ptx = item.removesuffix("+PTX"), item.endswith("+PTX")
        code = arch.replace(".", "")
        if code not in found["sass"]:
            missing.append(f"SASS sm_{code}")
        if ptx and code not in found["ptx"]:
            missing.append(f"PTX compute_{code}")
    return sorted(missing, key=lambda m: (m.startswith("SASS"), m))


def pin_problem(requires, dist, version):
    """None when Requires-Dist pins exactly `dist==version` (a marker allowed), else the one-line reason."""
    canon = re.sub(r"[-_.]+", "-", dist).lower()
    on = [r for r in requires
          if re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;(]", r, maxsplit=1)[0]).lower() == canon
          and "extra ==" not in r]
    exact = [r for r in on if re.fullmatch(rf"[^=<>!~;]+==\s*{re.escape(version)}\s*(;.*)?", r)]
    if exact and len(exact) == len(on):
        return None
    said = "; ".join(on) if on else f"no {dist} at all"
    return f"no Requires-Dist: {dist}=={version} (it says {said}); fix: pin it (pin_requires.py --version {version})"


def needed(path):
    return abi_check.needed(path)


def cuobjdump(path):
    """(--list-elf, --list-ptx) output; a file without device code lists nothing (cuobjdump exits 1 then)."""
    out = []
    for flag in ("--list-elf", "--list-ptx"):
        try:
            done = subprocess.run(["cuobjdump", flag, path], capture_output=True, text=True)
        except FileNotFoundError:
            raise BadInput("cuobjdump not found: the CUDA toolkit's cuobjdump must be on PATH") from None
        out.append(done.stdout)
    return tuple(out)


def wheel_metadata(zf):
    [meta] = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    headers = zf.read(meta).decode("utf-8").split("\n\n", 1)[0]
    fields = [line.partition(":") for line in headers.splitlines()]
    get = {k: v.strip() for k, _, v in reversed(fields)}
    return get.get("Name"), get.get("Version"), [v.strip() for k, _, v in fields if k == "Requires-Dist"]


def check_wheel(wheel, facts, dist, arch_list=None, pin_version=None):
    """{"wheel", "so": [{"so", "needed", "sass", "ptx", "missing"}], "refused": [one line each]}. `pin_version`:
    the installed distribution's (importlib.metadata), what the pin names and pip compares; torch.__version__ (the
    facts') may carry a local label the distribution has not (PyPI's CUDA torch: 2.14.1+cu130 vs 2.14.1)."""
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as e:
        raise BadInput(f"{wheel}: not a readable wheel ({e})") from None
    report = {"wheel": os.path.basename(wheel), "so": [], "refused": []}
    with zf, tempfile.TemporaryDirectory() as tmp:
        name, version, requires = wheel_metadata(zf)
        problem = pin_problem(requires, dist, pin_version or facts["version"])
        if problem:
            report["refused"].append(f"{name} {version}: {problem}")
        for member in sorted(n for n in zf.namelist() if re.search(r"\.so(\.\d+)*$", n)):
            path = zf.extract(member, tmp)
            libs = needed(path)
            row = {"so": member, "needed": [n for n in libs if abi_check.CUDA_LIB.match(n)]}
            differs = abi_check.cuda_major_differs(libs, facts.get("cuda"))
            if differs:
                report["refused"].append(f"{member}: {differs}")
            if arch_list:
                row.update(device_code(*cuobjdump(path)))
                if row["sass"] or row["ptx"] or row["needed"]:
                    gaps = missing_archs(row, arch_list)
                    row["missing"] = gaps
                    if gaps:
                        report["refused"].append(f"{member}: no device code for {', '.join(gaps)} "
                                                 f"(TORCH_CUDA_ARCH_LIST {arch_list})")
            report["so"].append(row)
        if arch_list and not any(r.get("sass") or r.get("ptx") for r in report["so"]):
            report["refused"].append(f"{name} {version}: no .so has CUDA device code; fix: build with FORCE_CUDA=1 "
                                     "(a GPU-less builder builds CPU-only ops otherwise)")
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("match", "label", "wheel"))
    parser.add_argument("wheel", nargs="?")
    parser.add_argument("--facts", required=True, help="built-against.json (abi_check.py --facts)")
    parser.add_argument("--nvcc", help="match: the nvcc's release, e.g. 13.0")
    parser.add_argument("--dist", default="torch")
    parser.add_argument("--archs", help="wheel: TORCH_CUDA_ARCH_LIST, e.g. 8.0;9.0+PTX")
    parser.add_argument("--report", help="wheel: append its JSON line here")
    parser.add_argument("--version", help="wheel: the framework distribution's version the pin must name")
    args = parser.parse_args(argv)
    try:
        with open(args.facts, encoding="utf-8") as fh:
            facts = json.load(fh)
        if args.what == "match":
            ok, line = toolchain_match(facts, args.nvcc)
            # "error:" leads a refusal: the build's failure message quotes the log's first error line
            print(f"buildctl: {line}" if ok else f"error: {line}", file=sys.stdout if ok else sys.stderr)
            return 0 if ok else 1
        if args.what == "label":
            print(local_label(args.dist, facts))
            return 0
        if not args.wheel:
            raise BadInput("wheel: name the wheel to check")
        report = check_wheel(args.wheel, facts, args.dist, args.archs, args.version)
    except (OSError, ValueError, KeyError, BadInput, abi_check.BadInput) as e:
        print(f"cuda_checks: {e}", file=sys.stderr)
        return 2
    if args.report:
        with open(args.report, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(report) + "\n")
    for row in report["so"]:
        print(f"  {row['so']}: SASS {','.join(row.get('sass', [])) or '-'}, PTX {','.join(row.get('ptx', [])) or '-'}, "
              f"{' '.join(row['needed']) or 'no CUDA library'}")
    for line in report["refused"]:
        print(f"error: refused: {line}", file=sys.stderr)
    return 1 if report["refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
