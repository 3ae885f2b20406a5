#!/usr/bin/env bash
# Rendered by buildctl from recipe pytorch2.6-cpu-trixie-pyg: builds pytorch into a wheel in /work/out.
# Runs in the builder image with /work (source + build dir) and /cache (compile cache) mounted;
# `invoke build --check-reproducible` runs it again with a fresh build dir at another path
# (BUILDCTL_WORK) and the compile cache off (BUILDCTL_COMPILE_CACHE=off), see docs/reproducible.md.
set -euo pipefail

WORK="${BUILDCTL_WORK:-/work}"
SRC="$WORK/src"
OUT="$WORK/out"
VENV=/opt/venv
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"

# --- PyTorch's build-env contract -------------------------------------------------------------
export USE_CUDA=0
export USE_ROCM=0
export PYTORCH_BUILD_VERSION=2.6.0
export PYTORCH_BUILD_NUMBER=1
export BUILD_TEST=0
export USE_DISTRIBUTED=1
export USE_FBGEMM=0
export USE_GLOO=1
export USE_ITT=0
export USE_KINETO=0
export USE_MKLDNN=0
export USE_MPI=0
export USE_NNPACK=0
export USE_NUMA=0
export USE_PYTORCH_QNNPACK=0
export USE_SYSTEM_LIBS=1
export USE_TENSORPIPE=0
export USE_VULKAN=0
export USE_XNNPACK=0
# The venv's Python for CMake: PYTHON_EXECUTABLE (PyTorch <= 2.3), Python_EXECUTABLE (>= 2.4), and
# CMAKE_PROGRAM_PATH (forwarded by the CMAKE_ prefix rule) so find_program() sees the venv first.
export PYTHON_EXECUTABLE="$VENV/bin/python"
export Python_EXECUTABLE="$VENV/bin/python"
export CMAKE_PROGRAM_PATH="$VENV/bin"
if [ "${BUILDCTL_COMPILE_CACHE:-on}" = on ]; then
# Compile cache: every compiler goes through ccache.
export CMAKE_C_COMPILER_LAUNCHER=ccache
export CMAKE_CXX_COMPILER_LAUNCHER=ccache
export CCACHE_DIR=/cache/ccache CCACHE_COMPILERCHECK=content CCACHE_NOHASHDIR=1
fi
# Recipe's extra environment (wins over the above).
export BLAS=OpenBLAS
export CXXFLAGS=-Wno-dangling-reference
export ONNX_NAMESPACE=onnx

# MAX_JOBS: given by buildctl from the engine's cores and memory (and build.max_jobs or --jobs, neither keyed);
# this fallback applies the same rule when the script runs alone: min(cores, (memory - 2048 MiB)
# / 2560 MiB per job).
if [ -z "${MAX_JOBS:-}" ]; then
  cores=$(nproc)
  mem_kib=$(awk '/^MemTotal:/{print $2}' /proc/meminfo)
  if [ -r /sys/fs/cgroup/memory.max ] && [ "$(cat /sys/fs/cgroup/memory.max)" != max ]; then
    mem_kib=$(( $(cat /sys/fs/cgroup/memory.max) / 1024 ))
  fi
  by_mem=$(( (mem_kib / 1024 - 2048) / 2560 ))
  MAX_JOBS=$(( by_mem < cores ? by_mem : cores ))
  if [ "$MAX_JOBS" -lt 1 ]; then MAX_JOBS=1; fi
fi
export MAX_JOBS

