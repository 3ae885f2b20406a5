"""cuDNN: NVIDIA's redist archive or the PyPI wheel PyTorch's own wheels depend on."""

from __future__ import annotations

from buildctl.render.providers.fragment import Fragment, site_packages


def fragment(spec, render_stage) -> Fragment | None:
    cudnn = spec.toolchain.cudnn
    if cudnn is None:
        return None
    major = cudnn.version.split(".")[0]
    if cudnn.install == "pip":
        cuda_major = spec.toolchain.cuda.version.split(".")[0]
        root = f"{site_packages(spec)}/nvidia/cudnn"
        pin = f"nvidia-cudnn-cu{cuda_major}=={cudnn.version}"
        return Fragment(provider="cudnn-pip", pip_build=(pin,), pip_runtime=(pin,),
                        links=((f"{root}/lib/libcudnn.so", f"libcudnn.so.{major}"),),
                        ld_library_path=(f"{root}/lib",),
                        build_env={"USE_CUDNN": "1", "CUDNN_INCLUDE_DIR": f"{root}/include",
                                   "CUDNN_LIB_DIR": f"{root}/lib", "CUDNN_ROOT": root},
                        version_probes={"cudnn": f"echo {cudnn.version}"})
    prefix = f"/usr/local/cudnn-{cudnn.version}"
    stage = render_stage("cudnn_archive.j2", cudnn=cudnn, prefix=prefix, archive=cudnn.archive)
    return Fragment(provider="cudnn-archive", stage=stage, stage_name="cudnn", copies=(prefix,),
                    downloads=(cudnn.archive,), ld_library_path=(f"{prefix}/lib",),
                    build_env={"USE_CUDNN": "1", "CUDNN_INCLUDE_DIR": f"{prefix}/include",
                               "CUDNN_LIB_DIR": f"{prefix}/lib", "CUDNN_ROOT": prefix},
                    version_probes={"cudnn": f"echo {cudnn.version}"})
