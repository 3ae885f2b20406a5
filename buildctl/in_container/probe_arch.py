#!/usr/bin/env python3
"""What the framework's libraries hold. Arch coverage: which GPU targets they carry device code for (CUDA:
SASS and PTX per sm_ from cuobjdump's listing; ROCm: the code objects of the .hip_fatbin offload
bundles, read here, no ROCm tool needed). Debug information (checks.py's): DWARF sections, and an exported
function resolved to file:line (binutils).

STANDALONE, like probe.py (standard library; cuobjdump when on PATH); shipped next to probe.py, which
imports it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import struct
import subprocess
import sys

_ARCH_FILE = re.compile(r"\.(sm_\d+[a-z]?)\.(cubin|ptx)\s*$")


def parse_cuobjdump_list(text: str) -> dict[str, int]:
    """cuobjdump --list-elf / --list-ptx output -> {sm_XY or compute_XY: number of entries}.

    Lines look like 'ELF file    1: libtorch_cuda.1.sm_90.cubin' and 'PTX file    1: x.1.sm_90.ptx';
    a PTX entry for sm_90 is reported as compute_90 (virtual architecture), as torch's arch list does."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = _ARCH_FILE.search(line)
        if not m:
            continue
        arch, kind = m.group(1), m.group(2)
        if kind == "ptx":
            arch = "compute_" + arch[len("sm_"):]
        counts[arch] = counts.get(arch, 0) + 1
    return counts


def _elf_sections(path: str) -> list[tuple[bytes, int, int]] | None:
    """(name, file offset, size) of each section of an ELF64 little-endian file; None when it is not one
    we can read. OSError and struct.error propagate."""
    with open(path, "rb") as f:
        ident = f.read(64)
        if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            return None
        e_shoff = struct.unpack_from("<Q", ident, 0x28)[0]
        e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
        if not e_shoff or not e_shnum or e_shstrndx >= e_shnum:
            return None
        f.seek(e_shoff)
        table = f.read(e_shentsize * e_shnum)
        headers = [struct.unpack_from("<IIQQQQ", table, i * e_shentsize) for i in range(e_shnum)]
        f.seek(headers[e_shstrndx][4])
        strtab = f.read(headers[e_shstrndx][5])
    return [(strtab[h[0]:strtab.find(b"\0", h[0])], h[4], h[5]) for h in headers]


def elf_section_names(path: str) -> list[str] | None:
    """Section names of an ELF64 little-endian file; None when it is not one we can read."""
    try:
        sections = _elf_sections(path)
    except (OSError, struct.error):
        return None
    return None if sections is None else [name.decode("ascii", "replace") for name, _, _ in sections]


