"""Toolchain providers: one small module per way of getting a toolchain piece into the image.

Each provider reads its section of the Spec and returns a `Fragment`: the Dockerfile stage it
needs (rendered from its own template in templates/providers/), what the builder stage copies
from that stage, the pip packages it adds to the venv, the environment it provides to the image
and to the build, and the commands that report its version from inside the image. Adding a
provider touches one module here and one template.
"""

from __future__ import annotations

from buildctl.recipe.schema import Spec
from buildctl.render.providers import ascend, cuda, cudnn, nccl, rocm
from buildctl.render.providers.fragment import Fragment, site_packages

__all__ = ["Fragment", "fragments", "site_packages"]


def fragments(spec: Spec, render_stage) -> list[Fragment]:
    """All fragments for a spec, in install order. render_stage(template, **ctx) -> str."""
    out = []
    for provider in (cuda, cudnn, nccl, rocm, ascend):
        frag = provider.fragment(spec, render_stage)
        if frag is not None:
            out.append(frag)
    return out