# Reproducible builds (docs/reproducible.md). The build paths never reach the objects: GCC (and CUDA's
# host compiler) map them to "." in debug info, __FILE__ and the like. The flags come from a file at a
# fixed path, so the flags a framework records (torch.__config__.show()'s CXX_FLAGS, CMake's cache)
# name that file, never the build path. Appended: a recipe's own CFLAGS/CXXFLAGS are kept.
PREFIX_MAP_FLAGS=/tmp/buildctl-prefix-map.rsp
printf -- '-ffile-prefix-map=%s=.\n-ffile-prefix-map=%s=build\n' "$SRC" "$SRC/build" > "$PREFIX_MAP_FLAGS"
export CFLAGS="${CFLAGS:+$CFLAGS }@$PREFIX_MAP_FLAGS"
export CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }@$PREFIX_MAP_FLAGS"
if [ "${BUILDCTL_COMPILE_CACHE:-on}" != on ]; then
  # No compile cache at all: also not the one a framework's CMake finds on PATH by itself (USE_CCACHE).
  export CCACHE_DISABLE=1
fi

# This build's credentials, if any (proxy passwords, the real URLs behind the rendered ones, build.env
# values that held them): into this shell's environment, from a file buildctl copied into the
# container, removed at once.
. /usr/local/lib/buildctl/secrets.sh

# Guard: a build that silently uses another Python fails hours later, or links the wrong NumPy.
if [ "$(command -v python)" != "$VENV/bin/python" ]; then
  echo "buildctl: python is $(command -v python || echo missing), not the venv's $VENV/bin/python" >&2
  exit 3
fi

# BUILDCTL_UNTIL=configure|compile|wheel stops after that step (`invoke build --until`).
UNTIL="${BUILDCTL_UNTIL:-}"
# The pipeline reads these lines to know which step runs (and which one failed).
step() { echo "buildctl: step $1"; }
peak_memory() {  # the container's peak memory so far, cgroup v2 or v1
  cat /sys/fs/cgroup/memory.peak 2>/dev/null || cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null || true
}
finish() {  # what every stopping point leaves in $OUT
  peak_memory > "$OUT/peak-memory.txt"
  if [ -f "$SRC/build/.ninja_log" ]; then cp "$SRC/build/.ninja_log" "$OUT/ninja_log.txt"; fi
  ccache --print-stats > "$OUT/cache-stats.txt" || true
}

