"""The failure classifier, fed log lines as real builds print them (quoted from public issue reports)."""

import time
from pathlib import Path

import pytest

from buildctl.failure.diagnose import SIGNATURES, Diagnosis, diagnose, first_error, render_diagnosis

NINJA_NOISE = "\n".join(
    f"[{i}/6236] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/x{i}.cpp.o" for i in range(4500, 4530)
)

# (expected id, log excerpt). Sources: the issue where the line was reported.
REAL_LINES = [
    # jetson-containers#1142, PyTorch build on a Jetson
    ("oom", "c++: fatal error: Killed signal terminated program cc1plus\ncompilation terminated."),
    # stellar-core#5308
    ("oom", "g++: fatal error: Killed signal terminated program cc1plus"),
    # NVIDIA/cudf#8018, pytorch/pytorch#28886
    ("oom", "nvcc error   : 'cicc' died due to signal 9 (Kill signal)"),
    ("oom", "g++: internal compiler error: Killed (program cc1plus)"),
    # pytorch/pytorch#10201
    ("cuda-arch-unsupported", "nvcc fatal   : Unsupported gpu architecture 'compute_70'"),
    ("cuda-arch-unsupported", "nvcc fatal   : Unsupported gpu architecture 'compute_30'"),
    # hz-b/rayx#103, spglib#327
    (
        "python-env",
        "CMake Error at /usr/share/cmake/Modules/FindPackageHandleStandardArgs.cmake:230 (message):\n"
        "  Could NOT find Python3 (missing: Python3_NumPy_INCLUDE_DIRS NumPy) (found\n"
        '  version "3.10.7")',
    ),
    ("python-env", "  Could NOT find Python (missing: Python_NumPy_INCLUDE_DIRS NumPy)"),
    ("python-env", "-- Could NOT find NumPy (missing: NUMPY_INCLUDE_DIR)"),
    ("python-env", "ModuleNotFoundError: No module named 'numpy'"),
    ("python-env", "ModuleNotFoundError: No module named 'yaml'"),
    ("python-env", "buildctl: python is /usr/bin/python3, not the venv's /opt/venv/bin/python"),
    # NVIDIA/FasterTransformer#158 (PyTorch's FindNCCL.cmake)
    (
        "nccl-mismatch",
        "CMake Error at cmake/Modules/FindNCCL.cmake:153 (message): Found NCCL header version and "
        "library version do not match! (include: /usr/local/cuda/include, library: "
        "/usr/lib/x86_64-linux-gnu/libnccl.so) Please set NCCL_INCLUDE_DIR and NCCL_LIB_DIR manually.",
    ),
    ("nccl-mismatch", "demofw: NCCL header version 2.28.9 does not match library version 2.27.3"),
    # e1z0/jetson-frigate#3, udhos/update-golang#9
    ("checksum-mismatch", "ffmpeg.tar.xz: FAILED\nsha256sum: WARNING: 1 computed checksum did NOT match"),
    (
        "checksum-mismatch",
        "buildctl: sha256 mismatch for cuda_13.2.0_linux.run: expected " + "a" * 64 + ", got " + "b" * 64,
    ),
    # pip's own report under --require-hashes (pypa/pip src/pip/_internal/utils/hashes.py, HashMismatch)
    (
        "checksum-mismatch",
        "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.\n    numpy==2.2.0 from "
        "http://127.0.0.1:9002/simple/numpy/numpy-2.2.0-cp311-cp311-manylinux_2_17_x86_64.whl#sha256=" + "b" * 64
        + " (from -r /usr/local/share/buildctl/pip.lock (line 3)):\n        Expected sha256 " + "a" * 64
        + "\n             or " + "c" * 64 + "\n             Got        " + "b" * 64,
    ),
    # lllyasviel/Fooocus#1313
    (
        "driver",
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update "
        "your GPU driver by downloading and installing a new version from the URL: "
        "http://www.nvidia.com/Download/index.aspx",
    ),
    (
        "driver",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
        "and installed a driver from http://www.nvidia.com/Download/index.aspx",
    ),
    (
        "driver",
        "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime "
        "version at /pytorch/aten/src/THC/THCGeneral.cpp:50",
    ),
    (
        "driver",
        'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
    ),
    # many torch extension issues (e.g. NVIDIA/flownet2-pytorch#218)
    (
        "cuda-toolkit-missing",
        "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.",
    ),
    # limbo018/DREAMPlace#63
    (
        "cuda-toolkit-missing",
        "-- The CUDA compiler identification is unknown\nCMake Error at CMakeLists.txt:3 "
        "(project):\n  No CMAKE_CUDA_COMPILER could be found.",
    ),
    ("cuda-toolkit-missing", "/bin/sh: 1: nvcc: not found"),
    # pytorch/pytorch#139967, #165812
    ("cudnn", "ImportError: /usr/lib64/libtorch_cuda.so: undefined symbol: cudnnSetDropoutDescriptor"),
    ("cudnn", "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"),
    ("disk-full", "OSError: [Errno 28] No space left on device"),
    ("disk-full", "cc1plus: fatal error: error writing to /tmp/ccA1b2C3.s: No space left on device"),
    # alexbers/mtprotoproxy#212, giantbranch/pwn_deploy_chroot#1
    (
        "network",
        "Err:1 http://deb.debian.org/debian buster InRelease\n  Temporary failure resolving 'deb.debian.org'",
    ),
    (
        "network",
        "E: Failed to fetch http://security.ubuntu.com/ubuntu/pool/main/p/perl/perl_5.22.1-9ubuntu0.5_amd64"
        ".deb  Temporary failure resolving 'asia-east1.gce.archive.ubuntu.com'",
    ),
    (
        "network",
        "fatal: unable to access 'https://github.com/pytorch/pytorch.git/': Could not resolve host: "
        "github.com",
    ),
    (
        "network",
        "curl: (28) Failed to connect to developer.download.nvidia.com port 443: Connection timed out",
    ),
    # conbench#815
    (
        "network",
        "pip._vendor.urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='files.pythonhosted.org'"
        ", port=443): Read timed out.",
    ),
    ("network", "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='github.com', port=443)"),
    # docker/getting-started#158
    (
        "tls-untrusted",
        "fatal: unable to access 'https://github.com/docker/getting-started.git/': SSL certificate "
        "problem: unable to get local issuer certificate",
    ),
    (
        "tls-untrusted",
        "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after "
        "connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed: unable to get local issuer certificate (_ssl.c:1129)'))': "
        "/simple/mkdocs/\nERROR: Could not find a version that satisfies the requirement mkdocs",
    ),
    # xerrors/Yuxi#540, mikeizbicki/cmc-csci046#71
    (
        "git-ref-not-found",
        "Cloning into 'Yuxi-Know'...\nwarning: Could not find remote branch v0.5.1 to clone.\n"
        "fatal: Remote branch v0.5.1 not found in upstream origin",
    ),
    ("git-ref-not-found", "fatal: Couldn't find remote ref avl"),
    ("git-ref-not-found", "fatal: couldn't find remote ref refs/tags/v9.9.9"),
    ("git-ref-not-found", "error: pathspec 'v2.99.0' did not match any file(s) known to git"),
    # the jammy recipe's image step on a bookworm base image (issue 23), apt 2.6.1
    ("apt-package-missing", "Reading package lists...\nE: Unable to locate package python3.10-venv"),
    ("apt-package-missing", "E: Package 'nvidia-cuda-toolkit' has no installation candidate"),
    # templates/patch.sh over GNU patch 2.7.6, run against a tree the patch was not written for
    (
        "patch-does-not-apply",
        "patching file a/f\nHunk #1 FAILED at 1.\n1 out of 1 hunk FAILED\n"
        "buildctl: patch bad.patch does not apply: a/f: Hunk #1 FAILED at 1.",
    ),
    (
        "patch-does-not-apply",
        "buildctl: skip names 2000-versoin.patch, which the series /work/src/debian/patches/series does not list",
    ),
]


