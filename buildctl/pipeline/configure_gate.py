"""The configure gate: what CMake decided, compared with what the recipe asks, before anything compiles.

PyTorch's CMake turns a requested feature off with a warning and carries on (no nvcc: "Not compiling
with CUDA"; no cuDNN: USE_CUDNN OFF; an MPI that is not installed: "Not compiling with MPI"), and the
wheel that comes out hours later is not the one asked for. After configure the build script keeps
what CMake recorded (cmake-summary.txt, cmake-cache.txt, cmake-found.txt, and the configure log);
`check` compares it with what the build script exported to CMake (render.Rendered.build_env: the
toolchain providers' variables, the recipe's build.features and build.env) and the recipe's own
fields (build.type, build.cache, python.venv), row by row of one table, FACTS:

    fact            what the recipe implies              where CMake records it
    USE_CUDA        USE_CUDA=1 (toolchain.cuda)          summary USE_CUDA, CMakeCache USE_CUDA
    CUDA version    toolchain.cuda.version               summary "CUDA version", found CUDAToolkit, ...
    ...

plus one row per other USE_*/BUILD_* switch the build exports. What is asked is the recipe's field first
(recipe/field_env.py: build.cuda_arch, build.features.X, toolchain.cuda, build.type), wherever an override
came from; a build.env value that overrides a field with another meaning is a mismatch row of its own.
A switch CMake printed empty (`USE_MKL :`) is its off. A fact the recipe does not pin is shown,
not judged; a fact CMake does not record is shown as such; a fact under a switch CMake turned off
(cuDNN's version once USE_CUDA is off) counts with that switch. A mismatch stops the build before the
compile (`ConfigureRefused`, a StepFailed at step configure), one line per mismatch: what was asked,
what CMake decided, the configure log's line that says why, and the fix.

What CMake recorded is read by cmake_record.py (bounded: the build container wrote it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

from buildctl.errors import StepFailed, one_line
from buildctl.pipeline.cmake_record import Recorded, as_read, on_off, same
from buildctl.recipe import field_env
from buildctl.recipe.schema import Spec
from buildctl.render.rendering import Requested

# --------------------------------------------------------------------------- what the recipe asks


@dataclass(frozen=True)
class Request:
    """What the build asked of CMake: the build script's exported variables (with the recipe field that
    asks each), the spec, and whether the compile cache was on (off: --check-reproducible's rebuild)."""

    env: Mapping[str, Requested]
    spec: Spec
    compile_cache: bool = True

    @cached_property
    def fields(self) -> Mapping[str, field_env.FieldAsk]:
        return field_env.asks(self.spec)

    def _asked(self, name: str) -> Requested | field_env.FieldAsk | None:
        """What the recipe asks of `name`: its field first (build.cuda_arch, build.features.X), wherever an
        override came from; else what the build exports (a toolchain's path, build.env's own variables)."""
        return self.fields.get(name) or self.env.get(name)

    def get(self, name: str) -> str | None:
        found = self._asked(name)
        return found.value if found is not None else None

    def by(self, name: str) -> str:
        found = self._asked(name)
        return found.by if found is not None else ""


@dataclass(frozen=True)
class Asked:
    value: str  # as compared
    by: str  # the recipe field that asks it
    shown: str = ""  # as a person reads it, when not the value (a path prefix: "under /opt/venv/")


def _switch(name: str) -> Callable[[Request], Asked | None]:
    def asked(req: Request) -> Asked | None:
        value = req.get(name)
        return None if value is None else Asked(on_off(value) or value, req.by(name))
    return asked


def _under(variable: str) -> Callable[[Request], Asked | None]:
    """A path CMake must have found under the folder the build exports as `variable`."""
    def asked(req: Request) -> Asked | None:
        folder = req.get(variable)
        if not folder:
            return None
        prefix = folder.rstrip("/") + "/"
        return Asked(prefix, f"{req.by(variable)} ({variable})", f"under {prefix}")
    return asked


def _cuda_version(req: Request) -> Asked | None:
    cuda = req.spec.toolchain.cuda
    return Asked(cuda.major_minor, "toolchain.cuda.version") if cuda is not None else None


def _cudnn_version(req: Request) -> Asked | None:
    cudnn = req.spec.toolchain.cudnn
    return Asked(cudnn.version, "toolchain.cudnn.version") if cudnn is not None else None


def _nccl_version(req: Request) -> Asked | None:
    tc = req.spec.toolchain
    if tc.nccl is not None and tc.nccl.install != "none":
        return Asked(tc.nccl.version, "toolchain.nccl.version")
    if tc.rocm is not None and tc.rocm.rccl:
        return Asked(tc.rocm.rccl, "toolchain.rocm.rccl (RCCL's NCCL API)")
    return None


def _hip_version(req: Request) -> Asked | None:
    rocm = req.spec.toolchain.rocm
    return Asked(".".join(rocm.version.split(".")[:2]), "toolchain.rocm.version") if rocm is not None else None


def _exported(variable: str) -> Callable[[Request], Asked | None]:
    """The value the recipe asks of `variable` (TORCH_CUDA_ARCH_LIST: build.cuda_arch; BLAS: build.env)."""
    def asked(req: Request) -> Asked | None:
        value, by = req.get(variable), req.by(variable)
        return Asked(value, by if by in ("build.cuda_arch", "toolchain.rocm.arch") else f"{by} ({variable})") \
            if value else None
    return asked


def _python(req: Request) -> Asked:
    venv = req.spec.python.venv.rstrip("/")
    return Asked(f"{venv}/bin/python", "python.venv", f"the venv's ({venv}/bin/python)")


def _numpy(req: Request) -> Asked | None:
    if not any(re.match(r"numpy\b", p, re.I) for p in req.spec.python.packages):
        return None
    prefix = f"{req.spec.python.venv.rstrip('/')}/lib/"
    return Asked(prefix, "python.packages (numpy)", f"the venv's (under {prefix})")


def _build_type(req: Request) -> Asked:
    return Asked(req.spec.build.type, "build.type")


def _launcher(req: Request) -> Asked | None:
    cache = req.spec.build.cache
    return Asked(cache, "build.cache") if cache != "none" and req.compile_cache else None


# --------------------------------------------------------------------------- the table

_NOT_FOUND = r"(?:not found|NOT found|Could NOT find|could not be found|[Cc]annot find|Not compiling|Not building|Turning the option off|[Dd]isabl|missing)"


@dataclass(frozen=True)
class Fact:
    """One row: what the recipe implies, where CMake records its decision (the first source that has a
    value is read), how the two compare, the configure log's line that says why they differ (a regex),
    the fix (a template over the build's variables and {asked}, {decided}), and the switch it needs."""

    name: str
    asked: Callable[[Request], Asked | None]
    where: tuple[str, ...]
    compare: str  # switch | version | under | prefix | archs | blas | tool | equal
    why: str
    fix: str
    needs: tuple[str, ...] = ()  # switches any of which, turned off by CMake, takes this fact with it


def _switch_fact(name: str, why: str = "", fix: str = "", needs: tuple[str, ...] = ()) -> Fact:
    word = re.escape(name.split("_", 1)[1]).replace("_", "[_ -]?")
    generic = rf"(?i)\b{word}\b.*{_NOT_FOUND}|{_NOT_FOUND}.*\b{word}\b"
    return Fact(name, _switch(name), (f"summary:{name}", f"cache:{name}"), "switch", why or generic,
                fix or ("CMake turned {name} {decided}: install what it needs (packages.build, the toolchain "
                        "section) or ask for what CMake can build (build.features.{name})"), needs)


FACTS: tuple[Fact, ...] = (
    _switch_fact("USE_CUDA", r"Not compiling with CUDA|nvcc not found|No CMAKE_CUDA_COMPILER|CUDA.*(?:not found|NOT found)",
                 "CMake found no nvcc at CMAKE_CUDA_COMPILER={CMAKE_CUDA_COMPILER} (CUDA_HOME={CUDA_HOME}): point them "
                 "at the toolkit toolchain.cuda installs (an override in build.env is the usual cause), or drop "
                 "toolchain.cuda for a CPU build"),
    Fact("CUDA version", _cuda_version, ("summary:CUDA version", "found:CUDAToolkit version", "found:CUDA version",
                                         "cache:CUDAToolkit_VERSION", "cache:CUDA_VERSION"),
         "version", r"Found CUDA|CUDAToolkit|nvcc", "CMake found CUDA {decided}, the recipe pins {asked}: another "
         "toolkit comes first (CUDA_HOME={CUDA_HOME}, PATH); point CUDA_HOME and CMAKE_CUDA_COMPILER at the "
         "pinned one, or change toolchain.cuda.version", needs=("USE_CUDA",)),
    Fact("CUDA archs", _exported("TORCH_CUDA_ARCH_LIST"), ("summary:TORCH_CUDA_ARCH_LIST", "summary:CUDA flags",
                                                         "summary:NVCC architecture flags"),
         "archs", r"(?i)arch|gencode", "CMake compiles for {decided}, the recipe lists {asked}: TORCH_CUDA_ARCH_LIST "
         "in build.env overrides build.cuda_arch; remove it or list the archs in build.cuda_arch", needs=("USE_CUDA",)),
    _switch_fact("USE_CUDNN", r"Cannot find cuDNN|Could NOT find CUDNN|[Cc]u[Dd][Nn][Nn].*(?:not found|NOT found)",
                 "CMake found no cuDNN (CUDNN_ROOT={CUDNN_ROOT}, CUDNN_INCLUDE_DIR={CUDNN_INCLUDE_DIR}, "
                 "CUDNN_LIB_DIR={CUDNN_LIB_DIR}): check toolchain.cudnn and any CUDNN_* in build.env, or set "
                 "build.features.USE_CUDNN: false", needs=("USE_CUDA",)),
    Fact("cuDNN version", _cudnn_version, ("summary:cuDNN version", "cache:CUDNN_VERSION"), "version",
         r"(?i)cudnn", "CMake found cuDNN {decided}, the recipe pins {asked}: another cuDNN comes first; point "
         "CUDNN_ROOT at the pinned one or change toolchain.cudnn.version", needs=("USE_CUDNN",)),
    Fact("cuDNN library", _under("CUDNN_LIB_DIR"), ("summary:cuDNN library", "cache:CUDNN_LIBRARY_PATH", "found:CUDNN"),
         "under", r"(?i)cudnn", "CMake took {decided}, not the cuDNN toolchain.cudnn installs ({asked}): another "
         "copy comes first on CMake's search path; remove it from the image or point CUDNN_ROOT at it",
         needs=("USE_CUDNN",)),
    _switch_fact("USE_NCCL", r"(?i)nccl.*(?:not found|could not)|Could NOT find NCCL",
                 "CMake turned NCCL {decided}: check toolchain.nccl (NCCL_INCLUDE_DIR={NCCL_INCLUDE_DIR}, "
                 "NCCL_LIB_DIR={NCCL_LIB_DIR}) or set build.features.USE_NCCL: false", ("USE_CUDA", "USE_ROCM")),
    _switch_fact("USE_SYSTEM_NCCL", needs=("USE_NCCL",)),
    Fact("NCCL version", _nccl_version, ("summary:NCCL version", "found:NCCL version", "cache:NCCL_VERSION"),
         "version", r"(?i)nccl", "CMake found NCCL {decided}, the recipe pins {asked}: another NCCL comes first "
         "(a system libnccl-dev?); point NCCL_INCLUDE_DIR/NCCL_LIB_DIR at the pinned one or change the pin",
         needs=("USE_NCCL",)),
    Fact("NCCL library", _under("NCCL_LIB_DIR"), ("summary:NCCL library", "found:NCCL library", "cache:NCCL_LIBRARIES"),
         "under", r"(?i)nccl", "CMake took {decided}, not the NCCL the toolchain installs ({asked}): another copy "
         "comes first; remove it from the image (packages.build) or point NCCL_ROOT at the pinned one",
         needs=("USE_NCCL",)),
    _switch_fact("USE_ROCM", r"(?i)rocm.*(?:not found|could not)|HIP.*not found|Could NOT find HIP",
                 "CMake found no ROCm at ROCM_PATH={ROCM_PATH}: check toolchain.rocm (and ROCM_PATH in build.env)"),
    Fact("ROCm archs", _exported("PYTORCH_ROCM_ARCH"), ("summary:PYTORCH_ROCM_ARCH", "cache:PYTORCH_ROCM_ARCH"),
         "archs", r"(?i)gfx|ROCM_ARCH", "CMake compiles for {decided}, the recipe lists {asked}: remove "
         "PYTORCH_ROCM_ARCH from build.env or list the targets in toolchain.rocm.arch", needs=("USE_ROCM",)),
    Fact("HIP version", _hip_version, ("summary:HIP version", "found:HIP version", "cache:HIP_VERSION"), "version",
         r"(?i)\bhip\b", "CMake found HIP {decided}, the recipe pins ROCm {asked}: another ROCm comes first "
         "(ROCM_PATH={ROCM_PATH}); point ROCM_PATH at the pinned one or change toolchain.rocm.version",
         needs=("USE_ROCM",)),
    _switch_fact("USE_MKLDNN", r"(?i)mkl-?dnn|onednn|ideep"),
    Fact("BLAS", _exported("BLAS"), ("summary:BLAS",), "blas",
         r"(?i)MKL could not be found|Defaulting to Eigen|BLAS.*(?:not found|NOT found|could not)|Could NOT find BLAS",
         "CMake chose BLAS {decided}, the recipe asks {asked} (BLAS in build.env): install it (packages.build) or "
         "ask for the one the image has"),
    _switch_fact("USE_DISTRIBUTED"),
    _switch_fact("USE_GLOO", needs=("USE_DISTRIBUTED",)),
    _switch_fact("USE_MPI", r"Not compiling with MPI|Could NOT find MPI|MPI.*(?:not found|NOT found)",
                 "CMake found no MPI (no mpi.h, no mpicxx): add its development package (libopenmpi-dev) to "
                 "packages.build and its library (libopenmpi40 on trixie, libopenmpi3 on bookworm) to "
                 "packages.runtime, or set build.features.USE_MPI: false",
                 needs=("USE_DISTRIBUTED",)),
    Fact("Python", _python, ("cache:_Python_EXECUTABLE", "summary:Python executable", "cache:Python_EXECUTABLE",
                             "cache:PYTHON_EXECUTABLE"),
         "prefix", r"(?i)python", "CMake took {decided}, not the venv's Python: the recipe's build.env or PATH "
         "names another; remove it (the build script exports Python_EXECUTABLE={Python_EXECUTABLE})"),
    Fact("NumPy", _numpy, ("cache:_Python_NumPy_INCLUDE_DIR", "cache:Python_NumPy_INCLUDE_DIRS",
                           "cache:NUMPY_INCLUDE_DIR", "summary:NumPy include"),
         "prefix", r"(?i)numpy", "CMake took NumPy from {decided}, not the venv's: keep numpy in python.packages "
         "and nothing in build.env that points elsewhere"),
    Fact("build type", _build_type, ("cache:CMAKE_BUILD_TYPE", "summary:Build type", "summary:CMAKE_BUILD_TYPE"),
         "equal", r"(?i)build.type", "CMake builds {decided}, the recipe asks {asked} (build.type): remove "
         "CMAKE_BUILD_TYPE, DEBUG or REL_WITH_DEB_INFO from build.env"),
    Fact("compiler launcher", _launcher, ("summary:C++ launcher", "cache:CMAKE_CXX_COMPILER_LAUNCHER"), "tool",
         r"(?i)ccache|sccache|launcher", "CMake compiles through {decided}, not {asked} (build.cache): the compile "
         "cache would see nothing; check that the framework honours CMAKE_CXX_COMPILER_LAUNCHER"),
)
_SWITCH = re.compile(r"^(?:USE|BUILD)_[A-Z0-9_]+$")


def facts_for(req: Request) -> tuple[Fact, ...]:
    """The table, then one row per other USE_*/BUILD_* switch the build exports."""
    named = {f.name for f in FACTS}
    return FACTS + tuple(_switch_fact(name) for name in req.env if _SWITCH.match(name) and name not in named)


# --------------------------------------------------------------------------- the comparison

OK, MISMATCH, SHOWN, NOT_RECORDED, WITH = "ok", "mismatch", "shown", "not recorded", "off with"


@dataclass(frozen=True)
class Row:
    fact: str
    asked: str | None  # as a person reads it; None: the recipe does not pin it
    asked_by: str
    decided: str | None  # None: CMake recorded nothing of it
    where: str  # where CMake recorded it: "summary USE_CUDA", "CMakeCache CMAKE_BUILD_TYPE", ...
    status: str  # ok | mismatch | shown | not recorded | off with <switch>
    why: str = ""  # a mismatch's line of the configure log
    fix: str = ""

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v not in ("", None) or k in ("asked", "decided")}

    def line(self) -> str:
        """One line per mismatch: asked, decided, why, fix."""
        why = self.why or "the configure log names no reason (see configure.log)"
        decided = (f"build.env exports {self.decided}" if self.where.startswith("build.env") else
                   f"CMake decided {self.decided} ({self.where})")  # an override: the recipe contradicts itself
        return f"{self.fact}: asked {self.asked} ({self.asked_by}), {decided}; why: {why}; fix: {self.fix}"