mkdir -p "$SRC" "$OUT"
rm -rf "${OUT:?}"/*

step source
# Fetched, unpacked and patched once per build directory: a rerun resumes the same tree.
if [ ! -f "$SRC/.buildctl-source-ready" ]; then
  rm -rf "${SRC:?}"/* "$SRC"/.[!.]* 2>/dev/null || true
  buildctl-fetch http://deb.debian.org/debian/pool/main/p/pytorch/pytorch_2.6.0+dfsg.orig.tar.xz 099a9601bc40d67656e75735c44abedb0fbe92d08817852ab7472eebb7e6ddff /tmp/source.tar
  tar -xf /tmp/source.tar -C "$SRC" --strip-components=1 --no-same-owner && rm -f /tmp/source.tar
  buildctl-fetch http://deb.debian.org/debian/pool/main/p/pytorch/pytorch_2.6.0+dfsg-7.debian.tar.xz 3290d4e5168b6e44191882213f61ad41c134a912fe11a44364c2e74f81f68af0 /tmp/patches-00 && mkdir -p "$SRC" && tar -xf /tmp/patches-00 -C "$SRC" --no-same-owner && rm -f /tmp/patches-00 && buildctl-patch series "$SRC" 1 "$SRC"/debian/patches/series 2000-version.patch
  buildctl-patch file "$SRC" 1 /usr/local/share/buildctl/patches/01-pytorch-2.6-debian-wheel-layout.patch pytorch-2.6-debian-wheel-layout.patch
  buildctl-patch file "$SRC" 1 /usr/local/share/buildctl/patches/02-pytorch-2.6-rpc-without-tensorpipe.patch pytorch-2.6-rpc-without-tensorpipe.patch
  buildctl-patch file "$SRC" 1 /usr/local/share/buildctl/patches/03-pytorch-2.6-tcpstore-without-libuv.patch pytorch-2.6-tcpstore-without-libuv.patch
  (
    cd "$SRC"
    cd torch/csrc/jit/serialization && flatc --cpp --gen-mutable --scoped-enums mobile_bytecode.fbs
  )
  touch "$SRC/.buildctl-source-ready"
fi
cd "$SRC"
git config --global --add safe.directory '*' 2>/dev/null || true

# One date for every file the build stamps (compilers' __DATE__, the wheel's zip entries, ...):
# the date of the commit built when the source is a git checkout, else 315532800
# (1980-01-01, the earliest date a zip entry holds): never the clock or a file's mtime.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || true)
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-315532800}"

# Toolchain versions as the image reports them (read into the manifest).
{
  echo "gcc=$(gcc -dumpfullversion)"
  echo "cmake=$(cmake --version | head -n1 | awk '{print $3}')"
  echo "python=$(python -c 'import platform; print(platform.python_version())')"
  echo "source_commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "source_date_epoch=$SOURCE_DATE_EPOCH"
} > "$OUT/versions.txt"
cat "$OUT/versions.txt"
# What apt installed in the builder image, recorded (Debian's mirrors keep only current versions: pinned, a
# recipe would stop building) and compared by `invoke diff` (the manifest's apt).
dpkg-query -W -f='${Package} ${Version}\n' > "$OUT/apt-packages.txt" 2>/dev/null || true
ccache --zero-stats >/dev/null
# A shared compile cache (site cache_url, from the credentials file: never in this script): ccache's
# remote storage behind the local volume. A server that does not answer the probe (connect, AUTH,
# PING) is left out with one warning and the build caches locally; errors later count as misses.
if [ -n "${BUILDCTL_CACHE_URL:-}" ]; then
  if cache_where=$(python - <<'PROBE'
import os, socket, sys
from urllib.parse import unquote, urlsplit
url = urlsplit(os.environ["BUILDCTL_CACHE_URL"])
host, port = url.hostname, url.port or 6379
where = f"{host}:{port}"
commands = []
if "@" in url.netloc:  # ccache's form: PASSWORD@ or USER:PASSWORD@
    user, colon, password = url.netloc.rpartition("@")[0].partition(":")
    commands.append(["AUTH", *map(unquote, [user, password] if colon else [user])])
if url.path.strip("/"):
    commands.append(["SELECT", url.path.strip("/")])
commands.append(["PING"])
try:
    with socket.create_connection((host, port), timeout=3) as sock:
        sock.settimeout(3)
        replies = sock.makefile("rb")
        for command in commands:
            sock.sendall(f"*{len(command)}\r\n".encode() + b"".join(
                f"${len(arg.encode())}\r\n".encode() + arg.encode() + b"\r\n" for arg in command))
            reply = replies.readline()
            if not reply.startswith(b"+"):
                code = (reply[1:].split() or [b"no answer"])[0].decode("ascii", "replace")
                print(f"{where} refused {command[0]} ({code})")
                sys.exit(1)
except OSError as e:
    print(f"{where} did not answer ({e.strerror or type(e).__name__})")
    sys.exit(1)
print(where)
PROBE
  ); then
    export CCACHE_REMOTE_STORAGE="$BUILDCTL_CACHE_URL"
    echo "used" > "$OUT/cache-remote.txt"
    echo "buildctl: shared compile cache at $cache_where, behind the local one"
  else
    echo "unreachable $cache_where" > "$OUT/cache-remote.txt"
    echo "buildctl: warning: shared compile cache: $cache_where; compiling with the local cache only"
  fi
  unset BUILDCTL_CACHE_URL cache_where
fi
echo "buildctl: building with MAX_JOBS=$MAX_JOBS"

step configure
# The frontend comes from the source tree ([build-system] build-backend), not from a version table:
# scikit-build-core (PyTorch >= 2.14) is built the PEP 517 way, setuptools (<= 2.13) through setup.py.
FRONTEND=$(python /usr/local/share/buildctl/frontend.py detect)
echo "frontend=$(python /usr/local/share/buildctl/frontend.py version)" >> "$OUT/versions.txt"
echo "buildctl: frontend $FRONTEND"
# build/ is the CMake build directory on both (scikit-build-core's build-dir): a rerun resumes it.
# CMake is configured only when build/ has no cache yet; its output is kept for the summary either way.
mkdir -p build
if [ ! -f build/CMakeCache.txt ] || [ ! -f build/build.ninja ]; then
  if [ "$FRONTEND" = scikit-build-core ]; then
    python /usr/local/share/buildctl/frontend.py configure build 2>&1 | tee build/.buildctl-configure.log
  else
    python setup.py build --cmake-only 2>&1 | tee build/.buildctl-configure.log
  fi
else
  echo "buildctl: configured already (build/CMakeCache.txt); resuming"
fi
# What the compile step builds: setup.py's CMake installs into the tree (target install); with
# scikit-build-core the wheel step installs, so the compile builds the default target.
if [ "$FRONTEND" = scikit-build-core ]; then BUILD_TARGET=all; else BUILD_TARGET=install; fi
sed -n '/\*\*\*\*\*\*\*\* Summary \*\*\*\*\*\*\*\*/,/^-- \(Configuring done\|Generating done\)/p' \
  build/.buildctl-configure.log > "$OUT/cmake-summary.txt" 2>/dev/null || true
