"""The model of probe.json: what probe.py writes, every section optional (a crashed probe writes few)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from buildctl.verify.schema.fields import (
    MAX_ITEMS,
    Int,
    Key,
    LongText,
    Num,
    Scalar,
    ScalarOrList,
    Str,
    StrictModel,
    StrList,
)


class PythonFacts(StrictModel):
    version: Str | None = None
    executable: Str | None = None
    platform: Str | None = None
    machine: Str | None = None
    cpu_count: Int | None = None


class Gpu(StrictModel):
    index: Int
    name: Str
    compute_capability: Str | None = None
    memory_total: Int | None = None


class GpuInventory(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    driver_version: Str | None = None
    cuda_driver_version: Str | None = None
    devices: Annotated[list[Gpu], Field(max_length=MAX_ITEMS)] = []
    source: Str | None = None


class ImportFacts(StrictModel):
    ok: bool | None = None
    seconds: Num | None = None
    error: Str | None = None
    traceback: LongText | None = None
    file: Str | None = None
    smoke: Str | None = None


class ConfigFacts(StrictModel):
    text: LongText | None = None
    build_settings: Annotated[dict[Key, Str], Field(max_length=MAX_ITEMS)] = {}


class TcpStoreFacts(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    libuv: bool | None = None
    use_libuv_env: Str | None = None


class DistributedFacts(StrictModel):
    available: bool | None = None
    nccl: bool | None = None
    gloo: bool | None = None
    mpi: bool | None = None
    hccl: bool | None = None
    tcpstore: TcpStoreFacts | None = None


class CpuFacts(StrictModel):
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


class RuntimeFacts(StrictModel):
    cuda_available: bool | None = None
    device_count: Int | None = None
    devices: StrList = []
    error: Str | None = None


class FrameworkFacts(StrictModel):
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


class CodeObjects(StrictModel):
    count: Int
    bytes: Int


class LibraryCoverage(StrictModel):
    path: Str
    sass: ArchCounts = {}  # CUDA (cuobjdump)
    ptx: ArchCounts = {}
    code_objects: Annotated[dict[Key, CodeObjects], Field(max_length=MAX_ITEMS)] = {}  # ROCm (.hip_fatbin)
    error: Str | None = None


class ArchCoverage(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    tool: Str | None = None
    sass: StrList = []
    ptx: StrList = []
    gfx: StrList | None = None  # present only for a ROCm build: the report tells the two apart by it
    libraries: Annotated[list[LibraryCoverage], Field(max_length=MAX_ITEMS)] = []


class SweepRow(StrictModel):
    size: Int
    count: Int
    time_us: Num
    time_us_max: Num | None = None
    host_us: Num | None = None
    algbw_gbs: Num
    busbw_gbs: Num
    wrong: Int


class SweepCap(StrictModel):
    max: Int | None = None
    reason: Str


class GraphLatency(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    latency_us: Num | None = None
    ops: Int | None = None
    size: Int | None = None


class SweepHeadline(StrictModel):
    latency_us: Num
    latency_size: Int
    peak_busbw_gbs: Num | None = None
    peak_busbw_size: Int | None = None
    peak_algbw_gbs: Num | None = None
    graph_latency_us: Num | None = None
    wrong: Int | None = None


class Sweep(StrictModel):
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


class AmdGpus(StrictModel):
    state: Str | None = None
    devices: Int | None = None
    reason: Str | None = None


class NumericsCase(StrictModel):
    name: Str
    ok: bool
    max_abs_err: Num | None = None
    scale: Num | None = None
    ms: Num | None = None


class Numerics(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    cases: Annotated[list[NumericsCase], Field(max_length=64)] = []


class CompileCell(StrictModel):
    backend: Str
    mode: Str
    fullgraph: bool | None = None  # None: a probe before the four axes (backend x mode only)
    dynamic: bool | None = None
    state: Str  # pass | fail | error | timeout | skipped
    compile_s: Num | None = None
    run_ms: Num | None = None
    second_shape_s: Num | None = None
    recompiled: bool | None = None  # whether the second input shape compiled again
    max_abs_err: Num | None = None
    seconds: Num | None = None
    reason: Str | None = None  # why a cell was skipped (it cannot mean anything on this device)
    error: Str | None = None


class CompileMatrix(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    device: Str | None = None
    matrix: Str | None = None  # smoke | full
    passed: Int | None = None
    skipped: Int | None = None
    cells: Annotated[list[CompileCell], Field(max_length=64)] = []


class DdpRank(StrictModel):
    rank: Int | None = None
    loss: Num | None = None
    losses_equal: bool | None = None
    grads_equal_across_ranks: bool | None = None
    grads_match_reference: bool | None = None
    params_equal_after_step: bool | None = None


class Ddp(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    backend: Str | None = None
    world_size: Int | None = None
    seconds: Num | None = None
    ranks: Annotated[list[DdpRank], Field(max_length=MAX_ITEMS)] = []
    teardown: Annotated[list[Str], Field(max_length=MAX_ITEMS)] = []  # a rank's fault after its result


class DebugLibrary(StrictModel):
    library: Str
    debug_info: bool | None = None
    debug_line: bool | None = None
    bytes: Int | None = None


class ResolvedSymbol(StrictModel):
    symbol: Str | None = None
    location: Str
    library: Str | None = None


class DebugInfo(StrictModel):
    state: Str | None = None
    reason: Str | None = None
    build_type: Str | None = None
    libraries: Annotated[list[DebugLibrary], Field(max_length=MAX_ITEMS)] = []
    resolved: ResolvedSymbol | None = None
    aten: ResolvedSymbol | None = None  # an at::native function at its aten/src/ATen file:line (torch)


class DebugAssert(StrictModel):
    """Whether torch's debug-only internal assertions are compiled in (checks.debug_assert)."""

    state: Str | None = None
    reason: Str | None = None
    fired: bool | None = None
    message: Str | None = None  # the INTERNAL ASSERT FAILED line, when it fired
    aliased: bool | None = None  # when it did not: the contract-breaking result went through


class FrameworkChecks(StrictModel):
    """checks.py's results (numerics, torch.compile matrix, DDP step, debug information)."""

    state: Str | None = None  # "skipped" with a reason when checks.py was not there
    reason: Str | None = None
    numerics: Numerics | None = None
    compile: CompileMatrix | None = None
    ddp: Ddp | None = None
    debug_info: DebugInfo | None = None
    debug_assert: DebugAssert | None = None


class ExtensionResult(StrictModel):
    name: Str
    role: Str  # extension (of the artifact's set) | beside (--beside)
    version: Str | None = None
    ok: bool
    reason: LongText | None = None  # one line: what differs, naming both torches
    requires: StrList = []  # its Requires-Dist on the framework
    smoke: Annotated[dict[Key, ScalarOrList], Field(max_length=64)] | None = None


class ExtensionFacts(StrictModel):
    """ext_set.py's findings, added to the probe's by the verification (verify/extensions.py)."""

    torch: Annotated[dict[Key, ScalarOrList], Field(max_length=64)] | None = None
    error: Str | None = None
    results: Annotated[list[ExtensionResult], Field(max_length=MAX_ITEMS)] = []


class Probe(StrictModel):
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
    extensions: ExtensionFacts | None = None
    fatal: Str | None = None
    traceback: LongText | None = None
    seconds: Num | None = None
