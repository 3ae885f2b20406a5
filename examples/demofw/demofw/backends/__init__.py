"""Backends, as torch.backends (demofw has no cuDNN)."""

from demofw.backends import cudnn  # noqa: F401
