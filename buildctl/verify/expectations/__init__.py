"""What a built wheel should be, and whether the probe says it is: pure functions, no I/O.

`Expectations.from_spec(spec)` derives the expected values from the recipe (toolchain and build
sections; `verify.expect.*` overrides); `evaluate(expectations, probe)` turns a probe report (the JSON
written by probe.py) into a list of `Check`s. A check's `ok` is True (holds), False (fails the run) or
None (does not apply here or cannot be seen in this wheel: shown, never failing).

The modules: expected (what a wheel should be), matching (reading the probe: versions, archs, verdict),
evaluation (the checks).
"""

from buildctl.verify.expectations.evaluation import (
    Check,
    evaluate,
    failed,
    framework_check_results,
    gpu_checks,
    summary_line,
)
from buildctl.verify.expectations.expected import EXPECT_HELP, EXPECT_KEYS, Expectations, merge, parse_expect
from buildctl.verify.expectations.matching import (
    ABSENT,
    binary_arch_to_cuda_arch,
    gpu_runs_on,
    normalize_arch,
    normalize_arch_list,
    verdict,
    version_matches,
    wheel_accelerator,
)

__all__ = [
    "ABSENT", "EXPECT_HELP", "EXPECT_KEYS", "Check", "Expectations", "binary_arch_to_cuda_arch", "evaluate",
    "failed", "framework_check_results", "gpu_checks", "gpu_runs_on", "merge", "normalize_arch",
    "normalize_arch_list", "parse_expect", "summary_line", "verdict", "version_matches", "wheel_accelerator",
]