def has_device_code(path: str) -> bool:
    names = elf_section_names(path)
    if names is None:
        return True  # unknown format: let cuobjdump decide
    return any(n in (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment") for n in names)


def find_cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    cands = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "bin", "cuobjdump"))
    cands.append("/usr/local/cuda/bin/cuobjdump")
    # PyPI nvidia-cuda-cuobjdump: nvidia/cu13/bin/cuobjdump (13.x), nvidia/cuda_cuobjdump/bin (12.x)
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            cands += sorted(glob.glob(os.path.join(entry, "nvidia", "*", "bin", "cuobjdump")))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def arch_coverage(mod, facts: dict) -> dict:
    """SASS (cubin) and PTX architectures actually present in the framework's shared libraries."""
    cov: dict = {"state": "ok", "reason": None, "tool": None, "sass": [], "ptx": [], "libraries": []}
    if facts.get("hip"):
        return rocm_arch_coverage(mod)
    if not facts.get("cuda"):
        cov.update(state="n/a", reason="built without CUDA: no device code to list")
        return cov
    tool = find_cuobjdump()
    if not tool:
        cov.update(state="unavailable", reason="cuobjdump not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, "
                   "or the nvidia-cuda-cuobjdump pip package)")
        return cov
    cov["tool"] = tool
    pkg = os.path.dirname(getattr(mod, "__file__", "") or "")
    libs = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(pkg, "**", "*.so*"), recursive=True)
                   if os.path.isfile(p)})
    sass: dict[str, int] = {}
    ptx: dict[str, int] = {}
    for lib in libs:
        if not has_device_code(lib):
            continue
        entry = {"path": os.path.relpath(lib, pkg), "sass": {}, "ptx": {}, "error": None}
        for flag, into, key in (("--list-elf", sass, "sass"), ("--list-ptx", ptx, "ptx")):
            try:
                r = subprocess.run([tool, flag, lib], capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as e:
                entry["error"] = f"{flag}: {e}"
                continue
            counts = parse_cuobjdump_list(r.stdout)
            if r.returncode != 0 and not counts and "does not contain" not in (r.stdout + r.stderr):
                entry["error"] = f"{flag}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
            entry[key] = counts
            for k, n in counts.items():
                into[k] = into.get(k, 0) + n
        if entry["sass"] or entry["ptx"] or entry["error"]:
            cov["libraries"].append(entry)
    cov["sass"] = sorted(sass, key=_arch_sort_key)
    cov["ptx"] = sorted(ptx, key=_arch_sort_key)
    if not cov["libraries"]:
        cov.update(state="unavailable", reason="no library of the package contains CUDA device code")
    return cov


def _arch_sort_key(a: str) -> tuple[int, str]:
    m = re.search(r"(\d+)", a)
    return (int(m.group(1)) if m else 0, a)


#
# A HIP binary keeps its device code in the ELF section .hip_fatbin: one clang offload bundle per HIP
# translation unit ("__CLANG_OFFLOAD_BUNDLE__", entry count, then per entry offset, size and an id
# such as hipv4-amdgcn-amd-amdhsa--gfx90a), each entry an AMDGPU code object (an ELF whose e_flags
# name its gfx target). Read here with the standard library: llvm-objdump --offloading of LLVM 17 does
# not list this (pre-LLVM-18) bundle format, and clang-offload-bundler --list needs the section cut
# out first and is absent from a runtime image anyway.

OFFLOAD_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_BUNDLE_MAGIC = b"CCOB"  # clang >= 18 --offload-compress (ROCm >= 6.2): zstd/zlib inside
EM_AMDGPU = 224
# EF_AMDGPU_MACH (e_flags & 0xff) -> target; read from llc-17 -mcpu=<target> objects in a trixie container.
AMDGPU_MACH = {
    0x20: "gfx600", 0x21: "gfx601", 0x3a: "gfx602", 0x22: "gfx700", 0x23: "gfx701", 0x24: "gfx702",
    0x25: "gfx703", 0x26: "gfx704", 0x3b: "gfx705", 0x28: "gfx801", 0x29: "gfx802", 0x2a: "gfx803",
    0x3c: "gfx805", 0x2b: "gfx810", 0x2c: "gfx900", 0x2d: "gfx902", 0x2e: "gfx904", 0x2f: "gfx906",
    0x30: "gfx908", 0x31: "gfx909", 0x3f: "gfx90a", 0x32: "gfx90c", 0x40: "gfx940", 0x4b: "gfx941",
    0x4c: "gfx942", 0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x42: "gfx1013", 0x36: "gfx1030",
    0x37: "gfx1031", 0x38: "gfx1032", 0x39: "gfx1033", 0x3e: "gfx1034", 0x3d: "gfx1035", 0x45: "gfx1036",
    0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103", 0x43: "gfx1150", 0x4a: "gfx1151",
}


def elf_section_bytes(path: str, name: str) -> bytes | None:
    """The contents of one section of an ELF64 little-endian file; None if absent or not such a file."""
    try:
        for section, offset, size in _elf_sections(path) or ():
            if section == name.encode():
                with open(path, "rb") as f:
                    f.seek(offset)
                    return f.read(size)
    except (OSError, struct.error):
        return None
    return None


def parse_offload_bundles(blob: bytes) -> list[dict]:
    """Entries of every clang offload bundle in `blob`: [{'id', 'offset' (in blob), 'size'}].

    Raises ValueError for a truncated or inconsistent bundle (an entry pointing outside the blob)."""
    entries: list[dict] = []
    pos = blob.find(OFFLOAD_BUNDLE_MAGIC)
    while pos != -1:
        (count,) = struct.unpack_from("<Q", blob, pos + 24)
        if count > 4096:
            raise ValueError(f"offload bundle at {pos}: implausible entry count {count}")
        cursor, end = pos + 32, pos + 32
        for _ in range(count):
            offset, size, id_len = struct.unpack_from("<QQQ", blob, cursor)
            bundle_id = blob[cursor + 24:cursor + 24 + id_len].decode("ascii", "replace")
            cursor += 24 + id_len
            if pos + offset + size > len(blob) or len(bundle_id) != id_len:
                raise ValueError(f"offload bundle at {pos}: entry {bundle_id!r} runs past the end of the section")
            entries.append({"id": bundle_id, "offset": pos + offset, "size": size})
            end = max(end, cursor, pos + offset + size)
        pos = blob.find(OFFLOAD_BUNDLE_MAGIC, end)
    return entries


def bundle_target(bundle_id: str) -> str | None:
    """'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-' -> 'gfx90a:xnack-'; None for the host entry."""
    kind, _, target = bundle_id.partition("--")
    if not kind.startswith("hip") or "amdgcn" not in kind or not target:
        return None
    return target


def code_object_target(data: bytes) -> str | None:
    """The gfx target an AMDGPU code object (ELF, e_machine EM_AMDGPU) was compiled for, from its
    e_flags; 'mach 0x..' for one not in the table; None when it is not an AMDGPU ELF."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or struct.unpack_from("<H", data, 18)[0] != EM_AMDGPU:
        return None
    mach = struct.unpack_from("<I", data, 48)[0] & 0xFF
    return AMDGPU_MACH.get(mach, f"mach 0x{mach:x}")


def rocm_code_objects(path: str) -> dict:
    """{'code_objects': {gfx: {'count', 'bytes'}}, 'error'} for one library's .hip_fatbin."""
    out: dict = {"code_objects": {}, "error": None}
    blob = elf_section_bytes(path, ".hip_fatbin")
    if not blob:
        return out
    if blob.startswith(COMPRESSED_BUNDLE_MAGIC):
        out["error"] = "compressed offload bundle (CCOB, --offload-compress): not read by this probe"
        return out
    try:
        entries = parse_offload_bundles(blob)
    except (ValueError, struct.error) as e:
        out["error"] = f".hip_fatbin: {e}"
        return out
    for e in entries:
        target = bundle_target(e["id"])
        if target is None or e["size"] == 0:
            continue
        seen = code_object_target(blob[e["offset"]:e["offset"] + e["size"]])
        if seen != target.split(":")[0]:
            out["error"] = f"bundle {e['id']} holds a code object for {seen or 'no AMDGPU ELF'}"
            continue
        co = out["code_objects"].setdefault(target, {"count": 0, "bytes": 0})
        co["count"] += 1
        co["bytes"] += e["size"]
    return out


def rocm_arch_coverage(mod) -> dict:
    """The gfx targets with code objects in the framework's libraries (the ROCm counterpart of the
    cuobjdump listing): `gfx` lists them, `libraries` has per-library counts and sizes."""
    cov: dict = {"state": "ok", "reason": None, "tool": "probe.py (.hip_fatbin offload-bundle reader)",
                 "sass": [], "ptx": [], "gfx": [], "libraries": []}
    pkg = os.path.dirname(getattr(mod, "__file__", "") or "")
    libs = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(pkg, "**", "*.so*"), recursive=True)
                   if os.path.isfile(p)})
    found: set[str] = set()
    for lib in libs:
        entry = rocm_code_objects(lib)
        if entry["code_objects"] or entry["error"]:
            cov["libraries"].append({"path": os.path.relpath(lib, pkg), **entry})
            found |= {t.split(":")[0] for t in entry["code_objects"]}  # gfx90a:xnack- covers gfx90a
    cov["gfx"] = sorted(found, key=_arch_sort_key)
    if not cov["libraries"]:
        cov.update(state="unavailable", reason="no library of the package has a .hip_fatbin section")
    return cov


