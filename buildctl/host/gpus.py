"""NVIDIA GPU inventory of this host through NVML (module `pynvml` from nvidia-ml-py).

`inventory()` never raises: a host without a driver (NVMLError_LibraryNotFound: no libnvidia-ml.so.1;
NVMLError_DriverNotLoaded: kernel module absent) gets a normal report whose note is
"no NVIDIA driver". Facts: /work/shared/reference/verification-facts.md section 3.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

NO_DRIVER = "no NVIDIA driver"


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_total_bytes: int


@dataclass(frozen=True)
class GpuReport:
    driver: str | None
    cuda_driver_max: str | None  # newest CUDA the driver supports, e.g. "12.2"
    gpus: list[GpuInfo] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def decode_cuda_driver_version(value: int) -> str:
    """nvmlSystemGetCudaDriverVersion's integer -> 'major.minor' (12020 -> '12.2'; nvml.h
    NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR)."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def inventory() -> GpuReport:
    """Driver version, the newest CUDA it supports, and each GPU's name, capability and memory."""
    try:
        import pynvml
    except ImportError:
        return GpuReport(None, None, [], "pynvml (nvidia-ml-py) is not installed; GPUs not inventoried")
    no_driver = tuple(
        getattr(pynvml, n) for n in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded") if hasattr(pynvml, n)
    )
    try:
        pynvml.nvmlInit()
    except no_driver:
        return GpuReport(None, None, [], NO_DRIVER)
    except pynvml.NVMLError as e:
        return GpuReport(None, None, [], f"NVML failed to start: {e}")
    except OSError as e:  # a broken libnvidia-ml.so
        return GpuReport(None, None, [], f"NVML failed to load: {e}")
    notes: list[str] = []
    try:
        driver = cuda_max = None
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError as e:
            notes.append(f"driver version unreadable: {e}")
        try:
            cuda_max = decode_cuda_driver_version(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        except pynvml.NVMLError as e:
            notes.append(f"CUDA driver version unreadable: {e}")
        gpus: list[GpuInfo] = []
        try:
            count = int(pynvml.nvmlDeviceGetCount())
        except pynvml.NVMLError as e:
            count = 0
            notes.append(f"GPU count unreadable: {e}")
        for i in range(count):
            try:
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                cc_major, cc_minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
                gpus.append(GpuInfo(
                    index=i,
                    name=_text(pynvml.nvmlDeviceGetName(h)),
                    compute_capability=f"{cc_major}.{cc_minor}",
                    memory_total_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                ))
            except pynvml.NVMLError as e:
                notes.append(f"GPU {i} unreadable: {e}")
        if not gpus and not notes:
            notes.append("NVIDIA driver present, no GPU visible")
        return GpuReport(driver, cuda_max, gpus, "; ".join(notes) or f"{len(gpus)} GPU(s)")
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
