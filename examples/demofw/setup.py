# demofw's build script, written after PyTorch's setup.py (2.1 era, with the >= 2.4
# FindPython variable). It honours the same environment variables:
#
#   DEBUG / REL_WITH_DEB_INFO   build type when CMAKE_BUILD_TYPE is unset (truthy: ON/1/YES/TRUE/Y)
#   CMAKE_BUILD_TYPE            wins over DEBUG / REL_WITH_DEB_INFO
#   MAX_JOBS                    cmake --build . -- -j $MAX_JOBS (unset with Ninja: Ninja decides)
#   USE_NINJA=0                 use the Makefile generator even when ninja is on PATH
#   CMAKE_GENERATOR             generator override
#   BUILD_* / USE_* / CMAKE_*   forwarded to CMake as -D<NAME>=<value> (USE_CUDA, USE_NCCL,
#                               USE_SYSTEM_NCCL, USE_STATIC_NCCL, USE_HEAVY_UNIT, USE_CCACHE,
#                               CMAKE_{C,CXX,CUDA}_COMPILER_LAUNCHER, ...)
#   TORCH_CUDA_ARCH_LIST        "8.0;9.0", "8.0 9.0", "9.0+PTX", names; unset = Auto
#   TORCH_NVCC_FLAGS            extra nvcc flags
#   CUDA_HOME                   toolkit root ($CUDA_HOME/bin/nvcc); else nvcc on PATH
#   NCCL_ROOT / NCCL_INCLUDE_DIR / NCCL_LIB_DIR / NCCL_VERSION   read by cmake/FindNCCL.cmake
#   _GLIBCXX_USE_CXX11_ABI      0 or 1 (default 1) -> -DGLIBCXX_USE_CXX11_ABI
#   PYTORCH_BUILD_VERSION / PYTORCH_BUILD_NUMBER   wheel version (number > 1 -> .postN)
#
# Commands: `python setup.py bdist_wheel` (dist/*.whl), `pip wheel --no-build-isolation .`,
# `python setup.py develop`. Flags: --cmake (configure again), --cmake-only.
# The CMake build directory is build/ and is reused across runs.

import glob
import os
import shutil
import sys
import sysconfig

cwd = os.path.dirname(os.path.abspath(__file__))
os.chdir(cwd)
sys.path.insert(0, cwd)

from setuptools import Extension, find_packages, setup  # noqa: E402
from setuptools.command.build_ext import build_ext  # noqa: E402
from tools.generate_demofw_version import get_sha, get_version  # noqa: E402
from tools.setup_helpers.cmake import CMake  # noqa: E402
from tools.setup_helpers.env import BUILD_DIR, build_type, check_negative_env_flag  # noqa: E402

################################################################################
# Parameters parsed from command line (as PyTorch's setup.py does)
################################################################################
VERBOSE_SCRIPT = True
RUN_BUILD_DEPS = True
RERUN_CMAKE = False
CMAKE_ONLY = False
filtered_args = []
for i, arg in enumerate(sys.argv):
    if arg == "--cmake":
        RERUN_CMAKE = True
        continue
    if arg == "--cmake-only":
        # Stop once cmake terminates. Leave users a chance to adjust build options.
        CMAKE_ONLY = True
        continue
    if arg == "--":
        filtered_args += sys.argv[i:]
        break
    if arg in ("-q", "--quiet"):
        VERBOSE_SCRIPT = False
    if arg in ("clean", "egg_info", "dist_info", "sdist", "--help", "-h", "--help-commands", "--name", "--version"):
        RUN_BUILD_DEPS = False
    filtered_args.append(arg)
sys.argv = filtered_args

if VERBOSE_SCRIPT:

    def report(*args):
        print(*args, flush=True)

else:

    def report(*args):
        pass


sha = get_sha(cwd)
version = get_version(cwd, sha)
install_dir = os.path.join(cwd, "demofw")
ext_suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


################################################################################
# Build the native code with CMake, before setuptools runs (like build_deps())
################################################################################
def build_deps():
    report("-- Building version " + version)
    report(f"-- Build type {build_type.build_type_string}; build dir {os.path.join(cwd, BUILD_DIR)}")
    cmake = CMake(os.path.join(cwd, BUILD_DIR))
    my_env = os.environ.copy()
    cmake.generate(
        version,
        build_python=True,
        build_test=not check_negative_env_flag("BUILD_TEST"),
        my_env=my_env,
        rerun=RERUN_CMAKE,
        install_dir=install_dir,
        source_dir=cwd,
        build_type=build_type.build_type_string,
    )
    if CMAKE_ONLY:
        report('Finished running cmake. Run "python setup.py bdist_wheel" to build.')
        sys.exit(0)
    cmake.build(my_env, build_type.build_type_string)


class build_ext_copy(build_ext):
    """demofw._C was built by CMake (and installed into demofw/); put it where setuptools
    expects the extension, together with the generated demofw/version.py."""

    def build_extension(self, ext):
        built = os.path.join(install_dir, ext.name.split(".")[-1] + ext_suffix)
        if not os.path.exists(built):
            candidates = glob.glob(os.path.join(install_dir, "_C*.so"))
            raise RuntimeError(
                f"{built} was not produced by the CMake build (found: {candidates}); "
                "run `python setup.py bdist_wheel` without --cmake-only, or remove build/ and retry"
            )
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        report(f"copying {built} -> {dest}")
        shutil.copy2(built, dest)
        version_py = os.path.join(install_dir, "version.py")
        if os.path.exists(version_py) and not self.inplace:
            shutil.copy2(version_py, os.path.join(os.path.dirname(dest), "version.py"))


def configure_extension_build():
    ext_modules = [Extension("demofw._C", sources=[])]
    cmdclass = {"build_ext": build_ext_copy}
    packages = find_packages(include=["demofw", "demofw.*"])
    return ext_modules, cmdclass, packages


if __name__ == "__main__":
    if RUN_BUILD_DEPS:
        build_deps()
    extensions, cmdclass, packages = configure_extension_build()
    setup(
        name="demofw",
        version=version,
        description="A demo framework that honours PyTorch's build-env contract (buildctl example)",
        long_description=open(os.path.join(cwd, "README.md"), encoding="utf-8").read(),
        long_description_content_type="text/markdown",
        ext_modules=extensions,
        cmdclass=cmdclass,
        packages=packages,
        python_requires=">=3.8",
        zip_safe=False,
        license="BSD-3-Clause",
    )
