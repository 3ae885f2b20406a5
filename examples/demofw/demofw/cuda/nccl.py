"""NCCL surface, as torch.cuda.nccl."""

from __future__ import annotations

from demofw import _C

__all__ = ["version", "is_available", "header_version"]


def is_available() -> bool:
    return bool(_C._has_nccl)


def version() -> tuple:
    """(major, minor, patch) of the libnccl loaded at run time (ncclGetVersion), or
    (major, minor, patch, suffix) when the header has a suffix. RuntimeError if demofw was
    built without NCCL."""
    ver = _C._nccl_version()
    major = ver >> 32
    minor = (ver >> 16) & 65535
    patch = ver & 65535
    suffix = _C._nccl_version_suffix().decode("utf-8")
    if suffix == "":
        return (major, minor, patch)
    return (major, minor, patch, suffix)


def header_version() -> tuple:
    """(major, minor, patch) of the nccl.h demofw was compiled against."""
    code = _C._nccl_header_version_code()
    if code < 20900:
        return (code // 1000, (code % 1000) // 100, code % 100)
    return (code // 10000, (code % 10000) // 100, code % 100)
