#!/usr/bin/env python3
"""Does a compiled torch extension fit the torch installed here? Standard library + binutils only.

    python3 abi_check.py [--python PY] [--json] PATH...
    python3 abi_check.py [--python PY] --facts      # the torch an extension builds against, as JSON

PATH: an extension's .so files, or folders (an installed package) searched for them. PY: the
interpreter whose torch is checked (default: this one); torch is imported there, in a child.

What is checked, per .so (binutils: nm, c++filt, readelf):
- every undefined dynamic symbol in the c10/at/torch/caffe2 namespaces (and torch's global THP*
  functions) is defined by a library in torch/lib (or torch/_C*.so);
- the C++11 ABI the .so was compiled with (std::__cxx11:: or [abi:cxx11] in its symbols, or the
  old std::string) agrees with torch._C._GLIBCXX_USE_CXX11_ABI;
- the libtorch/c10 and CUDA libraries it needs (DT_NEEDED) exist for this torch.
Exit status: 0 all fit, 1 a mismatch (one line per .so says what differs), 2 bad input.
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys

# Symbols torch should provide: _Z [special prefix] N [cv/ref qualifiers] <c10|at|torch|caffe2> ...
TORCH_NAMESPACE = re.compile(r"^_Z(?:T[VTIS]|GV|Th\d*_|Tv\d+_\d+_)?N[rVKRO]*(?:3c10|2at|5torch|6caffe2)\d")
TORCH_GLOBAL = re.compile(r"^(?:_Z\d+)?THP[A-Za-z]")
# Old-ABI std::string/list in demangled names (c++filt writes `Ss` as std::string).
OLD_ABI = re.compile(
    r"(?<!__cxx11::)\bstd::(?:string|wstring|basic_string<|list<|basic_stringstream<"
    r"|basic_ostringstream<|basic_istringstream<)"
)
NEW_ABI = re.compile(r"std::__cxx11::|\[abi:cxx11\]")
ABI_TAG = "B5cxx11"  # [abi:cxx11] in a mangled name: a function returning a C++11-ABI std::string
TORCH_LIB = re.compile(r"^lib(?:c10|torch|shm|caffe2)\w*\.so")
CUDA_LIB = re.compile(
    r"^lib(?:cudart|cublas|cublasLt|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc"
    r"|c10_cuda|torch_cuda)\w*\.so"
)
HIP_LIB = re.compile(r"^lib(?:amdhip64|c10_hip|torch_hip|rocblas|MIOpen|hipblas)\w*\.so")

# What an extension was built against (for a manifest: run it with --facts in the build venv).
TORCH_FACTS = r"""
import json, os, torch
print(json.dumps({"version": torch.__version__, "git_version": torch.version.git_version,
                  "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI), "cuda": torch.version.cuda,
                  "hip": getattr(torch.version, "hip", None), "dir": os.path.dirname(torch.__file__),
                  "pybind11_abi": [getattr(torch._C, "_PYBIND11_" + k, None)
                                   for k in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")],
                  "cuda_arch_list": torch.cuda.get_arch_list(),
                  "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST")}))
"""


class BadInput(Exception):
    pass


def run(argv, stdin=None):
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    except FileNotFoundError:
        raise BadInput(f"{argv[0]} not found: install binutils") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise BadInput(f"{' '.join(argv)} failed ({last}); name ELF shared objects")
    return done.stdout


def dynamic_symbols(path, which):
    """{name: type letter} of the .so's dynamic symbols, `which` = defined or undefined."""
    symbols = {}
    for line in run(["nm", "-D", f"--{which}-only", path]).splitlines():
        parts = line.split()
        if len(parts) >= 2:
            symbols[parts[-1].split("@")[0]] = parts[-2]
    return symbols


def demangle(names):
    names = list(names)
    if not names:
        return {}
    out = run(["c++filt"], stdin="\n".join(names) + "\n").splitlines()
    return dict(zip(names, out, strict=True))


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", path]))