# --------------------------------------------------------------------------- debug information (checks.py's)

# addr2line over a Debug libtorch_cpu.so (~1.3 GB of DWARF) reads its line tables once per call.
ATEN_RESOLVE_TIMEOUT_S = 600.0
ATEN_SOURCE = "aten/src/ATen/"



def _sections(path: str) -> list[str]:
    try:
        out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"\]\s+(\.\S+)", out)


def _exported_functions(path: str, kinds: str) -> list[list[str]]:
    """[address, kind, name] of the dynamic symbols of `path` whose nm kind is in `kinds`."""
    try:
        nm = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [parts for parts in map(str.split, nm.splitlines()) if len(parts) == 3 and parts[1] in kinds]


def _resolve_one_symbol(path: str) -> dict | None:
    """An exported function of `path` resolved to source:line with addr2line, or None."""
    functions = _exported_functions(path, "TtWw")
    # C++ functions first (a library's API); an extension module built with hidden visibility exports
    # only its PyInit_ function (and weak template instances), which must do then.
    functions.sort(key=lambda parts: (not parts[2].startswith("_ZN"), parts[1] not in "Tt"))
    for parts in functions[:20]:
        try:
            res = subprocess.run(["addr2line", "-f", "-C", "-e", path, f"0x{parts[0]}"],
                                 capture_output=True, text=True, timeout=60).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired):
            return None
        if len(res) >= 2 and not res[1].startswith("??"):
            return {"symbol": res[0][:200], "location": res[1][:300]}
    return None