@pytest.mark.parametrize(("want", "line"), REAL_LINES)
def test_real_log_lines(want, line):
    log = f"-- Configuring\n{NINJA_NOISE}\n{line}\nninja: build stopped: subcommand failed.\n"
    d = diagnose(log, step="build")
    assert d is not None, line
    assert d.id == want
    assert d.step == "build"
    assert d.cause and d.fix and d.title
    assert 1 <= len(d.evidence) <= 5
    assert all(e in log for e in d.evidence)


def test_every_signature_is_covered_by_a_real_line():
    assert {s.id for s in SIGNATURES} == {want for want, _ in REAL_LINES}


def test_unknown_failure_is_none():
    log = "FAILED: foo.o\n/src/foo.cpp:3:1: error: expected ';' before '}' token\nninja: build stopped\n"
    assert diagnose(log) is None


# --- concrete fixes from context


def test_oom_fix_names_half_the_jobs():
    d = diagnose("c++: fatal error: Killed signal terminated program cc1plus", context={"max_jobs": 16})
    assert "MAX_JOBS=8" in d.fix and "--jobs 8" in d.fix and "build.max_jobs: 8" in d.fix
    assert "16 parallel" in d.cause


def test_oom_fix_never_below_one_job():
    d = diagnose("nvcc error   : 'cicc' died due to signal 9 (Kill signal)", context={"max_jobs": 1})
    assert "MAX_JOBS=1" in d.fix
    assert d.cause.startswith("cicc was killed")


