"""The shapes of probe.json and report.json, checked before the host reads a single field.

probe.json is written inside the verified environment, where the wheel under test has run its own
code (its import, atexit hooks, a patched json module): whatever the file says is untrusted. A
report.json handed to `invoke diff` may come from anywhere. Both are read here with a size cap,
parsed, and validated against strict models (types, string lengths, list and dict sizes, finite
numbers); anything else is refused with one line naming the file, the field and the problem.
What passes is dumped back to plain dicts holding only the fields the models know.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    ValidationError,
    model_validator,
)

from buildctl.errors import InputError

MAX_JSON_BYTES = 8 << 20  # a CUDA torch probe.json is ~20 KB; report.json embeds it
MAX_TEXT = 256 << 10  # __config__.show(), tracebacks
MAX_STR = 16 << 10  # every other string (the probe clips its own strings below this)
MAX_KEY = 256  # dict keys (Build settings names, arch names)
MAX_ITEMS = 4096  # list and dict sizes
MAX_INT = 1 << 63  # beyond any size or count; keeps int -> float conversions finite


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("expected an integer")
    if not -MAX_INT <= v <= MAX_INT:
        raise ValueError("integer out of range")
    return v


def _num(v: Any) -> float | int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("expected a number")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("expected a finite number")
    return _int(v) if isinstance(v, int) else v


def _scalar(v: Any) -> Any:
    """A JSON string (capped), number (finite, in range), true/false or null."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        if len(v) > MAX_STR:
            raise ValueError(f"string longer than {MAX_STR} characters")
        return v
    if isinstance(v, (int, float)):
        return _num(v)
    raise ValueError("expected a string, number, true/false or null")


def _scalar_or_list(v: Any) -> Any:
    if isinstance(v, list):
        if len(v) > 16:
            raise ValueError("list longer than 16 items")
        return [_scalar(x) for x in v]
    return _scalar(v)


Str = Annotated[str, StringConstraints(max_length=MAX_STR)]
LongText = Annotated[str, StringConstraints(max_length=MAX_TEXT)]
Key = Annotated[str, StringConstraints(max_length=MAX_KEY)]
Int = Annotated[int, PlainValidator(_int)]
Num = Annotated[float, PlainValidator(_num)]
Scalar = Annotated[Any, PlainValidator(_scalar)]
ScalarOrList = Annotated[Any, PlainValidator(_scalar_or_list)]
StrList = Annotated[list[Str], Field(max_length=MAX_ITEMS)]


class _Model(BaseModel):
    # strict: no "12" -> 12 or 1 -> True coercion; unknown fields are dropped, never passed on.
    model_config = ConfigDict(strict=True, extra="ignore")


# --------------------------------------------------------------------------- probe.json


class PythonFacts(_Model):
    version: Str | None = None
    executable: Str | None = None
    platform: Str | None = None
    machine: Str | None = None
    cpu_count: Int | None = None


class Gpu(_Model):
    index: Int
    name: Str
    compute_capability: Str | None = None
    memory_total: Int | None = None


class GpuInventory(_Model):
    state: Str | None = None
    reason: Str | None = None
    driver_version: Str | None = None
    cuda_driver_version: Str | None = None
    devices: Annotated[list[Gpu], Field(max_length=MAX_ITEMS)] = []
    source: Str | None = None


class ImportFacts(_Model):
    ok: bool | None = None
    seconds: Num | None = None
    error: Str | None = None
    traceback: LongText | None = None
    file: Str | None = None
    smoke: Str | None = None


class ConfigFacts(_Model):
    text: LongText | None = None
    build_settings: Annotated[dict[Key, Str], Field(max_length=MAX_ITEMS)] = {}


class TcpStoreFacts(_Model):
    state: Str | None = None
    reason: Str | None = None
    libuv: bool | None = None
    use_libuv_env: Str | None = None


class DistributedFacts(_Model):
    available: bool | None = None
    nccl: bool | None = None
    gloo: bool | None = None
    mpi: bool | None = None
    hccl: bool | None = None
    tcpstore: TcpStoreFacts | None = None


class CpuFacts(_Model):
    state: Str | None = None
    reason: Str | None = None
    capability: Str | None = None
    blas: Str | None = None
    lapack: Str | None = None
    mkl: bool | None = None
    mkldnn: bool | None = None
    openmp: bool | None = None
    threads: Int | None = None
    libraries: StrList = []


class RuntimeFacts(_Model):
    cuda_available: bool | None = None
    device_count: Int | None = None
    devices: StrList = []
    error: Str | None = None


class FrameworkFacts(_Model):
    version: Str | None = None
    git_version: Scalar = None
    debug: Scalar = None
    cuda: Str | None = None
    hip: Str | None = None
    cudnn_raw: Scalar = None
    cudnn: Str | None = None
    nccl_raw: ScalarOrList = None
    nccl: Str | None = None
    cxx11_abi: Scalar = None
    arch_list: StrList | None = None