grep -aE '^-- (Found [A-Za-z0-9_]+[ :]|[A-Za-z0-9_]+ version: )' build/.buildctl-configure.log > "$OUT/cmake-found.txt" 2>/dev/null || true
grep -E '^((C|CXX)_[A-Z0-9]+_FOUND|USE_[A-Z0-9_]+|BLAS[A-Z_]*|_?Python_EXECUTABLE|_?Python_NumPy[A-Za-z_]*|NUMPY_[A-Z_]+|CUDA_VERSION|CUDAToolkit_VERSION|NCCL_[A-Z_]+|CUDNN_[A-Z_]+|CAFFE2_USE_CUDNN|TORCH_CUDA_ARCH_LIST|PYTORCH_ROCM_ARCH|CMAKE_BUILD_TYPE|CMAKE_CXX_COMPILER_LAUNCHER):' \
  build/CMakeCache.txt > "$OUT/cmake-cache.txt" 2>/dev/null || true
if [ "$UNTIL" = configure ]; then finish; echo "buildctl: stopped after configure"; exit 0; fi

step compile
if [ -n "${BUILDCTL_TARGETS:-}" ]; then
  # A sample of the build (`invoke build --until compile --target T`): those ninja outputs only.
  read -r -a targets <<<"$BUILDCTL_TARGETS"
  cmake --build build --target "${targets[@]}" -- -j "$MAX_JOBS"
  if command -v cuobjdump >/dev/null; then
    for t in "${targets[@]}"; do
      case "$t" in *.cu.o) echo "== $t"; cuobjdump --list-elf --list-ptx "build/$t" || true ;; esac
    done > "$OUT/cuobjdump.txt"
    cat "$OUT/cuobjdump.txt"
  fi
else
  if [ -f build/.ninja_log ] && command -v ninja >/dev/null; then
    # A tree a stopped build left: ninja's dry run says what is left of the whole graph.
    total=$(ninja -C build -t commands "$BUILD_TARGET" 2>/dev/null | wc -l) || total=0
    left=$(ninja -C build -n "$BUILD_TARGET" 2>/dev/null | grep -c '^\[') || left=0
    if [ "$total" -gt 0 ] && [ "$left" -lt "$total" ]; then
      printf 'built=%s\ntotal=%s\n' "$((total - left))" "$total" > "$OUT/resumed.txt"
      echo "buildctl: resuming: $((total - left)) of $total steps built already, $left to go"
    fi
  fi
  cmake --build build --target "$BUILD_TARGET" -- -j "$MAX_JOBS"