@dataclass(frozen=True)
class Gate:
    rows: tuple[Row, ...]

    @property
    def mismatches(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.status == MISMATCH)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        """`14 facts as asked, 6 shown (not pinned)` (and what CMake did not record)."""
        counts = {s: sum(r.status == s for r in self.rows) for s in (OK, MISMATCH, SHOWN, NOT_RECORDED)}
        text = f"{counts[OK]} facts as asked" + (f", {counts[MISMATCH]} not" if counts[MISMATCH] else "")
        text += f", {counts[SHOWN]} shown (not pinned)" if counts[SHOWN] else ""
        return text + (f", {counts[NOT_RECORDED]} not recorded by CMake" if counts[NOT_RECORDED] else "")

    def to_dict(self) -> dict:
        return {"ok": self.ok, "judged": sum(r.status in (OK, MISMATCH) for r in self.rows),
                "mismatches": len(self.mismatches), "rows": [r.to_dict() for r in self.rows]}

    def message(self) -> str:
        bad = self.mismatches
        judged = sum(r.status in (OK, MISMATCH) for r in self.rows)
        head = (f"configure gate: CMake decided otherwise than the recipe asks ({len(bad)} of {judged} facts); "
                "nothing was compiled")
        return "\n".join([head, *(f"  {r.line()}" for r in bad)])


