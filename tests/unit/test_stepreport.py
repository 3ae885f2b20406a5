"""`invoke build --until configure` reads the CMake summary and cache excerpt the build script keeps.
The fixtures are the real output of `invoke build --recipe pytorch2.6-cpu-trixie --until configure`."""

from pathlib import Path

from buildctl.pipeline import until_report

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cmake"


def _out_dir(tmp_path: Path) -> Path:
    (tmp_path / "cmake-summary.txt").write_text((FIXTURES / "pytorch-2.6-cpu-summary.txt").read_text())
    (tmp_path / "cmake-cache.txt").write_text((FIXTURES / "pytorch-2.6-cpu-cache.txt").read_text())
    return tmp_path


def test_configure_facts_show_what_a_user_checks(tmp_path):
    facts = until_report.configure_facts(_out_dir(tmp_path))
    assert facts["Python executable"] == "/opt/venv/bin/python"
    assert facts["NumPy include"].startswith("/opt/venv/lib/python3.13/site-packages/numpy")
    assert facts["TORCH_VERSION"] == "2.6.0"
    assert facts["Build type"] == "Release"
    assert facts["BLAS"] == "open"
    assert facts["CPU capability"] == "AVX AVX2 AVX512"
    assert facts["USE_DISTRIBUTED"] == "1" and facts["USE_GLOO"] == "1" and facts["USE_CUDA"] == "0"


def test_headline_lists_headline_keys_then_switches(tmp_path):
    rows = until_report.headline(until_report.configure_facts(_out_dir(tmp_path)))
    keys = [k for k, _ in rows]
    assert keys.index("Python executable") < keys.index("USE_CUDA")
    assert all(not k.startswith("USE_") for k in keys[:keys.index("USE_GOLD_LINKER")])


def test_ninja_steps_take_the_latest_entry_per_output(tmp_path):
    (tmp_path / "ninja_log.txt").write_text(
        "# ninja log v5\n0\t1500\t0\ta.o\tabc\n0\t2000\t0\tb.o\tdef\n"
        # a second run (clock restarts): a.o again
        "0\t500\t0\ta.o\tabc\n")
    assert until_report.ninja_steps(tmp_path) == {"steps": 2, "busy_s": 2.5}


def test_missing_files_give_empty_facts(tmp_path):
    assert until_report.configure_facts(tmp_path) == {}
    assert until_report.ninja_steps(tmp_path) == {"steps": 0, "busy_s": 0.0}


def test_cuda_configure_shows_cuda_nccl_and_cudnn(tmp_path):
    """pytorch2.6-cuda12.4-trixie's real configure: CUDA 12.4 from apt, system NCCL 2.22.3, cuDNN 9.1."""
    for name in ("summary", "cache", "found"):
        (tmp_path / f"cmake-{name}.txt").write_text((FIXTURES / f"pytorch-2.6-cuda12.4-{name}.txt").read_text())
    facts = until_report.configure_facts(tmp_path)
    assert facts["CUDA version"] == "12.4"
    assert facts["cuDNN version"] == "9.1.0"
    assert facts["NCCL version"] == "2.22.3" and facts["USE_SYSTEM_NCCL"] == "ON"
    assert facts["NCCL library"] == "/usr/lib/x86_64-linux-gnu/libnccl.so"
    assert facts["Python executable"] == "/opt/venv/bin/python"
    assert facts["CUDA host compiler"] == "/usr/bin/cuda-g++"
    keys = [k for k, _ in until_report.headline(facts)]
    assert {"CUDA version", "cuDNN version", "NCCL version"} <= set(keys)