ArchCounts = Annotated[dict[Key, Int], Field(max_length=MAX_ITEMS)]


class CodeObjects(_Model):
    count: Int
    bytes: Int


class LibraryCoverage(_Model):
    path: Str
    sass: ArchCounts = {}  # CUDA (cuobjdump)
    ptx: ArchCounts = {}
    code_objects: Annotated[dict[Key, CodeObjects], Field(max_length=MAX_ITEMS)] = {}  # ROCm (.hip_fatbin)
    error: Str | None = None


class ArchCoverage(_Model):
    state: Str | None = None
    reason: Str | None = None
    tool: Str | None = None
    sass: StrList = []
    ptx: StrList = []
    gfx: StrList | None = None  # present only for a ROCm build: the report tells the two apart by it
    libraries: Annotated[list[LibraryCoverage], Field(max_length=MAX_ITEMS)] = []


class SweepRow(_Model):
    size: Int
    count: Int
    time_us: Num
    time_us_max: Num | None = None
    host_us: Num | None = None
    algbw_gbs: Num
    busbw_gbs: Num
    wrong: Int


class SweepCap(_Model):
    max: Int | None = None
    reason: Str


class GraphLatency(_Model):
    state: Str | None = None
    reason: Str | None = None
    latency_us: Num | None = None
    ops: Int | None = None
    size: Int | None = None


class SweepHeadline(_Model):
    latency_us: Num
    latency_size: Int
    peak_busbw_gbs: Num | None = None
    peak_busbw_size: Int | None = None
    peak_algbw_gbs: Num | None = None
    graph_latency_us: Num | None = None
    wrong: Int | None = None


class Sweep(_Model):
    state: Str | None = None
    reason: Str | None = None
    backend: Str | None = None
    device: Str | None = None
    world_size: Int | None = None
    label: Str | None = None
    timer: Str | None = None
    dtype: Str | None = None
    op: Str | None = None
    iters: Int | None = None
    warmup: Int | None = None
    factor: Int | None = None
    sizes_requested: Annotated[list[Int], Field(max_length=2)] | None = None
    capped: SweepCap | None = None
    rows: Annotated[list[SweepRow], Field(max_length=MAX_ITEMS)] = []
    graph: GraphLatency | None = None
    headline: SweepHeadline | None = None
    seconds: Num | None = None


class AmdGpus(_Model):
    state: Str | None = None
    devices: Int | None = None
    reason: Str | None = None


class NumericsCase(_Model):
    name: Str
    ok: bool
    max_abs_err: Num | None = None
    scale: Num | None = None
    ms: Num | None = None


class Numerics(_Model):
    state: Str | None = None
    reason: Str | None = None
    cases: Annotated[list[NumericsCase], Field(max_length=64)] = []


class CompileCell(_Model):
    backend: Str
    mode: Str
    state: Str
    compile_s: Num | None = None
    run_ms: Num | None = None
    max_abs_err: Num | None = None
    seconds: Num | None = None
    error: Str | None = None


class CompileMatrix(_Model):
    state: Str | None = None
    reason: Str | None = None
    device: Str | None = None
    passed: Int | None = None
    cells: Annotated[list[CompileCell], Field(max_length=64)] = []


class DdpRank(_Model):
    rank: Int | None = None
    loss: Num | None = None
    losses_equal: bool | None = None
    grads_equal_across_ranks: bool | None = None
    grads_match_reference: bool | None = None
    params_equal_after_step: bool | None = None


class Ddp(_Model):
    state: Str | None = None
    reason: Str | None = None
    backend: Str | None = None
    world_size: Int | None = None
    seconds: Num | None = None
    ranks: Annotated[list[DdpRank], Field(max_length=MAX_ITEMS)] = []


class DebugLibrary(_Model):
    library: Str
    debug_info: bool | None = None
    debug_line: bool | None = None
    bytes: Int | None = None


class ResolvedSymbol(_Model):
    symbol: Str | None = None
    location: Str
    library: Str | None = None


class DebugInfo(_Model):
    state: Str | None = None
    reason: Str | None = None
    build_type: Str | None = None
    libraries: Annotated[list[DebugLibrary], Field(max_length=MAX_ITEMS)] = []
    resolved: ResolvedSymbol | None = None


class FrameworkChecks(_Model):
    """checks.py's results (numerics, torch.compile matrix, DDP step, debug information)."""

    state: Str | None = None  # "skipped" with a reason when checks.py was not there
    reason: Str | None = None
    numerics: Numerics | None = None
    compile: CompileMatrix | None = None
    ddp: Ddp | None = None
    debug_info: DebugInfo | None = None


