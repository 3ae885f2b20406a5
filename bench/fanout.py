#!/usr/bin/env python3
"""Bench: three demo recipes fanned out over two engines against the same three one after the other on
one engine, measured in the same run.

    python bench/fanout.py [--network host] [--ca-cert PEM]

Servers: `.ci/services.sh start` (idempotent; left running): engine B, a second dockerd. Engine A is
DOCKER_HOST (default: the local engine).

1. Three bench-only recipes: demo-cpu as Release, Debug and RelWithDebInfo, each under its own name,
   all from one copy of examples/demofw.
2. Untimed: engine B gets the base image from A (docker save | load) when it lacks it, and the image
   layers of all three are warmed on both engines (an image build of each rendered folder), so that
   what is timed is building the frameworks, not downloading toolchains.
3. One after the other: `invoke build --recipe r1 --recipe r2 --recipe r3 --engine A --no-verify`
   (one engine: its queue runs in turn). Fanned out: the same with `--engine A --engine B`, into a
   fresh artifacts folder and another namespace (so both start with empty compile caches).
4. Printed: both wall times, which engine built what, and fanned/sequential. Target: < 1.0.

What the ratio can and cannot show here: engines A and B are two dockerds on ONE 2-core machine, and
each build compiles with MAX_JOBS=2 from its engine's `docker info` (which reports the same two cores to
both). Fanned out, two compilers' worth of jobs compete for two cores, so the ratio shows the overlap
of everything that is not compiling (image checks, CMake, packaging, the engines' own work) and the
scheduling overhead, not the speed-up of two real machines (which would approach 2/3 for three equal
builds on two engines). Everything the bench made on either engine (its namespaces) is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from sharedcache import invoke_cmd, services_env  # noqa: E402  (the same servers and command)

TARGET = 1.0
TYPES = {"rel": "Release", "dbg": "Debug", "rwd": "RelWithDebInfo"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--network", default=os.environ.get("BUILDCTL_NETWORK", "host"))
    ap.add_argument("--ca-cert", default=os.environ.get("BUILDCTL_CA_CERT", "/etc/ssl/certs/ca-certificates.crt"))
    args = ap.parse_args()
    site = ["--network", args.network, *(["--ca-cert", args.ca_cert] if Path(args.ca_cert or "/").is_file() else [])]
    svc = services_env()
    engines = {"A": os.environ.get("DOCKER_HOST") or svc["BUILDCTL_SVC_ENGINE_A"], "B": svc["BUILDCTL_SVC_ENGINE_B"]}
    run_id = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="buildctl-bench-fanout-"))
    src = work / "demofw"
    shutil.copytree(REPO / "examples" / "demofw", src,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    recipes = []
    for short, build_type in TYPES.items():
        path = work / f"bench-fan-{run_id}-{short}.yaml"
        path.write_text(f"# bench-only: demo-cpu as {build_type}\nextends: {REPO / 'recipes' / 'demo-cpu.yaml'}\n"
                        f"framework:\n  source:\n    path: {src}\nbuild:\n  type: {build_type}\n")
        recipes.append(path)
    namespaces = {"seq": f"bench-fan-{run_id}-seq", "fan": f"bench-fan-{run_id}-fan", "warm": f"bench-fan-{run_id}-warm"}
    loaded_base = False
    from buildctl import engine, recipe, render

    def client(which: str):
        return engine.connect(environ={**os.environ, "DOCKER_HOST": engines[which]})

    try:
        print(f"bench fanout {run_id}: engine A {engines['A']}, engine B {engines['B']}, work dir {work}", flush=True)
        specs = [recipe.load(str(p), site={"network": args.network,
                                                 **({"ca_certs": [args.ca_cert]} if Path(args.ca_cert or "/").is_file() else {})}) for p in recipes]
        base = specs[0].base.image
        with contextlib.closing(client("B")) as b:
            try:
                b.images.get(base)
            except Exception:
                print(f"engine B lacks {base}: docker save (A) | docker load (B), untimed ...", flush=True)
                save = subprocess.Popen(["docker", "-H", engines["A"], "save", base], stdout=subprocess.PIPE)
                subprocess.run(["docker", "-H", engines["B"], "load", "-q"], stdin=save.stdout, check=True,
                               stdout=subprocess.DEVNULL)
                save.wait()
                loaded_base = True
        for which in ("A", "B"):
            t0 = time.perf_counter()
            with contextlib.closing(client(which)) as c:
                for spec in specs:
                    ctx = render.write(render.render(spec),
                                       work / f"warm-{which}-{spec.name}")
                    engine.build_image(
                        c,
                        engine.ImageSpec(
                            ctx,
                            f"buildctl/{spec.name}:warm",
                            target="builder",
                            network_mode=None if args.network == "default" else args.network,
                            labels=engine.buildctl_labels(recipe=spec.name, namespace=namespaces["warm"]),
                        ),
                    )
            print(f"image layers warm on engine {which} (untimed): {time.perf_counter() - t0:.1f} s", flush=True)

        def fan(phase: str, which: list[str]) -> tuple[float, dict]:
            cmd = [*invoke_cmd(), "build", "--json", "--no-verify", *site,
                   *[a for p in recipes for a in ("--recipe", str(p))], *[a for w in which for a in ("--engine", engines[w])]]
            env = {**os.environ, "BUILDCTL_ARTIFACTS": str(work / f"artifacts-{phase}"),
                   "BUILDCTL_NAMESPACE": namespaces[phase]}
            env.pop("BUILDCTL_CACHE_URL", None)
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            seconds = time.perf_counter() - t0
            result = json.loads(proc.stdout or "{}")
            if proc.returncode != 0 or not result.get("ok"):
                raise SystemExit(f"{phase}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
            return seconds, result

        print("one after the other on engine A ...", flush=True)
        seq_s, seq = fan("seq", ["A"])
        print(f"  {seq_s:.1f} s", flush=True)
        print("fanned out over engines A and B ...", flush=True)
        fan_s, fanned = fan("fan", ["A", "B"])
        print(f"  {fan_s:.1f} s", flush=True)
        print()
        print(f"{'recipe':<28}{'one engine':>14}{'fanned out':>14}  engine")
        by_recipe = {b["recipe"]: b for b in fanned["builds"]}
        for b in seq["builds"]:
            f = by_recipe[b["recipe"]]
            print(f"{b['recipe']:<28}{b['seconds']:>12.1f} s{f['seconds']:>12.1f} s  {f['engine']}")
        ratio = fan_s / seq_s
        print()
        print(f"fanned / one engine: {fan_s:.1f} / {seq_s:.1f} s = {ratio:.2f}  (target < {TARGET}: "
              f"{'PASS' if ratio < TARGET else 'FAIL'})")
        print("both engines run on this one 2-core machine: the ratio shows the overlap of the non-compile "
              "work and the scheduling overhead, not two machines' speed-up")
        return 0 if ratio < TARGET else 1
    finally:
        for which in ("A", "B"):
            with contextlib.suppress(Exception), contextlib.closing(client(which)) as c:
                for ns in namespaces.values():
                    selector = {"label": [f"buildctl.namespace={ns}"]}
                    for ctr in c.containers.list(all=True, filters=selector):
                        ctr.remove(force=True, v=True)
                    for vol in c.volumes.list(filters=selector):
                        vol.remove(force=True)
                    for img in c.images.list(filters=selector):
                        with contextlib.suppress(Exception):
                            c.images.remove(img.id, force=True)
                if which == "B" and loaded_base:
                    with contextlib.suppress(Exception):
                        c.images.remove(base)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
