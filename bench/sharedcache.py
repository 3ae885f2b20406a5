#!/usr/bin/env python3
"""Bench: the shared compile cache. A recipe built cold on engine A with a Redis server, then on engine B
from a fresh artifacts folder with an empty local compile cache and the same server. Both builds run
in the same run, so a slow or busy machine shows up on both sides of the ratio.

    python bench/sharedcache.py [--recipe demo-cuda13] [--no-registry] [--network host] [--ca-cert PEM]

Servers: `.ci/services.sh start` (idempotent; left running): redis-server, the registry and engine B, a
second dockerd. Engine A is DOCKER_HOST (default: the local engine).

1. The source is a copy of examples/demofw with every C++/CUDA file marked with this run's id, so the
   server has nothing for it: A is cold on both cache levels. The recipe is a copy of --recipe under
   its own name, built in a namespace of its own, so its compile-cache volumes are new on both engines.
2. Image layers are warmed on engine A first, untimed (an image build of the same rendered folder,
   through the pipeline's own engine.build_image). Engine B gets the base image from A (docker save |
   load) when it lacks it, also untimed; the builder image it pulls from the registry inside its timed
   build (A pushed it). With --no-registry, B's layers are warmed untimed instead and B builds its image.
3. A: `invoke build --cache-url R --registry G` into artifacts folder A. B: the same with
   DOCKER_HOST=engine B into artifacts folder B. Printed: the wall time of each command, the compile step
   of each (from the manifests), B/A for both, and each build's local and remote hits. Target: B/A <= 0.3
   (whole command).

Everything the bench creates on either engine (labelled with its namespace: volumes, images) is removed
at the end, and so are a base image it loaded into B and the untagged images made from it while it warmed B. Exit 0 when the target PASSes, 1 when it FAILs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = 0.3


def invoke_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("invoke")
    return [*([str(exe)] if exe.exists() else [sys.executable, "-m", "invoke"]), "-r", str(REPO)]


def services_env() -> dict[str, str]:
    proc = subprocess.run(["bash", str(REPO / ".ci" / "services.sh"), "start"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise SystemExit(f".ci/services.sh start failed:\n{proc.stderr[-3000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export "):
            key, _, value = shlex.split(line[len("export "):])[0].partition("=")
            out[key] = value
    return out


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path, svc: dict[str, str]):
        self.args, self.work, self.svc = args, work, svc
        self.run_id = uuid.uuid4().hex[:8]
        self.name = f"bench-shared-{self.run_id}"
        self.namespace = f"bench-shared-{self.run_id}"
        self.engines = {"A": os.environ.get("DOCKER_HOST") or svc["BUILDCTL_SVC_ENGINE_A"],
                        "B": svc["BUILDCTL_SVC_ENGINE_B"]}
        self.source = work / "demofw"
        shutil.copytree(REPO / "examples" / "demofw", self.source,
                        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
        for f in [*self.source.rglob("*.cpp"), *self.source.rglob("*.cu")]:
            # code, not a comment: ccache's preprocessor mode hashes the output without comments
            f.write_text(f.read_text() + f"\nnamespace {{ [[maybe_unused]] constexpr int bench_run_{self.run_id} = 0; }}\n")
        self.recipe = work / f"{self.name}.yaml"
        self.recipe.write_text(
            f"# bench-only copy of {args.recipe}: its own name and source copy\n"
            f"extends: {REPO / 'recipes' / (args.recipe + '.yaml')}\n"
            f"framework:\n  source:\n    path: {self.source}\n")
        self.site = ["--network", args.network, *(["--ca-cert", args.ca_cert] if args.ca_cert else [])]
        self.loaded_base_into_b = False
        self.images_before_b: set[str] = set()
        self.warm_window_b = ("", "")  # UTC, to the second: when B's image layers were made
        self.outputs: dict[str, str] = {}
        self.image_key = ""  # the builder image's name in the registry (from A's manifest)

    def client(self, which: str):
        from buildctl import engine

        return engine.connect(environ={"DOCKER_HOST": self.engines[which]})

    def spec(self):
        from buildctl import recipe

        return recipe.load(str(self.recipe), site={"network": self.args.network,
                                                   **({"ca_certs": [self.args.ca_cert]} if self.args.ca_cert else {})})

    # -- setup (untimed) ---------------------------------------------------------------------------
    def base_on_b(self) -> None:
        base = self.spec().base.image
        b = self.client("B")
        with contextlib.closing(b):
            self.images_before_b = {img.id for img in b.images.list(all=True)}
            try:
                b.images.get(base)
                return
            except Exception:
                pass
        print(f"engine B lacks {base}: docker save (A) | docker load (B), untimed ...", flush=True)
        save = subprocess.Popen(["docker", "-H", self.engines["A"], "save", base], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", self.engines["B"], "load", "-q"], stdin=save.stdout, check=True,
                       stdout=subprocess.DEVNULL)
        if save.wait() != 0:
            raise SystemExit(f"docker save {base} failed on engine A")
        self.loaded_base_into_b = True

    def warm_layers(self, which: str) -> float:
        from buildctl import cli, engine, render

        spec = self.spec()
        ctx = render.write(render.render(spec, ca_texts=cli.read_ca_certs(spec.site.ca_certs)),
                           self.work / f"warm-{which}")
        client = self.client(which)
        t0, started = time.perf_counter(), _utc_now()
        with contextlib.closing(client):
            engine.build_image(client, ctx, f"buildctl/{self.name}:warm-{self.namespace}", target="builder",
                               network_mode=None if self.args.network == "default" else self.args.network,
                               labels=engine.buildctl_labels(recipe=spec.name, namespace=self.namespace))
        if which == "B":
            self.warm_window_b = (started, _utc_now())
        return time.perf_counter() - t0

    # -- the timed builds --------------------------------------------------------------------------
    def build(self, which: str) -> tuple[float, dict, str]:
        root = self.work / f"artifacts-{which}"
        env = {**os.environ, "DOCKER_HOST": self.engines[which], "BUILDCTL_ARTIFACTS": str(root),
               "BUILDCTL_NAMESPACE": self.namespace, "BUILDCTL_CACHE_URL": self.svc["BUILDCTL_SVC_REDIS_URL"]}
        if not self.args.no_registry:
            env["BUILDCTL_REGISTRY"] = self.svc["BUILDCTL_SVC_REGISTRY"]
        env.pop("BUILDCTL_NO_VERIFY", None)
        cmd = [*invoke_cmd(), "build", "--recipe", str(self.recipe), *self.site, "--no-verify"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=self.work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        self.outputs[which] = proc.stdout + proc.stderr
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.stderr.write(f"build on engine {which} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-2000:]}\n")
            raise SystemExit(2)
        manifest = json.loads(next(root.glob(f"{self.name}/*/manifest.json")).read_text())
        return seconds, manifest, proc.stdout

    def cache_volume_exists(self, which: str) -> bool:
        from buildctl import pipeline

        client = self.client(which)
        with contextlib.closing(client):
            return bool(client.volumes.list(filters={"name": pipeline.volume_names(self.spec(), "0", self.namespace)[1]}))

    def delete_from_registry(self) -> None:
        import requests

        from buildctl import registry

        if self.args.no_registry or not self.image_key:
            return
        for target in ("builder", "runtime"):
            repo, tag = registry.remote_ref(self.svc["BUILDCTL_SVC_REGISTRY"], self.name, self.image_key, target)
            url = f"http://{repo.split('/', 1)[0]}/v2/{repo.split('/', 1)[1]}/manifests/"
            with contextlib.suppress(Exception):
                head = requests.head(url + tag, timeout=30, headers={
                    "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
                if head.ok and head.headers.get("Docker-Content-Digest"):
                    requests.delete(url + head.headers["Docker-Content-Digest"], timeout=30)

    def cleanup(self) -> None:
        self.delete_from_registry()
        for which in ("A", "B"):
            try:
                client = self.client(which)
            except Exception:
                continue
            selector = {"label": [f"buildctl.namespace={self.namespace}"]}
            with contextlib.closing(client):
                for c in client.containers.list(all=True, filters=selector):
                    with contextlib.suppress(Exception):
                        c.remove(force=True, v=True)
                for v in client.volumes.list(filters=selector):
                    with contextlib.suppress(Exception):
                        v.remove(force=True)
                for img in client.images.list(filters=selector):
                    with contextlib.suppress(Exception):
                        client.images.remove(img.id, force=True)
                if which == "B" and self.loaded_base_into_b:
                    # Every image on B made from the base this bench loaded is this bench's, the untagged
                    # intermediates of the stages its builds did not keep included: newest first, never
                    # forced (an image another build tagged or runs keeps its parents).
                    first, last = self.warm_window_b
                    made = [img for img in client.images.list(all=True, filters={"label": "buildctl=1"})
                            if img.id not in self.images_before_b and not img.tags
                            and first <= img.attrs.get("Created", "")[:19] <= last]
                    for img in sorted(made, key=lambda i: i.attrs.get("Created", ""), reverse=True):
                        with contextlib.suppress(Exception):
                            client.images.remove(img.id)
                    with contextlib.suppress(Exception):
                        client.images.remove(self.spec().base.image)


def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def fmt(manifest: dict) -> str:
    d = manifest.get("durations_s") or {}
    cc = manifest.get("compile_cache") or {}
    remote = cc.get("remote") or {}
    stages = ", ".join(f"{k} {d[k]:.1f}" for k in ("image", "configure", "compile", "wheel") if k in d)
    return (f"{stages} s; ccache {cc.get('hits')}/{(cc.get('hits') or 0) + (cc.get('misses') or 0)} hits "
            f"(local {cc.get('local_hits')}, remote {remote.get('hits')} of "
            f"{(remote.get('hits') or 0) + (remote.get('misses') or 0)}, state {remote.get('state')})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="demo-cuda13", help="demo-cuda13 (default) or demo-cpu")
    ap.add_argument("--no-registry", action="store_true",
                    help="B builds its own image from warm layers instead of pulling A's from the registry")
    ap.add_argument("--network", default=os.environ.get("BUILDCTL_NETWORK", "host"))
    ap.add_argument("--ca-cert", default=os.environ.get("BUILDCTL_CA_CERT", "/etc/ssl/certs/ca-certificates.crt"))
    args = ap.parse_args()
    if args.ca_cert and not Path(args.ca_cert).is_file():
        args.ca_cert = ""
    svc = services_env()
    work = Path(tempfile.mkdtemp(prefix="buildctl-bench-shared-"))
    b = Bench(args, work, svc)
    try:
        print(f"bench recipe {b.name} (a copy of {args.recipe}), namespace {b.namespace}, work dir {work}", flush=True)
        print(f"engine A {b.engines['A']}, engine B {b.engines['B']}, redis {svc['BUILDCTL_SVC_REDIS_URL'].rpartition('@')[2]}",
              flush=True)
        b.base_on_b()
        for which in ("A",) if not args.no_registry else ("A", "B"):
            print(f"warming the image layers on engine {which} (untimed) ...", flush=True)
            print(f"  {b.warm_layers(which):.1f} s", flush=True)
            if b.cache_volume_exists(which):  # never: the namespace is new; would make "empty" a lie
                raise SystemExit(f"a compile-cache volume of {b.namespace} exists on engine {which} already")

        print("A: cold build on engine A (empty local cache, nothing on the server for this source) ...", flush=True)
        a_s, a, _ = b.build("A")
        b.image_key = (a.get("runtime") or {}).get("image_key", "")
        print(f"  {a_s:.1f} s: {fmt(a)}", flush=True)
        print("B: engine B, fresh artifacts folder, empty local cache, the same server"
              + ("" if args.no_registry else ", the image from the registry") + " ...", flush=True)
        b_s, bm, _ = b.build("B")
        print(f"  {b_s:.1f} s: {fmt(bm)}", flush=True)
        assert a["key"] == bm["key"], (a["key"], bm["key"])
        if not args.no_registry:
            pulled = f"builder image {b.image_key} pulled from registry" in b.outputs["B"]
            print(f"  builder image pulled from the registry: {'yes' if pulled else 'NO (built on B)'}", flush=True)

        ratio = b_s / a_s
        ca, cb = a["durations_s"].get("compile"), bm["durations_s"].get("compile")
        print()
        print(f"B/A whole command: {b_s:.1f} / {a_s:.1f} s = {ratio:.2f}  (target <= {TARGET}: "
              f"{'PASS' if ratio <= TARGET else 'FAIL'})")
        if ca and cb:
            print(f"B/A compile step:  {cb:.1f} / {ca:.1f} s = {cb / ca:.2f}")
        print("image layers were warm on both engines (untimed); B built its own image from them"
              if args.no_registry else
              "A's image layers were warm (untimed); B pulled the builder image from the registry within its time")
        return 0 if ratio <= TARGET else 1
    finally:
        b.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