def cuda_major_differs(libs, torch_cuda):
    """One line when a libcudart.so.N the .so needs is of another CUDA major than torch's, else None."""
    want = (torch_cuda or "").split(".")[0]
    for lib in libs:
        m = re.match(r"libcudart\.so\.(\d+)", lib)
        if m and want and m.group(1) != want:
            return f"needs {lib} (CUDA {m.group(1)}), torch is CUDA {torch_cuda}"
    return None


def abi_of(demangled):
    """True (C++11 ABI), False (old ABI) or None (no std::string/list in any symbol)."""
    new = any(NEW_ABI.search(d) for d in demangled)
    old = any(OLD_ABI.search(d) for d in demangled)
    if new and not old:
        return True
    if old and not new:
        return False
    return None if not (new or old) else "both"


def torch_facts(python):
    try:
        # from "/": `python -c` puts the working folder first on sys.path, and the extensions step runs in
        # PyTorch's source root, whose torch/ folder would be imported instead of the installed torch
        done = subprocess.run([python, "-c", TORCH_FACTS], capture_output=True, text=True, cwd="/")
    except FileNotFoundError:
        raise BadInput(f"--python {python}: no such interpreter; name one with torch installed") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise BadInput(f"--python {python}: `import torch` failed ({tail}); name an interpreter with torch")
    return json.loads(done.stdout)