def _resolve_aten_function(path: str, limit: int = 32) -> dict | None:
    """An ATen operator implementation (at::native::...) exported by `path`, resolved to its
    aten/src/ATen file and line: what a crash inside ATen shows in a backtrace. Candidates are taken in
    name order (deterministic) and resolved in one addr2line run (the line tables are read once)."""
    # _ZN2at6native...: a function in namespace at::native (mangled), defined in the text section
    picked = sorted({(name, addr) for addr, _, name in _exported_functions(path, "Tt")
                     if name.startswith("_ZN2at6native")})[:limit]
    if not picked:
        return None
    try:
        res = subprocess.run(["addr2line", "-f", "-C", "-e", path, *(f"0x{addr}" for _, addr in picked)],
                             capture_output=True, text=True, timeout=ATEN_RESOLVE_TIMEOUT_S).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    for function, location in zip(res[0::2], res[1::2], strict=False):  # (function, file:line) pairs
        if ATEN_SOURCE in location:
            return {"symbol": function[:200], "location": location[:300]}
    return None


def debug_info(module_dir: str, build_type: str | None) -> dict:
    libs = sorted(glob.glob(os.path.join(module_dir, "lib", "*.so*")) + glob.glob(os.path.join(module_dir, "_C*.so")))
    if not libs:
        return {"state": "skipped", "reason": f"no shared libraries under {module_dir}", "libraries": []}
    if not (shutil.which("readelf") and shutil.which("addr2line") and shutil.which("nm")):
        return {"state": "skipped", "reason": "binutils (readelf, nm, addr2line) not in the image", "libraries": []}
    rows = []
    for lib in libs[:12]:
        secs = _sections(lib)
        rows.append({"library": os.path.relpath(lib, module_dir), "debug_info": ".debug_info" in secs,
                     "debug_line": ".debug_line" in secs, "bytes": os.path.getsize(lib)})
    with_debug = [r for r in rows if r["debug_info"] and r["debug_line"]]
    resolved = None
    for r in sorted(with_debug, key=lambda r: r["bytes"]):  # the smallest library resolves fastest
        resolved = _resolve_one_symbol(os.path.join(module_dir, r["library"]))
        if resolved:
            resolved["library"] = r["library"]
            break
    aten = None
    aten_lib = next((r for r in with_debug if os.path.basename(r["library"]).startswith("libtorch_cpu.")), None)
    if aten_lib:
        aten = _resolve_aten_function(os.path.join(module_dir, aten_lib["library"]))
        if aten:
            aten["library"] = aten_lib["library"]
    want = build_type in ("Debug", "RelWithDebInfo")
    ok = bool(with_debug) and resolved is not None
    if not want:
        state, reason = "ok", None  # informational for Release
    elif ok:
        state, reason = "ok", None
    else:
        state = "failed"
        reason = ("no library has .debug_info and .debug_line" if not with_debug
                  else "no exported function resolves to a source line")
    return {"state": state, "reason": reason, "build_type": build_type, "libraries": rows, "resolved": resolved,
            "aten": aten}
