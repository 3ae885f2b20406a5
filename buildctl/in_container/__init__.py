"""What runs inside the build and verification containers: standard library only, nothing of buildctl
imported (each file is copied into the container and run there by path).

The probe (probe.py and the modules it imports from its own folder) travels as PROBE_FILES; the build
script's wheel normaliser is WHEELNORM.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent
# probe.py and the modules it imports from its own folder: wherever the probe runs, they all go.
PROBE_FILES = tuple(HERE / name for name in ("probe.py", "probe_facts.py", "probe_arch.py", "probe_sweep.py",
                                             "checks.py"))
PROBE = HERE / "probe.py"
WHEELNORM = HERE / "wheelnorm.py"
FRONTEND = HERE / "frontend.py"
# The build script's wheel repair (auditwheel, from the build venv) and its record, portability.json.
WHEELREPAIR = HERE / "wheelrepair.py"
GPU_SELFCHECK = HERE / "gpu_selfcheck.py"
# The extension step of the build script: the framework's facts (abi_check --facts), Requires-Dist pinned.
EXTENSION_BUILD_FILES = (HERE / "abi_check.py", HERE / "pin_requires.py", HERE / "cuda_checks.py")
# Verification of an extension set, where it is installed.
EXTENSION_CHECK_FILES = (HERE / "ext_set.py", HERE / "abi_check.py")


def verification_files_sha256() -> str:
    """The digest of the files a verification copies into its container (the probe, the extension check):
    a stored report is reused only when it was made by these very files."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted({*PROBE_FILES, *EXTENSION_CHECK_FILES}):
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def probe_inputs(folder: str) -> dict[str, Path]:
    """run_container inputs that put the probe's files into `folder` of a container."""
    return {f"{folder}/{p.name}": p for p in PROBE_FILES}