def torch_libraries(torch_dir):
    """{real path: names a DT_NEEDED may give it} of torch/lib/*.so* (Debian's are links into /usr/lib)."""
    paths = sorted(
        glob.glob(os.path.join(torch_dir, "lib", "*.so*")) + glob.glob(os.path.join(torch_dir, "_C*.so"))
    )
    libs = {}
    for p in paths:
        real = os.path.realpath(p)
        if real not in libs:
            soname = re.findall(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", run(["readelf", "-d", real]))
            libs[real] = {os.path.basename(real), *soname}
        libs[real].add(os.path.basename(p))
    return libs


def installed_from(so_path):
    """(name, version, [Requires-Dist on torch]) of the installed distribution whose RECORD lists so_path."""
    d = os.path.dirname(os.path.abspath(so_path))
    while d != os.path.dirname(d):
        parent = os.path.dirname(d)
        for record in glob.glob(os.path.join(parent, "*.dist-info", "RECORD")):
            rel = os.path.relpath(os.path.abspath(so_path), parent)
            with open(record, encoding="utf-8") as f:
                if not any(line.split(",")[0] == rel for line in f):
                    continue
            meta = {"name": None, "version": None, "torch": []}
            with open(os.path.join(os.path.dirname(record), "METADATA"), encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    value = value.strip()
                    if key == "Name":
                        meta["name"] = value
                    elif key == "Version":
                        meta["version"] = value
                    elif (
                        key == "Requires-Dist"
                        and re.match(r"torch(?![-_.\w])", value)
                        and "extra ==" not in value
                    ):
                        meta["torch"].append(value)
            return meta
        d = parent
    return None


def check(so_path, torch, defined, lib_names, untagged):
    undefined = dynamic_symbols(so_path, "undefined")
    own = dynamic_symbols(so_path, "defined")
    names = demangle(list(undefined) + list(own))
    wanted = sorted(s for s, t in undefined.items() if TORCH_NAMESPACE.match(s) or TORCH_GLOBAL.match(s))
    missing = [s for s in wanted if s not in defined and undefined[s] not in "wv"]
    abi = abi_of(names.values())
    libs = needed(so_path)
    missing_libs = [n for n in libs if TORCH_LIB.match(n) and n not in lib_names]
    gpu_libs = [n for n in libs if CUDA_LIB.match(n) or HIP_LIB.match(n)]
    differs = []
    if abi in (True, False) and abi != torch["cxx11_abi"]:
        differs.append(f"C++11 ABI {int(abi)} here, {int(torch['cxx11_abi'])} in torch")
    if any(CUDA_LIB.match(n) for n in gpu_libs) and not torch["cuda"]:
        differs.append("built for CUDA, torch has none")
    if cuda_major_differs(libs, torch["cuda"]):
        differs.append(cuda_major_differs(libs, torch["cuda"]))
    if any(HIP_LIB.match(n) for n in gpu_libs) and not torch["hip"]:
        differs.append("built for ROCm, torch has none")
    if missing_libs:
        differs.append("needs " + ", ".join(missing_libs) + " which torch lacks")
    if missing:
        gpu = [s for s in missing if re.search(r"::(cuda|hip)::", names[s])]
        abi_bound = [
            s
            for s in missing
            if s not in gpu and (NEW_ABI.search(names[s]) or OLD_ABI.search(names[s]) or s in untagged)
        ]
        other = [s for s in missing if s not in gpu and s not in abi_bound]
        example = (other or abi_bound or gpu)[0]
        differs.append(
            f"{len(missing)} of {len(wanted)} torch symbols undefined in torch ({len(gpu)} CUDA/HIP, "
            f"{len(abi_bound)} C++ ABI-bound, {len(other)} other), e.g. {names[example]}"
        )
    return {
        "so": so_path,
        "cxx11_abi": abi,
        "torch_symbols": len(wanted),
        "missing": missing,
        "missing_demangled": [names[s] for s in missing],
        "needed": libs,
        "missing_libraries": missing_libs,
        "gpu_libraries": gpu_libs,
        "installed_from": installed_from(so_path),
        "differs": differs,
    }


def find_sos(paths):
    found = []
    for p in paths:
        if os.path.isdir(p):
            found += sorted(glob.glob(os.path.join(p, "**", "*.so"), recursive=True))
        elif os.path.isfile(p):
            found.append(p)
        else:
            raise BadInput(
                f"{p}: no such file or folder; name an extension's .so files or its package folder"
            )
    if not found:
        raise BadInput(
            f"{' '.join(paths)}: no .so file there; name an extension's .so files or its package folder"
        )
    return found


def describe_torch(t):
    gpu = f"CUDA {t['cuda']}" if t["cuda"] else f"HIP {t['hip']}" if t["hip"] else "CPU"
    return (
        f"torch {t['version']} (git {t['git_version']}, C++11 ABI {int(t['cxx11_abi'])}, {gpu}, {t['dir']})"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", metavar="PATH")
    parser.add_argument("--facts", action="store_true", help="print the torch's facts as JSON and stop")
    parser.add_argument("--python", default=sys.executable, help="interpreter whose torch is checked")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    try:
        if args.facts:
            print(json.dumps(torch_facts(args.python)))
            return 0
        if not args.paths:
            raise BadInput("no PATH: name an extension's .so files or its package folder")
        sos = find_sos(args.paths)
        torch = torch_facts(args.python)
        libs = torch_libraries(torch["dir"])
        defined = set()
        for real in libs:
            defined.update(dynamic_symbols(real, "defined"))
        untagged = {s.replace(ABI_TAG, "") for s in defined if ABI_TAG in s}  # the old-ABI spelling of those
        results = [check(so, torch, defined, set().union(*libs.values()), untagged) for so in sos]
    except BadInput as e:
        print(f"abi_check: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"torch": torch, "extensions": results}, indent=1))
    else:
        print(describe_torch(torch))
        for r in results:
            src = r["installed_from"]
            built_for = ""
            if src:
                built_for = f" [{src['name']} {src['version']}, Requires-Dist: {'; '.join(src['torch']) or 'no torch'}]"
            abi = {True: "C++11 ABI 1", False: "C++11 ABI 0", None: "ABI unknown", "both": "both ABIs"}[
                r["cxx11_abi"]
            ]
            verdict = "MISMATCH: " + "; ".join(r["differs"]) if r["differs"] else "ok"
            print(f"{r['so']}: {abi}, {r['torch_symbols']} torch symbols{built_for}: {verdict}")
    return 1 if any(r["differs"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
