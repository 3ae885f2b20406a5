"""CUDA toolkit: NVIDIA runfile, distro apt package, PyPI wheels, or already in the base image."""

from __future__ import annotations

from buildctl.recipe.schema import PrebuiltIndex
from buildctl.render.providers.fragment import Fragment, site_packages

PIP_PACKAGES = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-cccl")
TORCHS_OWN = ("nvidia-cuda-runtime", "nvidia-cuda-cccl")  # of the CUDA torch's own release, beside a torch from an index


def fragment(spec, render_stage) -> Fragment | None:
    cuda = spec.toolchain.cuda
    if cuda is None:
        return None
    mm = cuda.major_minor
    # Debian's nvidia-cuda-toolkit is laid out under /usr (nvcc in /usr/bin, headers in /usr/include):
    # CUDA_HOME=/usr, as Debian's own PyTorch build uses.
    home = "/usr" if cuda.install == "apt" else cuda.home
    check = (
        f'nvcc_release="$({home}/bin/nvcc --version | sed -n "s/.*release \\([0-9.]*\\),.*/\\1/p")"'
        f' && if [ "$nvcc_release" != "{mm}" ]; then'
        f' echo "buildctl: nvcc reports CUDA $nvcc_release, recipe pins {mm}" >&2; exit 1; fi'
    )
    common = dict(
        path=(f"{home}/bin",),
        ld_library_path=(f"{home}/lib64",),
        image_env={"CUDA_HOME": home},
        build_env={
            "USE_CUDA": "1",
            "CUDA_HOME": home,
            # Forwarded to CMake by the CMAKE_ prefix rule: the pinned nvcc, not one found on PATH.
            "CMAKE_CUDA_COMPILER": f"{home}/bin/nvcc",
            # Always explicit: unset, PyTorch probes for a GPU and, in a container, guesses.
            "TORCH_CUDA_ARCH_LIST": ";".join(spec.build.cuda_arch),
        },
        image_checks=(check,),
        version_probes={"cuda": f"{home}/bin/nvcc --version | sed -n 's/.*release \\([0-9.]*\\),.*/\\1/p'"},
    )
    if cuda.install == "runfile":
        prefix = f"/usr/local/cuda-{mm}"
        stage = render_stage("cuda_runfile.j2", cuda=cuda, prefix=prefix, runfile=cuda.runfile)
        return Fragment(provider="cuda-runfile", stage=stage, stage_name="cuda", copies=(prefix,),
                        links=((home, prefix),) if home != prefix else (), downloads=(cuda.runfile,), **common)
    if cuda.install == "pip":
        major = cuda.version.split(".")[0]
        root = f"{site_packages(spec)}/nvidia/cu{major}"
        # A torch from an index brings the CUDA runtime it was built with (its cuda-toolkit pin): the toolchain
        # pins the compiler's packages and takes the runtime and its headers of that major from the same resolve.
        torchs = isinstance(spec.framework.source.prebuilt, PrebuiltIndex)
        pins = tuple(f"{p}~={major}.0" if torchs and p in TORCHS_OWN else f"{p}=={cuda.pip_release}"
                     for p in PIP_PACKAGES)
        if spec.extensions:  # the device-code check of each extension wheel (cuda_checks.py); any of the major
            pins += (f"nvidia-cuda-cuobjdump~={major}.0",)  # reads it (13.0 has none on PyPI)
        # The wheels ship lib/ and only versioned sonames; CMake's FindCUDAToolkit wants lib64/ and
        # the unversioned link names, so the toolkit root gets the usual layout.
        links = ((home, root), (f"{root}/lib64", "lib"),
                 (f"{root}/lib/libcudart.so", f"libcudart.so.{cuda.version.split('.')[0]}"))
        return Fragment(provider="cuda-pip", pip_build=pins,
                        pip_runtime=() if torchs else (f"nvidia-cuda-runtime=={cuda.pip_release}",),
                        links=links, **common)
    if cuda.install == "apt":
        # Debian's nvidia-cuda-toolkit (non-free); its nvcc needs a gcc it supports (cuda-gcc, from
        # nvidia-cuda-toolkit-gcc), which CMake gets as the CUDA host compiler.
        common["build_env"].update(CUDAHOSTCXX="/usr/bin/cuda-g++", CMAKE_CUDA_HOST_COMPILER="/usr/bin/cuda-g++")
        return Fragment(provider="cuda-apt", apt_packages=(cuda.apt_package, "nvidia-cuda-toolkit-gcc"),
                        apt_components=("contrib", "non-free"), **common)
    return Fragment(provider="cuda-base-image", **common)
