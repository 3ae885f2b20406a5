"""demofw: a small framework that honours PyTorch's build-env contract.

The runtime surface mimics torch's names so that a verifier written for torch can read it:
``demofw.__version__``, ``demofw.version`` (``__version__``, ``cuda``, ``debug``,
``git_version``, ``hip``), ``demofw.__config__.show()``, ``demofw.cuda`` (``is_available``,
``device_count``, ``get_arch_list``, ``nccl.version``), ``demofw.backends.cudnn.version()``
and ``demofw._C._GLIBCXX_USE_CXX11_ABI``.
"""

from __future__ import annotations

# _C is the native core: if it cannot load, the ImportError names the missing library.
from demofw import _C, __config__, backends, cuda, version  # noqa: F401
from demofw.version import __version__  # noqa: F401

__all__ = ["__version__", "version", "cuda", "backends", "add", "ops"]


def ops() -> dict:
    """Registered native ops by kind: {'binary': [...], 'unary': [...], 'reduction': [...]}."""
    return _C._ops()


def add(a, b):
    """Element-wise a + b with broadcasting, computed in C++ (numbers, nested lists, buffers)."""
    return _C._binary("add", a, b)


def _make_binary(name):
    def fn(a, b):
        return _C._binary(name, a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name}(a, b) with broadcasting, computed in C++."
    return fn


def _make_unary(name, kind):
    call = _C._unary if kind == "unary" else _C._reduction

    def fn(a):
        return call(name, a)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(a) computed in C++ ({kind})."
    return fn


def _export_ops():
    table = _C._ops()
    for name in table["binary"]:
        if name != "add":
            globals()[name] = _make_binary(name)
            __all__.append(name)
    for kind in ("unary", "reduction"):
        for name in table[kind]:
            globals()[name] = _make_unary(name, kind)
            __all__.append(name)


_export_ops()
