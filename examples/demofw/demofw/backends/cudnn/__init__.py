"""cuDNN surface, as torch.backends.cudnn: demofw never links cuDNN."""

from __future__ import annotations

enabled = False


def is_available() -> bool:
    return False


def version() -> int | None:
    """None: demofw is not built with cuDNN (torch returns None the same way)."""
    return None
