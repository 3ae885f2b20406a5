#!/usr/bin/env python3
"""Bench: the shared compile cache. A recipe built cold on engine A with a Redis server, then on engine B
from a fresh artifacts folder with an empty local compile cache and the same server. Both builds run
in the same run, so a slow or busy machine shows up on both sides of the ratio.

    python bench/sharedcache.py [--recipe demo-cuda13] [--state DIR] [--no-registry] [--network host]
                                [--ca-cert PEM]

Servers: `.ci/services.sh start` (idempotent; left running): redis-server, the registry and engine B, a
second dockerd. Engine A is DOCKER_HOST (default: the local engine).

1. Cold: the recipe is a copy of --recipe under a name of its own (bench-shared-<id>), built in a
   namespace of its own, so its compile-cache volumes are new on both engines and the registry has no
   image of that name; the server side is a Redis database that is empty when the bench starts (the
   first of 1..15 with no keys), so the server has nothing for A either.
2. Image layers are warmed on engine A first, untimed (an image build of the same rendered folder,
   through the pipeline's own engine.build_image). Engine B gets the base image from A (docker save |
   load) when it lacks it, also untimed; the builder image it pulls from the registry inside its timed
   build (A pushed it). With --no-registry, B's layers are warmed untimed instead and B builds its image.
3. A: `invoke build --cache-url R --registry G` into artifacts folder A. B: the same with
   DOCKER_HOST=engine B into artifacts folder B. Printed: the wall time of each command, the compile step
   of each (from the manifests), B/A for both, and each build's local and remote hits. Target: B/A <= 0.3
   (whole command).

A long build (the real PyTorch CPU recipe: hours on 2 cores) survives the end of a session with
--state DIR: the bench keeps its work folder and state.json there and writes the running build's
elapsed time into it every 10 s. The same command again carries on: the stopped build resumes from its
build volume (`invoke build` resumes), and a phase's time is the sum of its attempts (each attempt's
own start included; printed). The Redis server keeps its objects across a restart (.ci/services.sh:
append-only file). Without --state the work folder is temporary and nothing resumes.

Everything the bench creates on either engine (labelled with its namespace: volumes, images), its Redis
database and its registry images are removed once it has a result, and so are a base image it loaded
into B and the untagged images made from it while it warmed B. Exit 0 when the target PASSes, 1 when it
FAILs, 2 when a build failed, 130/143 when interrupted (resumable with --state).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from build import invoke_cmd  # noqa: E402  (bench/build.py: the venv's invoke, as a user runs it)

from buildctl.pipeline import engine_names  # noqa: E402

TARGET = 0.3
HEARTBEAT_S = 10


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


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Redis:
    """The server side of the cache, through redis-cli (installed with the server by .ci/services.sh)."""

    def __init__(self, url: str):
        self.url = urlsplit(url)

    def _cli(self, db: int, *command: str) -> str:
        env = {**os.environ, "REDISCLI_AUTH": unquote(self.url.password or "")}
        proc = subprocess.run(["redis-cli", "-h", self.url.hostname or "127.0.0.1", "-p", str(self.url.port or 6379),
                               "-n", str(db), *command], env=env, capture_output=True, text=True, check=True)
        return proc.stdout.strip()

    def keys_in(self, db: int) -> int:
        return int(self._cli(db, "DBSIZE") or 0)

    def empty_db(self) -> int:
        for db in range(1, 16):
            if self.keys_in(db) == 0:
                return db
        raise SystemExit("no empty Redis database among 1..15 for the bench; fix: FLUSHDB one the bench left")

    def flush(self, db: int) -> None:
        self._cli(db, "FLUSHDB")

    def url_for(self, db: int) -> str:
        return urlunsplit(self.url._replace(path=f"/{db}"))


class State:
    """state.json in the bench's work folder: what a later run of the same command needs to carry on."""

    def __init__(self, path: Path, fresh: dict):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else fresh
        self.lock = threading.Lock()
        self.save()

    def save(self) -> None:
        with self.lock:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=2) + "\n")
            tmp.replace(self.path)

    def phase(self, which: str) -> dict:
        return self.data.setdefault("phases", {}).setdefault(which, {"attempts": [], "done": False})


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path, svc: dict[str, str], redis: Redis):
        self.args, self.work, self.svc, self.redis = args, work, svc, redis
        state_file = work / "state.json"
        self.state = State(state_file, {} if state_file.exists() else {
            "recipe": args.recipe, "run_id": uuid.uuid4().hex[:8], "redis_db": redis.empty_db(),
            "loaded_base_into_b": False, "images_before_b": [], "warm_window_b": ["", ""],
            "warmed": [], "image_key": ""})
        if self.state.data["recipe"] != args.recipe:
            raise SystemExit(f"{work} holds a bench of {self.state.data['recipe']}, not {args.recipe}; "
                             "fix: --recipe " + self.state.data["recipe"] + " or another --state folder")
        self.name = self.namespace = f"bench-shared-{self.state.data['run_id']}"
        self.engines = {"A": os.environ.get("DOCKER_HOST") or svc["BUILDCTL_SVC_ENGINE_A"],
                        "B": svc["BUILDCTL_SVC_ENGINE_B"]}
        self.cache_url = redis.url_for(self.state.data["redis_db"])
        self.recipe = work / f"{self.name}.yaml"
        if not self.recipe.exists():
            self.recipe.write_text(f"# bench-only copy of {args.recipe}: a name (and so volumes and images) of its own\n"
                                   f"extends: {REPO / 'recipes' / (args.recipe + '.yaml')}\n")
        self.site = ["--network", args.network, *(["--ca-cert", args.ca_cert] if args.ca_cert else [])]

    def client(self, which: str):
        from buildctl import engine

        return engine.connect(environ={"DOCKER_HOST": self.engines[which]})

    def spec(self):
        from buildctl import recipe

        return recipe.load(str(self.recipe), site={"network": self.args.network,
                                                   **({"ca_certs": [self.args.ca_cert]} if self.args.ca_cert else {})})

    # -- setup (untimed) ---------------------------------------------------------------------------
    def base_on_b(self) -> None:
        data = self.state.data
        base = self.spec().base.image
        b = self.client("B")
        with contextlib.closing(b):
            if not data["images_before_b"]:
                data["images_before_b"] = sorted(img.id for img in b.images.list(all=True))
                self.state.save()
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
        data["loaded_base_into_b"] = True
        self.state.save()

    def warm_layers(self, which: str) -> float:
        from buildctl import engine, render

        spec = self.spec()
        ctx = render.write(render.render(spec), self.work / f"warm-{which}")
        client = self.client(which)
        t0, started = time.perf_counter(), _utc_now()
        with contextlib.closing(client):
            engine.build_image(
                client,
                engine.ImageSpec(
                    ctx,
                    f"buildctl/{self.name}:warm-{self.namespace}",
                    target="builder",
                    network_mode=None if self.args.network == "default" else self.args.network,
                    labels=engine.buildctl_labels(recipe=spec.name, namespace=self.namespace),
                ),
            )
        if which == "B":
            self.state.data["warm_window_b"] = [started, _utc_now()]
        self.state.data["warmed"].append(which)
        self.state.save()
        return time.perf_counter() - t0

    # -- the timed builds --------------------------------------------------------------------------
    def build(self, which: str) -> tuple[float, dict]:
        """Phase A or B until it is done: each attempt's wall time is added (a heartbeat keeps the running
        attempt's time in state.json, so an attempt ended by the machine still counts)."""
        phase = self.state.phase(which)
        root = self.work / f"artifacts-{which}"
        if not phase["done"]:
            env = {**os.environ, "DOCKER_HOST": self.engines[which], "BUILDCTL_ARTIFACTS": str(root),
                   "BUILDCTL_NAMESPACE": self.namespace, "BUILDCTL_CACHE_URL": self.cache_url}
            if not self.args.no_registry:
                env["BUILDCTL_REGISTRY"] = self.svc["BUILDCTL_SVC_REGISTRY"]
            env.pop("BUILDCTL_NO_VERIFY", None)
            cmd = [*invoke_cmd(), "build", "--recipe", str(self.recipe), *self.site, "--no-verify"]
            attempt = {"started": _utc_now(), "seconds": 0.0, "ended": "running"}
            phase["attempts"].append(attempt)
            log = self.work / f"build-{which}-{len(phase['attempts'])}.log"
            if len(phase["attempts"]) > 1:
                print(f"  attempt {len(phase['attempts'])}: carrying on (earlier attempts "
                      f"{sum(a['seconds'] for a in phase['attempts'][:-1]):.0f} s)", flush=True)
            t0 = time.perf_counter()
            stop = threading.Event()

            def heartbeat() -> None:
                while not stop.wait(HEARTBEAT_S):
                    attempt["seconds"] = round(time.perf_counter() - t0, 1)
                    self.state.save()

            beat = threading.Thread(target=heartbeat, daemon=True)
            with log.open("w") as out:
                proc = subprocess.Popen(cmd, cwd=self.work, env=env, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
                beat.start()
                try:
                    rc = proc.wait()
                except Interrupted as sig:
                    # the build records where it stopped and stops its container: `invoke build` resumes
                    proc.send_signal(sig.signum)
                    rc = proc.wait()
                    attempt.update(seconds=round(time.perf_counter() - t0, 1), ended=f"interrupted ({sig}, exit {rc})")
                    raise
                finally:
                    stop.set()
                    beat.join()
                    if attempt["ended"] == "running":
                        attempt["seconds"] = round(time.perf_counter() - t0, 1)
                    self.state.save()
            attempt["ended"] = f"exit {rc}"
            if rc != 0:
                self.state.save()
                sys.stderr.write(f"build on engine {which} failed (exit {rc}); its output: {log}\n"
                                 + "".join(log.read_text().splitlines(keepends=True)[-40:]))
                raise SystemExit(2)
            phase["done"] = True
            self.state.save()
        manifest = json.loads(next(root.glob(f"{self.name}/*/manifest.json")).read_text())
        return sum(a["seconds"] for a in phase["attempts"]), manifest

    def output(self, which: str) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.work.glob(f"build-{which}-*.log")))

    def cache_volume_exists(self, which: str) -> bool:

        client = self.client(which)
        with contextlib.closing(client):
            return bool(client.volumes.list(filters={"name": engine_names.volume_names(self.spec(), "0", self.namespace)[1]}))

    def delete_from_registry(self) -> None:
        import requests

        from buildctl.engine import registry

        if self.args.no_registry or not self.state.data["image_key"]:
            return
        for target in ("builder", "runtime"):
            repo, tag = registry.remote_ref(self.svc["BUILDCTL_SVC_REGISTRY"], self.name, self.state.data["image_key"],
                                            target)
            url = f"http://{repo.split('/', 1)[0]}/v2/{repo.split('/', 1)[1]}/manifests/"
            with contextlib.suppress(Exception):
                head = requests.head(url + tag, timeout=30, headers={
                    "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
                if head.ok and head.headers.get("Docker-Content-Digest"):
                    requests.delete(url + head.headers["Docker-Content-Digest"], timeout=30)

    def cleanup(self) -> None:
        data = self.state.data
        self.delete_from_registry()
        with contextlib.suppress(Exception):
            self.redis.flush(data["redis_db"])
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
                if which == "B" and data["loaded_base_into_b"]:
                    # Every image on B made from the base this bench loaded is this bench's, the untagged
                    # intermediates of the stages its builds did not keep included: newest first, never
                    # forced (an image another build tagged or runs keeps its parents).
                    first, last = data["warm_window_b"]
                    before = set(data["images_before_b"])
                    made = [img for img in client.images.list(all=True, filters={"label": "buildctl=1"})
                            if img.id not in before and not img.tags
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


def attempts(bench: Bench, which: str) -> str:
    seconds = [f"{a['seconds']:.0f}" for a in bench.state.phase(which)["attempts"]]
    return "" if len(seconds) < 2 else f" in {len(seconds)} attempts ({' + '.join(seconds)} s)"


def run(b: Bench, args: argparse.Namespace) -> int:
    data = b.state.data
    print(f"bench recipe {b.name} (a copy of {args.recipe}), namespace {b.namespace}, work dir {b.work}", flush=True)
    print(f"engine A {b.engines['A']}, engine B {b.engines['B']}, redis "
          f"{b.cache_url.rpartition('@')[2]} (empty when the bench started)", flush=True)
    b.base_on_b()
    for which in ("A",) if not args.no_registry else ("A", "B"):
        if which in data["warmed"]:
            continue
        print(f"warming the image layers on engine {which} (untimed) ...", flush=True)
        print(f"  {b.warm_layers(which):.1f} s", flush=True)
        if b.cache_volume_exists(which):  # never: the namespace is new; would make "empty" a lie
            raise SystemExit(f"a compile-cache volume of {b.namespace} exists on engine {which} already")

    print("A: cold build on engine A (empty local cache, nothing on the server) ...", flush=True)
    a_s, a = b.build("A")
    data["image_key"] = (a.get("runtime") or {}).get("image_key", "")
    b.state.save()
    print(f"  {a_s:.1f} s{attempts(b, 'A')}: {fmt(a)}", flush=True)
    print("B: engine B, fresh artifacts folder, empty local cache, the same server"
          + ("" if args.no_registry else ", the image from the registry") + " ...", flush=True)
    b_s, bm = b.build("B")
    print(f"  {b_s:.1f} s{attempts(b, 'B')}: {fmt(bm)}", flush=True)
    assert a["key"] == bm["key"], (a["key"], bm["key"])
    if not args.no_registry:
        pulled = f"builder image {data['image_key']} pulled from registry" in b.output("B")
        print(f"  builder image pulled from the registry: {'yes' if pulled else 'NO (built on B)'}", flush=True)

    ratio = b_s / a_s
    ca, cb = a["durations_s"].get("compile"), bm["durations_s"].get("compile")
    print()
    print(f"B/A whole command: {b_s:.1f} / {a_s:.1f} s = {ratio:.2f}  (target <= {TARGET}: "
          f"{'PASS' if ratio <= TARGET else 'FAIL'})")
    if ca and cb and len(b.state.phase("A")["attempts"]) == 1:  # a resumed build's manifest has its last part only
        print(f"B/A compile step:  {cb:.1f} / {ca:.1f} s = {cb / ca:.2f}")
    print("image layers were warm on both engines (untimed); B built its own image from them"
          if args.no_registry else
          "A's image layers were warm (untimed); B pulled the builder image from the registry within its time")
    data["result"] = {"a_s": a_s, "b_s": b_s, "ratio": round(ratio, 3), "compile_a_s": ca, "compile_b_s": cb}
    b.state.save()
    return 0 if ratio <= TARGET else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="demo-cuda13",
                    help="demo-cuda13 (default), demo-cpu, or pytorch2.6-cpu-trixie (hours: use --state)")
    ap.add_argument("--state", metavar="DIR", help="keep the work folder here; the same command again carries on")
    ap.add_argument("--no-registry", action="store_true",
                    help="B builds its own image from warm layers instead of pulling A's from the registry")
    ap.add_argument("--network", default=os.environ.get("BUILDCTL_NETWORK", "host"))
    ap.add_argument("--ca-cert", default=os.environ.get("BUILDCTL_CA_CERT", "/etc/ssl/certs/ca-certificates.crt"))
    args = ap.parse_args()
    if args.ca_cert and not Path(args.ca_cert).is_file():
        args.ca_cert = ""
    svc = services_env()
    redis = Redis(svc["BUILDCTL_SVC_REDIS_URL"])
    if args.state:
        work = Path(args.state).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if (work / "state.json").exists() and "result" in json.loads((work / "state.json").read_text()):
            raise SystemExit(f"{work} holds a finished bench (state.json: result); fix: another --state folder")
    else:
        work = Path(tempfile.mkdtemp(prefix="buildctl-bench-shared-"))

    def interrupted(signum, _frame):
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    b = Bench(args, work, svc, redis)
    finished = False
    try:
        code = run(b, args)
        finished = True
        return code
    except Interrupted as sig:
        if args.state:
            print(f"\ninterrupted ({sig}); the same command carries on: {' '.join(map(shlex.quote, sys.argv))}",
                  flush=True)
        return 128 + sig.signum
    finally:
        if finished or not args.state:
            b.cleanup()
        if not args.state:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