def test_oom_jobs_read_from_the_log_without_context():
    log = "+ export MAX_JOBS=6\n...\ng++: fatal error: Killed signal terminated program cc1plus\n"
    assert "MAX_JOBS=3" in diagnose(log).fix


def test_oom_from_the_engine_flag_alone_but_not_from_exit_code_137():
    """Exit 137 is any SIGKILL (`docker kill`, a timeout); only the engine's OOMKilled, or the
    compiler's own words in the log, say out of memory. (The old rule took 137 for OOM, so a
    killed build was "retried with fewer jobs".)"""
    by_flag = diagnose("[4510/6236] Building CXX object x.o\n", exit_code=137, oom_killed=True,
                       context={"max_jobs": 4})
    assert by_flag.id == "oom" and "OOMKilled" in by_flag.evidence[0] and "MAX_JOBS=2" in by_flag.fix
    assert diagnose("[4510/6236] Building CXX object x.o\n", exit_code=137, context={"max_jobs": 4}) is None
    assert diagnose("", exit_code=1) is None


def test_oom_evidence_is_deduplicated_and_capped():
    log = "\n".join(
        ["nvcc error   : 'cicc' died due to signal 9 (Kill signal)"] * 40
        + [f"c++: fatal error: Killed signal terminated program cc1plus #{i}" for i in range(9)]
    )
    d = diagnose(log)
    assert len(d.evidence) == 5
    assert len(set(d.evidence)) == 5


def test_arch_fix_names_the_supported_range_and_remaining_archs():
    d = diagnose(
        "nvcc fatal   : Unsupported gpu architecture 'compute_70'",
        context={"cuda_version": "13.2", "cuda_arch": ["7.0", "8.0", "9.0+PTX"]},
    )
    assert "CUDA 13.2" in d.cause and "compute_70" in d.cause
    assert "CUDA >= 9.0 and < 13.0" in d.cause
    assert "drop '7.0' from build.cuda_arch" in d.fix
    assert "['8.0', '9.0+PTX']" in d.fix
    assert "CUDA >= 9.0 and < 13.0" in d.fix


def test_arch_too_new_for_the_toolkit():
    d = diagnose(
        "nvcc fatal   : Unsupported gpu architecture 'compute_100'", context={"cuda_version": "12.4"}
    )
    assert "CUDA >= 12.8" in d.cause