fi
if [ "$UNTIL" = compile ]; then finish; echo "buildctl: stopped after compile"; exit 0; fi

step wheel
rm -rf dist
if [ "$FRONTEND" = scikit-build-core ]; then
# PEP 517, in the build venv as it is (no isolation, no dependencies fetched), into the same build dir:
# CMake configures again (scikit-build-core always does), ninja finds the compile step's work done.
python -m pip wheel --no-build-isolation --no-deps -v -C build-dir=build -w dist .
else
python setup.py bdist_wheel
fi
cp dist/*.whl "$OUT/"
# A wheel that installs outside this image (docs/portable-wheels.md): auditwheel vendors the external
# libraries under hashed names, rewrites NEEDED and RPATH, and tags it with the manylinux policy its ELF
# files allow; never the driver, what the toolchain's wheels provide, nor the recipe's exclusions.
# What it did, or why the wheel stays linux_*, goes to portability.json; a refusal never fails the build.
python /usr/local/share/buildctl/wheelrepair.py "$OUT"/*.whl --report "$OUT/portability.json" \
  '--exclude=libcuda.so*,libcudadebugger.so*,libnvidia-*.so*,libnvcuvid.so*=the GPU driver: the host provides it, never a wheel'
# The same files make the same wheel: member order, dates and permissions fixed (contents untouched).
for wheel in "$OUT"/*.whl; do python /usr/local/share/buildctl/wheelnorm.py "$wheel"; done
if [ "$UNTIL" = wheel ]; then finish; echo "buildctl: stopped after wheel"; exit 0; fi

step extensions
# Each extension against the framework of this build, installed into this venv first, in the recipe's
# order: PEP 517 in the venv as it is (pip wheel --no-build-isolation --no-deps), each from a folder of
# its own in the build dir (a rerun resumes it), its Requires-Dist on torch pinned to this build.
EXT="$WORK/ext"
mkdir -p "$EXT" "$OUT/extensions"
python -m pip install --no-deps --force-reinstall --no-compile "$OUT"/*.whl
FRAMEWORK_VERSION=$(python -c 'import importlib.metadata as m; print(m.version("torch"))')
# What every extension is built against: version, git hash, C++11 ABI, CUDA/HIP, arch list.
python /usr/local/share/buildctl/abi_check.py --facts > "$OUT/extensions/built-against.json"
# Each extension wheel's version gets a local label naming this torch and its CUDA (PyG's scheme,
# 2.1.2+pt214cu130): one index holds a set per torch, and pip takes the set whose pin fits the torch asked.
EXT_LABEL=$(python /usr/local/share/buildctl/cuda_checks.py label --facts "$OUT/extensions/built-against.json" --dist torch)
# An extension's objects fit one framework: built against another (a patched rebuild), it starts over
# from its pristine source (the compile cache gives back whatever the change left alone).
AGAINST=$(python -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$OUT/extensions/built-against.json")
AGAINST="$AGAINST $(sha256sum "$OUT"/*.whl | awk '{print $1}' | tr '\n' ' ')"
# setuptools replaces its own optimisation and warning flags with CFLAGS/CXXFLAGS (the framework's are
# not an extension's); CPPFLAGS is appended: the build paths map to "ext" there.
unset CFLAGS CXXFLAGS
printf -- '-ffile-prefix-map=%s=ext\n' "$EXT" > /tmp/buildctl-ext-prefix-map.rsp
export CPPFLAGS="${CPPFLAGS:+$CPPFLAGS }@/tmp/buildctl-ext-prefix-map.rsp"
# The compile cache through PATH: setuptools and torch's ninja call the compilers by name.
if [ "${BUILDCTL_COMPILE_CACHE:-on}" = on ]; then
  export PATH="/usr/lib/ccache:$PATH"
fi
# setuptools' build_ext compiles an extension's modules MAX_JOBS at a time (PyG's setup.py turns ninja off).
printf '[build_ext]\nparallel = %s\n' "$MAX_JOBS" > /tmp/buildctl-build-ext.cfg
export DIST_EXTRA_CONFIG=/tmp/buildctl-build-ext.cfg
: > "$OUT/extensions/built.txt"
# The version an extension built above became (its `requires:` pins it in a later one's Requires-Dist).
built_version() { awk -v name="$1" '$1 == name { for (i = 2; i <= NF; i++) if ($i ~ /^version=/) print substr($i, 9) }' "$OUT/extensions/built.txt"; }

# --- torch-scatter (torch-scatter==2.1.2)
echo "buildctl: extension torch-scatter"
dir="$EXT/torch-scatter"
if [ "$(cat "$dir/.buildctl-against" 2>/dev/null)" != "$AGAINST" ]; then
  rm -rf "$dir" "$EXT/.download" && mkdir -p "$dir" "$EXT/.download"
  # The sdist by name==version, from the index, checked against the recipe's sha256 before anything runs.
  echo 'torch-scatter==2.1.2 --hash=sha256:69b3aa435f2424ac6a1bfb6ff702da6eb73b33ca0db38fb26989c74159258e47' > "$EXT/.download/requirement.txt"
  # (the site's index: its credentials, if any, came with the others as PIP_INDEX_URL)
  python -m pip download --no-deps --no-binary :all: --no-build-isolation --require-hashes \
    -r "$EXT/.download/requirement.txt" -d "$EXT/.download"
  tar -xf "$EXT"/.download/*.tar.gz -C "$dir" --strip-components=1 --no-same-owner
  rm -rf "$EXT/.download"
  echo "$AGAINST" > "$dir/.buildctl-against"
fi
(
  cd "$dir"
  started=$(date +%s)
  ext_frontend=$(python /usr/local/share/buildctl/frontend.py detect)
  rm -rf dist
  if [ "$ext_frontend" = scikit-build-core ]; then
    python -m pip wheel --no-build-isolation --no-deps -v -C build-dir=build -w dist .
  else
    python -m pip wheel --no-build-isolation --no-deps -v -w dist .
  fi
  for wheel in dist/*.whl; do
    pinned=$(python /usr/local/share/buildctl/pin_requires.py "$wheel" --dist torch --version "$FRAMEWORK_VERSION" --label "$EXT_LABEL" --out "$OUT/extensions")
    # Before anything is published: the exact torch pin, every .so's CUDA major.
    python /usr/local/share/buildctl/cuda_checks.py wheel "$pinned" --facts "$OUT/extensions/built-against.json" \
      --dist torch --version "$FRAMEWORK_VERSION" --report "$OUT/extensions/checks.jsonl"
  done
  version=$(basename "$pinned" | cut -d- -f2)
  echo "torch-scatter seconds=$(( $(date +%s) - started )) frontend=$ext_frontend version=$version" >> "$OUT/extensions/built.txt"
)

# --- torch-sparse (torch-sparse==0.6.18)
echo "buildctl: extension torch-sparse"
dir="$EXT/torch-sparse"
if [ "$(cat "$dir/.buildctl-against" 2>/dev/null)" != "$AGAINST" ]; then
  rm -rf "$dir" "$EXT/.download" && mkdir -p "$dir" "$EXT/.download"
  # The sdist by name==version, from the index, checked against the recipe's sha256 before anything runs.
  echo 'torch-sparse==0.6.18 --hash=sha256:2f14c510a6e93f404c6ea357210615b3c15a71731f9dbd86f25434e34fb5a741' > "$EXT/.download/requirement.txt"
  # (the site's index: its credentials, if any, came with the others as PIP_INDEX_URL)
  python -m pip download --no-deps --no-binary :all: --no-build-isolation --require-hashes \
    -r "$EXT/.download/requirement.txt" -d "$EXT/.download"
  tar -xf "$EXT"/.download/*.tar.gz -C "$dir" --strip-components=1 --no-same-owner
  rm -rf "$EXT/.download"
  echo "$AGAINST" > "$dir/.buildctl-against"
fi
(
  cd "$dir"
  started=$(date +%s)
  ext_frontend=$(python /usr/local/share/buildctl/frontend.py detect)
  rm -rf dist
  if [ "$ext_frontend" = scikit-build-core ]; then
    python -m pip wheel --no-build-isolation --no-deps -v -C build-dir=build -w dist .
  else
    python -m pip wheel --no-build-isolation --no-deps -v -w dist .
  fi
  for wheel in dist/*.whl; do
    pinned=$(python /usr/local/share/buildctl/pin_requires.py "$wheel" --dist torch --version "$FRAMEWORK_VERSION" \
      --require "torch-scatter==$(built_version torch-scatter)" --label "$EXT_LABEL" --out "$OUT/extensions")
    # Before anything is published: the exact torch pin, every .so's CUDA major.
    python /usr/local/share/buildctl/cuda_checks.py wheel "$pinned" --facts "$OUT/extensions/built-against.json" \
      --dist torch --version "$FRAMEWORK_VERSION" --report "$OUT/extensions/checks.jsonl"
  done
  version=$(basename "$pinned" | cut -d- -f2)
  echo "torch-sparse seconds=$(( $(date +%s) - started )) frontend=$ext_frontend version=$version" >> "$OUT/extensions/built.txt"
)

# --- torch-cluster (torch-cluster==1.6.3)
echo "buildctl: extension torch-cluster"
dir="$EXT/torch-cluster"
if [ "$(cat "$dir/.buildctl-against" 2>/dev/null)" != "$AGAINST" ]; then
  rm -rf "$dir" "$EXT/.download" && mkdir -p "$dir" "$EXT/.download"
  # The sdist by name==version, from the index, checked against the recipe's sha256 before anything runs.
  echo 'torch-cluster==1.6.3 --hash=sha256:78d5a930a5bbd0d8788df8c6d66addd68d6dd292fe3edb401e3dacba26308152' > "$EXT/.download/requirement.txt"
  # (the site's index: its credentials, if any, came with the others as PIP_INDEX_URL)
  python -m pip download --no-deps --no-binary :all: --no-build-isolation --require-hashes \
    -r "$EXT/.download/requirement.txt" -d "$EXT/.download"
  tar -xf "$EXT"/.download/*.tar.gz -C "$dir" --strip-components=1 --no-same-owner
  rm -rf "$EXT/.download"
  echo "$AGAINST" > "$dir/.buildctl-against"
fi
(
  cd "$dir"
  started=$(date +%s)
  ext_frontend=$(python /usr/local/share/buildctl/frontend.py detect)
  rm -rf dist
  if [ "$ext_frontend" = scikit-build-core ]; then
    python -m pip wheel --no-build-isolation --no-deps -v -C build-dir=build -w dist .
  else
    python -m pip wheel --no-build-isolation --no-deps -v -w dist .
  fi
  for wheel in dist/*.whl; do
    pinned=$(python /usr/local/share/buildctl/pin_requires.py "$wheel" --dist torch --version "$FRAMEWORK_VERSION" --label "$EXT_LABEL" --out "$OUT/extensions")
    # Before anything is published: the exact torch pin, every .so's CUDA major.
    python /usr/local/share/buildctl/cuda_checks.py wheel "$pinned" --facts "$OUT/extensions/built-against.json" \
      --dist torch --version "$FRAMEWORK_VERSION" --report "$OUT/extensions/checks.jsonl"
  done
  version=$(basename "$pinned" | cut -d- -f2)
  echo "torch-cluster seconds=$(( $(date +%s) - started )) frontend=$ext_frontend version=$version" >> "$OUT/extensions/built.txt"
)
for wheel in "$OUT"/extensions/*.whl; do python /usr/local/share/buildctl/wheelnorm.py "$wheel"; done
finish
echo "buildctl: wheel ready"
