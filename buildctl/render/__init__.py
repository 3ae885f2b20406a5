"""Spec -> the files a build is made from (pure: no engine, no network): the Dockerfile and build
script from templates/ (rendering.py), each toolchain provider's fragment (providers/), and the
container-side files copied in beside them (buildctl/in_container/)."""

from buildctl.render.rendering import BUILD_COMMAND, Rendered, render, write

__all__ = ["BUILD_COMMAND", "Rendered", "render", "write"]