_WHERE = {"summary": "CMake summary", "cache": "CMakeCache", "found": "configure log"}


def _fix(template: str, req: Request, asked: str, decided: str, name: str) -> str:
    values = {key: r.value for key, r in req.env.items()}

    class Unset(dict):
        def __missing__(self, key: str) -> str:
            return "(unset)"

    return template.format_map(Unset(values, asked=asked, decided=decided, name=name))


def _why(pattern: str, messages: tuple[str, ...]) -> str:
    """The configure log's line that says why: a CMake warning or error first (it says what CMake did
    about it), else a status line (`Could NOT find X`)."""
    rx = re.compile(pattern)
    hits = [m for m in messages if rx.search(m)]
    hit = next((m for m in hits if m.startswith("CMake ")), hits[0] if hits else "")
    return one_line(hit, 300)


def check(req: Request, recorded: Recorded) -> Gate:
    """Every fact of the table against what CMake recorded."""
    rows: dict[str, Row] = {}
    for fact in facts_for(req):
        asked = fact.asked(req)
        switch = fact.compare == "switch"  # an empty switch is CMake's off: a decision, never "not recorded"
        where, decided = next(((w, v) for w in fact.where
                               if (v := recorded.value(w, empty_is_off=switch)) is not None), ("", None))
        if asked is None and decided is None:
            continue
        place = f"{_WHERE[where.split(':')[0]]} {where.split(':', 1)[1]}" if where else ""
        shown = (asked.shown or asked.value) if asked is not None else None
        dropped = next((n for n in fact.needs if (r := rows.get(n)) is not None and on_off(r.decided or "") == "OFF"
                        and (r.status == MISMATCH or r.status.startswith(WITH))), None)
        if asked is None:
            status = SHOWN
        elif dropped is not None:
            status = f"{WITH} {dropped}"  # counted with the switch CMake turned off
        elif decided is None:
            status = NOT_RECORDED
        elif same(fact.compare, asked.value, decided):
            status = OK
        else:
            status = MISMATCH
        decided = as_read(fact.compare, decided)
        row = Row(fact.name, shown, asked.by if asked else "", decided, place, status)
        if status == MISMATCH:
            row = Row(fact.name, shown, asked.by, decided, place, status, _why(fact.why, recorded.messages),
                      _fix(fact.fix, req, shown or "", decided or "", fact.name))
        rows[fact.name] = row
    for conflict in field_env.conflicts(req.spec):  # the override itself: the recipe contradicts itself
        rows[f"build.env.{conflict.name}"] = Row(
            f"build.env.{conflict.name}", conflict.asked.value, conflict.asked.by, conflict.override,
            f"build.env {conflict.name}", MISMATCH, conflict.line(), conflict.fix())
    return Gate(tuple(rows.values()))


class ConfigureRefused(StepFailed):
    """The configure gate found what CMake decided differs from what the recipe asks: the build stops
    before the compile (step configure, exit 1), with one line per mismatch."""

    def __init__(self, gate: Gate, log: str):
        super().__init__("configure", 1, log, detail=gate.mismatches[0].line())
        self.gate = gate
