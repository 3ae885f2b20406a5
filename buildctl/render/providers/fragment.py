"""What a provider hands the render: its Fragment of the builder and runtime images."""

from __future__ import annotations

from dataclasses import dataclass, field

from buildctl.recipe.schema import Download, Spec


@dataclass(frozen=True)
class Fragment:
    provider: str  # e.g. "cuda-runfile"
    stage: str = ""  # a rendered Dockerfile stage (FROM base AS <name> ...) or ""
    stage_name: str = ""
    copies: tuple[str, ...] = ()  # absolute paths the builder copies from the stage
    links: tuple[tuple[str, str], ...] = ()  # (link, target) symlinks made in the builder
    apt_packages: tuple[str, ...] = ()  # extra apt packages the builder needs
    apt_runtime: tuple[str, ...] = ()  # apt packages the built wheel needs at run time (both images)
    apt_components: tuple[str, ...] = ()  # archive components the packages come from, e.g. non-free
    pip_build: tuple[str, ...] = ()  # pip requirements for the build venv
    pip_runtime: tuple[str, ...] = ()  # pip requirements the wheel needs at run time
    pip_constraints: tuple[str, ...] = ()  # name==version pins for whatever pip installs (pip -c)
    path: tuple[str, ...] = ()  # prepended to PATH in the image
    ld_library_path: tuple[str, ...] = ()
    image_env: dict[str, str] = field(default_factory=dict)  # ENV in builder and runtime images
    build_env: dict[str, str] = field(default_factory=dict)  # exported by the build script
    pre_build: tuple[str, ...] = ()  # shell lines (already quoted) run before the wheel build
    post_build: tuple[str, ...] = ()  # shell lines run after the framework's wheel is built
    image_checks: tuple[str, ...] = ()  # shell lines run at the end of the builder image build
    version_probes: dict[str, str] = field(default_factory=dict)  # name -> shell printing a version
    downloads: tuple[Download, ...] = ()


def site_packages(spec: Spec) -> str:
    return f"{spec.python.venv}/lib/python{spec.python.version}/site-packages"
