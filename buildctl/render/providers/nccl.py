"""NCCL: NVIDIA redist tarball, PyPI wheel, the distro package, built from a git tag, or not used.

Whatever the source, PyTorch is pointed at exactly this copy: USE_SYSTEM_NCCL=1 with
NCCL_INCLUDE_DIR/NCCL_LIB_DIR (PyTorch >= 2.7 would otherwise clone NCCL during the build).
"""

from __future__ import annotations

from buildctl.render.providers.fragment import Fragment, site_packages


def _env(include: str, lib: str, root: str) -> dict[str, str]:
    return {"USE_NCCL": "1", "USE_SYSTEM_NCCL": "1", "NCCL_INCLUDE_DIR": include, "NCCL_LIB_DIR": lib,
            "NCCL_ROOT": root}


def _probe(include: str) -> str:
    return ("awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v=v (v?\".\":\"\") $3} END{print v}' "
            f"{include}/nccl.h")


def fragment(spec, render_stage) -> Fragment | None:
    nccl = spec.toolchain.nccl
    if nccl is None:
        return None
    if nccl.install == "none":
        return Fragment(provider="nccl-none", build_env={"USE_NCCL": "0"})
    if nccl.install == "pip":
        major = spec.toolchain.cuda.version.split(".")[0] if spec.toolchain.cuda else "12"
        root = f"{site_packages(spec)}/nvidia/nccl"
        pin = f"nvidia-nccl-cu{major}=={nccl.version}"
        # The wheel ships only libnccl.so.2; FindNCCL looks for the link name libnccl.so.
        return Fragment(provider="nccl-pip", pip_build=(pin,), pip_runtime=(pin,),
                        links=((f"{root}/lib/libnccl.so", "libnccl.so.2"),),
                        ld_library_path=(f"{root}/lib",),
                        build_env=_env(f"{root}/include", f"{root}/lib", root),
                        version_probes={"nccl": _probe(f"{root}/include")})
    if nccl.install == "apt":
        # Debian's libnccl-dev (non-free) under /usr; the image build fails unless nccl.h is the pin.
        include, lib = "/usr/include", "/usr/lib/x86_64-linux-gnu"
        check = (f'nccl_h="$({_probe(include)})"; if [ "$nccl_h" != {nccl.version} ]; then'
                 f' echo "buildctl: libnccl-dev is NCCL $nccl_h, recipe pins {nccl.version}" >&2; exit 1; fi')
        return Fragment(provider="nccl-apt", apt_packages=("libnccl-dev",), apt_runtime=("libnccl2",),
                        apt_components=("contrib", "non-free"), image_checks=(check,),
                        build_env=_env(include, lib, "/usr"), version_probes={"nccl": _probe(include)})
    prefix = f"/usr/local/nccl-{nccl.version}"
    common = dict(copies=(prefix,), ld_library_path=(f"{prefix}/lib",),
                  build_env=_env(f"{prefix}/include", f"{prefix}/lib", prefix),
                  version_probes={"nccl": _probe(f"{prefix}/include")})
    if nccl.install == "redist":
        stage = render_stage("nccl_redist.j2", nccl=nccl, prefix=prefix, archive=nccl.archive)
        return Fragment(provider="nccl-redist", stage=stage, stage_name="nccl", downloads=(nccl.archive,), **common)
    ref = nccl.ref or f"v{nccl.version}-1"
    stage = render_stage("nccl_source.j2", nccl=nccl, prefix=prefix, ref=ref,
                         cuda_home=spec.toolchain.cuda.home if spec.toolchain.cuda else "/usr/local/cuda")
    return Fragment(provider="nccl-source", stage=stage, stage_name="nccl", **common)
