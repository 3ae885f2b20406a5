"""scaleout/plan.py: recipes spread over engines by the MAX_JOBS each engine's cores and memory allow (pure)."""

import pytest

from buildctl.scaleout import plan
from buildctl.scaleout.plan import EngineCapacity, Job
from buildctl.store.manifest import Manifest

GiB = 1024**3
SMALL = EngineCapacity("unix:///run/a.sock", cpus=2, mem_bytes=8 * GiB, verifies=frozenset({"cpu"}))
BIG = EngineCapacity("ssh://builder-64", cpus=64, mem_bytes=256 * GiB, verifies=frozenset({"cpu"}))
GPU = EngineCapacity("tcp://gpu-box:2376", cpus=16, mem_bytes=64 * GiB, verifies=frozenset({"cpu", "cuda"}))


def test_the_big_engine_takes_pytorch_and_the_small_one_the_demos():
    work = [Job("pytorch-cpu", "cpu", 20_000), Job("demo-cpu", "cpu", 120), Job("demo-cpu-debug", "cpu", 120)]
    placed = {p.job.recipe: p for p in plan.plan(work, [SMALL, BIG])}
    assert placed["pytorch-cpu"].engine == BIG.name and placed["pytorch-cpu"].max_jobs == 64
    # after PyTorch, BIG is busy for 20000/64 s; a demo ends sooner on the idle small engine
    assert placed["demo-cpu"].engine == SMALL.name and placed["demo-cpu"].max_jobs == 2
    # the second demo: SMALL is busy 60 s with the first, BIG ~312 s: SMALL again
    assert placed["demo-cpu-debug"].engine == SMALL.name and placed["demo-cpu-debug"].start_s == pytest.approx(60)


def test_memory_limits_a_cuda_engine_as_the_max_jobs_rule_does():
    many_cores_little_memory = EngineCapacity("tcp://wide:2376", cpus=32, mem_bytes=12 * GiB, verifies=frozenset({"cpu"}))
    assert plan.capacity(many_cores_little_memory, "cuda") == 2  # (12 - 2) / 5 GiB per nvcc job
    assert plan.capacity(many_cores_little_memory, "cpu") == 4
    assert plan.capacity(many_cores_little_memory, "cpu", "Debug") == 1  # (12 - 2) / 5.75 GiB per Debug job
    [p] = plan.plan([Job("cuda12.1", "cuda", 160_000)], [many_cores_little_memory, GPU])
    assert p.engine == GPU.name and p.max_jobs == 12  # (64 - 2) / 5


def test_verification_goes_where_the_accelerator_is():
    work = [Job("pytorch-cuda", "cuda", 160_000), Job("cuda-demo", "cuda", 50)]
    placed = {p.job.recipe: p for p in plan.plan(work, [BIG, GPU])}
    assert placed["pytorch-cuda"].engine == BIG.name and placed["pytorch-cuda"].verify_on == GPU.name
    assert placed["cuda-demo"].engine == GPU.name and placed["cuda-demo"].verify_on == GPU.name
    [alone] = plan.plan([Job("cuda-demo", "cuda", 50)], [SMALL])
    assert alone.verify_on is None  # no engine with a GPU: verified without one, as on a single engine


def test_each_engine_runs_its_queue_in_plan_order_and_ties_keep_the_users_order():
    work = [Job(f"demo-{i}", "cpu", 100) for i in range(4)]
    queues = plan.per_engine(plan.plan(work, [SMALL, SMALL.__class__("unix:///run/b.sock", 2, 8 * GiB,
                                                                         frozenset({"cpu"}))]))
    assert [p.job.recipe for p in queues[SMALL.name]] == ["demo-0", "demo-2"]
    assert [p.job.recipe for p in queues["unix:///run/b.sock"]] == ["demo-1", "demo-3"]


def test_cost_comes_from_the_last_manifest_when_there_is_one():
    def manifest(**fields) -> Manifest:
        return Manifest.model_validate({"recipe": "pytorch2.6-cpu-trixie", "key": "k", "wheels": [], **fields})

    assert plan.cost("pytorch", "cpu", manifest(durations_s={"compile": 6456.71}, max_jobs=2)) == pytest.approx(12913.42)
    assert plan.cost("pytorch", "cpu", manifest()) == 20_000
    assert plan.cost("demofw", "cuda") == 120
