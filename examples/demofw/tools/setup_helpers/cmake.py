"""Manages CMake -- after PyTorch's tools/setup_helpers/cmake.py.

The contract that matters to build scripts:

* every environment variable whose name starts with ``BUILD_``, ``USE_`` or ``CMAKE_`` (or
  ends with ``EXITCODE`` / ``EXITCODE__TRYRUN_OUTPUT``) is passed as ``-D<NAME>=<value>``;
* a few other names are passed through unchanged (``TORCH_CUDA_ARCH_LIST``,
  ``CUDA_NVCC_EXECUTABLE``, ...) or renamed (``_GLIBCXX_USE_CXX11_ABI`` ->
  ``GLIBCXX_USE_CXX11_ABI``);
* ``CMAKE_INSTALL_PREFIX`` must not be set in the environment (the build sets it);
* ``MAX_JOBS`` -> ``cmake --build . -- -j $MAX_JOBS``; unset with Ninja, Ninja decides;
* the CMake cache in build/ is reused: configure runs only when build/CMakeCache.txt is
  missing or ``--cmake`` is given (so a second build recompiles nothing).
"""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from .cmake_utils import get_cmake_cache_variables_from_file
from .env import BUILD_DIR, CMAKE_MINIMUM_VERSION_STRING, check_negative_env_flag

# cmake and ninja: the ones installed next to the interpreter (the build venv's `cmake` and
# `ninja` wheels) win, even when the venv is not activated (`.venv/bin/pip wheel
# --no-build-isolation .`); else PATH, as in PyTorch.
_BIN_DIR = os.path.dirname(sys.executable)


def which(name: str) -> str | None:
    return shutil.which(name, path=_BIN_DIR) or shutil.which(name)


USE_NINJA = not check_negative_env_flag("USE_NINJA") and which("ninja") is not None


def _mkdir_p(d: str) -> None:
    os.makedirs(d, exist_ok=True)


