"""Build configuration, as torch.__config__."""

from demofw import _C


def show() -> str:
    """A human-readable description of how demofw was built, in the format of
    torch.__config__.show(): 'demofw built with:' then '  - ' lines, the last being
    '  - Build settings: K=V, K=V, ..., '."""
    return _C._show_config()


def build_settings() -> dict:
    """The 'Build settings' line of show() as a dict (values are raw CMake strings)."""
    for line in show().splitlines():
        if line.startswith("  - Build settings: "):
            body = line[len("  - Build settings: "):]
            out = {}
            for item in body.split(", "):
                if "=" in item:
                    k, v = item.split("=", 1)
                    out[k] = v
            return out
    return {}