def test_python_fix_names_the_venv_interpreter():
    d = diagnose("buildctl: python is /usr/bin/python3, not the venv's /opt/venv/bin/python")
    assert "/usr/bin/python3" in d.cause and "/opt/venv/bin/python" in d.cause
    d = diagnose(
        "  Could NOT find Python (missing: Python_NumPy_INCLUDE_DIRS NumPy)",
        context={"python": "/opt/py/bin/python"},
    )
    assert "/opt/py/bin/python" in d.fix and "python.packages" in d.fix


def test_nccl_versions_from_the_log():
    d = diagnose(
        "NCCL header version 2.28.9 does not match library version 2.27.3", context={"nccl_pin": "2.28.9"}
    )
    assert "2.28.9" in d.cause and "2.27.3" in d.cause
    assert "USE_SYSTEM_NCCL=1" in d.fix and "NCCL_LIB_DIR" in d.fix and "2.28.9" in d.fix


@pytest.mark.parametrize(
    "checks",
    [
        [
            {"name": "import", "ok": True},
            {"name": "nccl", "ok": False, "expected": "2.28.9", "actual": "2.27.3"},
        ],
        {"nccl": {"status": "failed", "want": "2.28.9", "got": "2.27.3"}},
    ],
)
def test_nccl_from_the_verification_report(checks):
    d = diagnose("build ok\n", report={"checks": checks}, context={"nccl_pin": "2.28.9"})
    assert d.id == "nccl-version" and d.step == "verify"
    assert d.cause == "the wheel uses NCCL 2.27.3, the recipe pins 2.28.9."
    assert "USE_SYSTEM_NCCL=1" in d.fix and "NCCL_LIB_DIR" in d.fix and "rpath" in d.fix
    assert d.evidence


def test_report_without_a_failed_nccl_check_falls_back_to_the_log():
    report = {"checks": [{"name": "nccl", "ok": True}, {"name": "cuda", "ok": False}]}
    assert diagnose("", report=report) is None
    assert diagnose("No space left on device", report=report).id == "disk-full"


def test_driver_fix_quotes_found_version_and_floor():
    d = diagnose(
        "The NVIDIA driver on your system is too old (found version 11040).", context={"cuda_version": "13.2"}
    )
    assert "CUDA up to 11.4" in d.cause and "580" in d.fix


def test_tls_fix_is_the_ca_cert_option():
    d = diagnose("SSL certificate problem: self-signed certificate in certificate chain")
    assert "--ca-cert" in d.fix


def test_checksum_names_the_file():
    d = diagnose("buildctl: sha256 mismatch for nccl.txz: expected " + "1" * 64 + ", got " + "2" * 64)
    assert "nccl.txz" in d.cause and "nccl.txz" in d.fix and "sha256" in d.fix


# --- ordering: root cause before consequences


def test_oom_wins_over_the_errors_it_causes():
    log = "\n".join(
        [
            "FAILED: caffe2/CMakeFiles/torch_cuda.dir/flash_fwd.cu.o",
            "nvcc error   : 'cicc' died due to signal 9 (Kill signal)",
            "ninja: build stopped: subcommand failed.",
            "Traceback (most recent call last):",
            "subprocess.CalledProcessError: Command '['cmake', '--build', '.']' returned non-zero exit status 1.",
        ]
    )
    assert diagnose(log).id == "oom"


def test_disk_full_wins_over_a_missing_library():
    log = (
        "cp: error writing '/usr/local/cuda/lib64/libcudnn.so.9': No space left on device\n"
        "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory\n"
    )
    assert diagnose(log).id == "disk-full"


def test_failed_download_wins_over_the_checksum_it_breaks():
    log = (
        "curl: (6) Could not resolve host: developer.download.nvidia.com\n"
        "sha256sum: WARNING: 1 computed checksum did NOT match\n"
    )
    d = diagnose(log)
    assert d.id == "network" and "developer.download.nvidia.com" in d.cause