class CMake:
    """Manages cmake."""

    def __init__(self, build_dir: str = BUILD_DIR) -> None:
        self._cmake_command = CMake._get_cmake_command()
        self.build_dir = build_dir

    @property
    def _cmake_cache_file(self) -> str:
        return os.path.join(self.build_dir, "CMakeCache.txt")

    @staticmethod
    def _get_cmake_command() -> str:
        cmake = which("cmake")
        if cmake is None:
            raise RuntimeError("no cmake found: install it (pip install cmake, apt-get install cmake)")
        version = CMake._get_version(cmake)
        if version < tuple(int(x) for x in CMAKE_MINIMUM_VERSION_STRING.split(".")):
            raise RuntimeError(f"cmake {'.'.join(map(str, version))} at {cmake} is older than "
                               f"{CMAKE_MINIMUM_VERSION_STRING}")
        return cmake

    @staticmethod
    def _get_version(cmd: str) -> tuple:
        out = subprocess.check_output([cmd, "--version"]).decode("utf-8")
        m = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", out)
        if m is None:
            raise RuntimeError(f"could not parse `{cmd} --version`: {out!r}")
        return tuple(int(x or 0) for x in m.groups())

    def run(self, args: list, env: dict) -> None:
        """Executes cmake with arguments and an environment."""
        command = [self._cmake_command] + args
        print(" ".join(command), flush=True)
        try:
            subprocess.check_call(command, cwd=self.build_dir, env=env)
        except (subprocess.CalledProcessError, KeyboardInterrupt):
            # This error indicates that there was a problem with cmake, the Python backtrace adds no signal here so
            # skip over it by catching the error and exiting manually
            sys.exit(1)

    @staticmethod
    def defines(args: list, **kwargs) -> None:
        """Adds definitions to a cmake argument list."""
        for key, value in sorted(kwargs.items()):
            if value is not None:
                args.append(f"-D{key}={value}")

    def get_cmake_cache_variables(self) -> dict:
        with open(self._cmake_cache_file) as f:
            return get_cmake_cache_variables_from_file(f)

    def generate(self, version: str, build_python: bool, build_test: bool, my_env: dict,
                 rerun: bool, install_dir: str, source_dir: str, build_type: str) -> None:
        """Runs cmake to generate native build files."""
        if rerun and os.path.isfile(self._cmake_cache_file):
            os.remove(self._cmake_cache_file)
        if os.path.exists(self._cmake_cache_file) and not rerun:
            print(f"-- Reusing the CMake cache {self._cmake_cache_file} (pass --cmake or remove "
                  f"{self.build_dir}/ to configure again)", flush=True)
            return

        args = []
        generator = os.getenv("CMAKE_GENERATOR")
        if generator:
            args.append(f"-G{generator}")
        elif USE_NINJA:
            args.append("-GNinja")
            ninja = which("ninja")
            if ninja and ninja != shutil.which("ninja"):
                args.append(f"-DCMAKE_MAKE_PROGRAM={ninja}")

        build_options = {
            # The default value cannot be easily obtained in CMakeLists.txt. We set it here.
            "CMAKE_PREFIX_PATH": sysconfig.get_path("purelib"),
        }

        # Build options that do not start with "BUILD_", "USE_", or "CMAKE_" and are directly controlled by env vars.
        # This is a dict that maps environment variables to the corresponding variable name in CMake.
        additional_options = {
            # Key: environment variable name. Value: Corresponding variable name to be passed to CMake. If you are
            # adding a new build option to this block: Consider making these two names identical and adding this option
            # in the block below.
            "_GLIBCXX_USE_CXX11_ABI": "GLIBCXX_USE_CXX11_ABI",
            "CUDNN_LIB_DIR": "CUDNN_LIBRARY",
            "USE_CUDA_STATIC_LINK": "CAFFE2_STATIC_LINK_CUDA",
        }
        additional_options.update({
            # Build options that have the same environment variable name and CMake variable name and that do not start
            # with "BUILD_", "USE_", or "CMAKE_". If you are adding a new build option, also make sure you add it to
            # CMakeLists.txt.
            var: var
            for var in (
                "BLAS",
                "CUDA_HOST_COMPILER",
                "CUDA_NVCC_EXECUTABLE",
                "CUDA_SEPARABLE_COMPILATION",
                "CUDNN_LIBRARY",
                "CUDNN_INCLUDE_DIR",
                "CUDNN_ROOT",
                "INSTALL_TEST",
                "ONNX_NAMESPACE",
                "ATEN_THREADING",
                "WERROR",
                "OPENSSL_ROOT_DIR",
                "TORCH_CUDA_ARCH_LIST",
            )
        })

        # Aliases which are lower priority than their canonical option
        low_priority_aliases = {
            "CUDA_HOST_COMPILER": "CMAKE_CUDA_HOST_COMPILER",
            "CUDAHOSTCXX": "CUDA_HOST_COMPILER",
            "CMAKE_CUDA_HOST_COMPILER": "CUDA_HOST_COMPILER",
            "CMAKE_CUDA_COMPILER": "CUDA_NVCC_EXECUTABLE",
            "CUDACXX": "CUDA_NVCC_EXECUTABLE",
        }
        for var, val in my_env.items():
            # We currently pass over all environment variables that start with "BUILD_", "USE_", and "CMAKE_". This is
            # because we currently have no reliable way to get the list of all build options we have specified in
            # CMakeLists.txt. (`cmake -L` won't print dependent options when the dependency condition is not met.) We
            # will possibly change this in the future by parsing CMakeLists.txt ourselves (then additional_options would
            # also not be needed to be specified here).
            true_var = additional_options.get(var)
            if true_var is not None:
                build_options[true_var] = val
            elif var.startswith(("BUILD_", "USE_", "CMAKE_")) or var.endswith(("EXITCODE", "EXITCODE__TRYRUN_OUTPUT")):
                if var == "CMAKE_GENERATOR":  # handled with -G above
                    continue
                if var == "CMAKE_PREFIX_PATH":
                    # Keep the purelib entry first, like PyTorch >= 2.1.
                    build_options[var] = ";".join([build_options[var], val])
                    continue
                build_options[var] = val

        for var, val in my_env.items():
            if var in low_priority_aliases:
                key = low_priority_aliases[var]
                if key not in build_options:
                    build_options[key] = val

        # Some options must be post-processed. Ideally, this list will be shrunk to only one or two options in the
        # future, as CMake can detect many of these libraries pretty comfortably. We have them here for now before CMake
        # integration is completed. They appear here not in the CMake.defines call below because they start with either
        # "BUILD_" or "USE_" and must be overwritten here.
        build_options.update({
            # Note: Do not add new build options to this dict if it is directly read from environment variable -- you
            # only need to add one in `CMakeLists.txt`. All build options that start with "BUILD_", "USE_", or "CMAKE_"
            # are automatically passed to CMake; For other options you can add to additional_options above.
            "BUILD_PYTHON": build_python,
            "BUILD_TEST": build_test,
        })

        # Options starting with CMAKE_
        cmake__options = {"CMAKE_INSTALL_PREFIX": install_dir}

        # We set some CMAKE_* options in our Python build code instead of relying on the user's direct settings. Emit an
        # error if the user also attempts to set these CMAKE options directly.
        specified_cmake__options = set(build_options).intersection(cmake__options)
        if len(specified_cmake__options) > 0:
            print(", ".join(specified_cmake__options)
                  + " should not be specified in the environment variable. They are directly set by demofw build script.")
            sys.exit(1)
        build_options.update(cmake__options)

        args.append(f"-DCMAKE_BUILD_TYPE={build_type}")
        CMake.defines(
            args,
            Python_EXECUTABLE=sys.executable,   # PyTorch >= 2.4 (FindPython)
            PYTHON_EXECUTABLE=sys.executable,   # PyTorch <= 2.3 name, kept for compatibility
            TORCH_BUILD_VERSION=version,
            **build_options,
        )

        args.append(source_dir)
        _mkdir_p(self.build_dir)
        self.run(args, env=my_env)

    def build(self, my_env: dict, build_type: str) -> None:
        """Runs cmake to build binaries."""
        build_args = ["--build", ".", "--target", "install", "--config", build_type]

        # Determine the parallelism according to the following priorities:
        # 1) MAX_JOBS environment variable
        # 2) If using the Ninja build system, delegate decision to it.
        # 3) Otherwise, fall back to the number of processors.

        # Allow the user to set parallelism explicitly. If unset, we'll try to figure it out.
        max_jobs = os.getenv("MAX_JOBS")

        if max_jobs is not None or not USE_NINJA:
            # Ninja is capable of figuring out the parallelism on its own: only specify it explicitly when we need to.
            max_jobs = max_jobs or str(multiprocessing.cpu_count())
            # This ``if-else'' clause would be unnecessary when cmake 3.12 becomes minimum, which provides a '-j' option:
            # build_args += ['-j', max_jobs] would be sufficient by then.
            build_args += ["--", "-j", max_jobs]
        self.run(build_args, my_env)