class Probe(_Model):
    """probe.py's JSON (docs/verify.md); every section optional, as a crashed probe writes few."""

    probe_version: Int | None = None
    module: Str | None = None
    started: Str | None = None
    python: PythonFacts | None = None
    errors: StrList = []
    gpus: GpuInventory | None = None
    amd_gpus: AmdGpus | None = None
    import_: ImportFacts | None = Field(default=None, alias="import")
    config: ConfigFacts | None = None
    distributed: DistributedFacts | None = None
    cpu: CpuFacts | None = None
    runtime: RuntimeFacts | None = None
    framework: FrameworkFacts | None = None
    arch_coverage: ArchCoverage | None = None
    checks: FrameworkChecks | None = None
    sweep: Sweep | None = None
    fatal: Str | None = None
    traceback: LongText | None = None
    seconds: Num | None = None


# --------------------------------------------------------------------------- report.json


class WheelFacts(_Model):
    path: Str | None = None
    name: Str
    size: Int | None = None
    sha256: Str | None = None


class CheckModel(_Model):
    name: Str
    expected: Scalar = None
    actual: Scalar = None
    ok: bool | None = None
    detail: Str = ""


class ExpectationsModel(_Model):
    accelerator: Str | None = None
    version: Str | None = None
    cuda: Str | None = None
    hip: Str | None = None
    nccl: Str | None = None
    cudnn: Str | None = None
    arch: StrList | None = None
    build_type: Str | None = None
    features: Annotated[dict[Key, bool], Field(max_length=MAX_ITEMS)] = {}
    sources: Annotated[dict[Key, Str], Field(max_length=MAX_ITEMS)] = {}


class SpecFacts(_Model):
    name: Str | None = None
    accelerator: Str | None = None
    framework: Str | None = None


class ImageFacts(_Model):
    """What `invoke verify --image` verified: the reference given, the image id it resolved to, the Python."""

    reference: Str
    id: Str
    python: Str


class ReportModel(_Model):
    schema_version: Int
    created: Str
    verdict: Str
    mode: Literal["host", "container", "image"]
    module: Str
    wheel: WheelFacts | None = None
    image: ImageFacts | None = None
    environment: Annotated[dict[Key, Scalar], Field(max_length=MAX_ITEMS)] = {}
    spec: SpecFacts | None = None
    expectations: ExpectationsModel = ExpectationsModel()
    checks: Annotated[list[CheckModel], Field(max_length=MAX_ITEMS)] = []
    files: Annotated[dict[Key, Str | None], Field(max_length=16)] = {}
    probe: Probe

    @model_validator(mode="after")
    def _names_what_it_verified(self) -> ReportModel:
        if (self.wheel is None) == (self.image is None):
            raise ValueError("a report names exactly one thing it verified: the wheel or the image")
        return self


# --------------------------------------------------------------------------- reading


def _where(loc: tuple) -> str:
    """A field path for the message: framework.arch_list[3]; odd keys quoted, long ones cut."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        text = str(part)
        if not text.replace("_", "").isalnum() or not text.isascii():
            text = ascii(text[:40])
        out += ("." if out else "") + text[:60]
    return out or "top level"


def _problem(e: ValidationError) -> str:
    errors = e.errors(include_url=False, include_input=False)
    first = errors[0]
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_where(first['loc'])}: {msg}{more}"


def read_json(path: Path, what: str, fix: str, limit: int = MAX_JSON_BYTES) -> Any:
    """The JSON in `path`, read no further than `limit` bytes; InputError naming `what` otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{what}: no such file; {fix}") from None
    except OSError as e:
        raise InputError(f"{what}: unreadable ({e.strerror}); {fix}") from None
    if len(data) > limit:
        raise InputError(f"{what}: larger than {limit >> 20} MiB, refused unread; {fix}")
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise InputError(f"{what}: not JSON ({e.msg} at line {e.lineno} column {e.colno}); {fix}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what}: not UTF-8 text; {fix}") from None
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to read; {fix}") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise InputError(f"{what}: not readable JSON ({str(e)[:120]}); {fix}") from None


def _validate(model: type[_Model], data: Any, what: str, fix: str) -> dict:
    if not isinstance(data, dict):
        raise InputError(f"{what}: top level is {type(data).__name__ if data is not None else 'null'}, "
                         f"not an object; {fix}")
    try:
        parsed = model.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{what}: {_problem(e)}; {fix}") from None
    except RecursionError:
        raise InputError(f"{what}: nested too deeply to read; {fix}") from None
    return parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)


PROBE_FIX = ("fix: probe.py never writes this; the verified environment (the wheel's own code runs "
             "there) replaced or damaged it: inspect the wheel")


def validate_probe(data: Any, what: str = "probe.json") -> dict:
    return _validate(Probe, data, what, PROBE_FIX)


def load_probe(path: Path, what: str) -> dict:
    """probe.json as a plain dict of checked values, or InputError naming `what` and the problem."""
    return validate_probe(read_json(path, what, PROBE_FIX), what)


REPORT_FIX = "fix: give a report.json written by `invoke verify`"


def validate_report(data: Any, what: str) -> dict:
    return _validate(ReportModel, data, what, REPORT_FIX)