def test_pip_retries_that_recovered_are_not_a_network_failure():
    retry = (
        "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after "
        "connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object>: "
        "Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/numpy/"
    )
    ok = retry + "\nSuccessfully installed numpy-2.1.0\n"
    assert diagnose(ok + "FAILED: x.o\nerror: boom\n") is None
    gave_up = (
        retry
        + "\nERROR: Could not find a version that satisfies the requirement numpy (from versions: none)\n"
    )
    assert diagnose(gave_up).id == "network"


# --- first_error, render, to_dict


def test_first_error_is_the_first_block_not_the_tail():
    log = "\n".join(
        [
            "-- Build files have been written to: /build",
            "[1/6236] Building CXX object a.o",
            "FAILED: caffe2/CMakeFiles/torch_cpu.dir/foo.cpp.o",
            "/usr/bin/c++ -DFOO " + "-Ixyz " * 200 + "-c foo.cpp",
            "[2/6236] Building CXX object b.o",
            "/src/foo.cpp:12:5: error: 'bar' was not declared in this scope",
            "   12 |     bar();",
            "",
            NINJA_NOISE,
            "ninja: build stopped: subcommand failed.",
            "Traceback (most recent call last):",
            '  File "setup.py", line 1, in <module>',
            "RuntimeError: build failed",
        ]
    )
    out = first_error(log)
    assert out[0] == "[1/6236] Building CXX object a.o" or out[0].startswith("-- Build files")
    assert any(x.startswith("FAILED: caffe2") for x in out)
    assert "/src/foo.cpp:12:5: error: 'bar' was not declared in this scope" in out
    assert not any("Traceback" in x or "6236] Building CXX object b.o" in x for x in out)
    assert all(len(x) <= 300 for x in out)


def test_first_error_traceback_runs_to_the_exception():
    log = "\n".join(
        [
            "running build",
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in <module>',
            "    import yaml",
            "ModuleNotFoundError: No module named 'yaml'",
            "later output",
        ]
    )
    assert first_error(log)[-1] == "ModuleNotFoundError: No module named 'yaml'"


def test_first_error_skips_pip_resolver_notice_and_handles_clean_logs():
    log = (
        "ERROR: pip's dependency resolver does not currently take into account all the packages\n"
        "Successfully installed x\nCMake Error at CMakeLists.txt:1 (project):\n  boom\n"
    )
    assert first_error(log)[-2:] == ["CMake Error at CMakeLists.txt:1 (project):", "boom"]
    assert first_error("all good\n") == []


def test_render_and_dict():
    d = diagnose(
        "c++: fatal error: Killed signal terminated program cc1plus", step="build", context={"max_jobs": 8}
    )
    text = render_diagnosis(d)
    assert "[oom]" in text and "cause:" in text and "fix:" in text and "MAX_JOBS=4" in text
    assert len(text.splitlines()) == 4
    as_dict = d.to_dict()
    assert set(as_dict) == {"id", "title", "cause", "fix", "evidence", "step"}
    assert Diagnosis(**as_dict) == d


def test_large_log_is_fast():
    log = "\n".join(
        f"[{i}/90000] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/file_{i}.cpp.o"
        for i in range(90000)
    )
    start = time.perf_counter()
    assert diagnose(log + "\nc++: fatal error: Killed signal terminated program cc1plus\n").id == "oom"
    assert diagnose(log) is None
    first_error(log)
    assert time.perf_counter() - start < 2.0


def test_docs_table_lists_every_signature():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "diagnosis.md").read_text()
    for sig in SIGNATURES:
        assert f"| `{sig.id}` |" in doc, sig.id
    assert "| `nccl-version` |" in doc


def test_a_missing_python_package_of_the_recipes_distro_says_the_base_image_is_another():
    d = diagnose("E: Unable to locate package python3.10-venv\n", step="image", context={"distro": "jammy"})
    assert d.id == "apt-package-missing" and "the base image is not jammy" in d.cause
    assert "--base-image buildctl/base:jammy" in d.fix
    d = diagnose("E: Unable to locate package python3.9-venv\n", step="image", context={"distro": "bookworm"})
    assert "it ships Python 3.11" in d.cause and 'python.version: "3.11"' in d.fix
