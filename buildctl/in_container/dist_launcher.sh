#!/usr/bin/env bash
# buildctl's distributed-compile launcher (buildctl/pipeline/build_cluster.py copies it into the compile
# container and names it in CCACHE_PREFIX): ccache runs `dist_launcher.sh COMPILER ARGS...` for each compile
# it did not find cached, in the compile's own directory, and caches what it makes.
#
# A compile runs here while one of BUILDCTL_DIST_LOCAL_JOBS local slots is free, else on the cluster through
# sccache's client (nvcc through nvcc_dist.py: nvcc's own plan, its device and host compiles sent). What
# fails there is compiled here again; when it then succeeds, the cluster was at fault and the rest of the
# build stays here (as after a compile that fell back, or a client that did not start): one warning line,
# and from then on at most BUILDCTL_DIST_LOCAL_MAX compiles (the local memory rule) run at once.
# Records in $BUILDCTL_DIST_OUT: dist-units.txt (a word per unit: local, cluster, again), dist-stats.json
# (sccache's counters, rewritten after each compile on the cluster), dist-state.txt (why it left).
set -u
DIR=$(dirname "$0")  # beside it: sccache, nvcc_dist.py
SCCACHE="$DIR/sccache"
STATE="${TMPDIR:-/tmp}/buildctl-dist"
OUT_DIR="${BUILDCTL_DIST_OUT:-/work/out}"
LOCAL_JOBS="${BUILDCTL_DIST_LOCAL_JOBS:-1}"
LOCAL_MAX="${BUILDCTL_DIST_LOCAL_MAX:-1}"
# buildctl's memory launcher (pipeline/memory_budget.py), when the build has one: a compile here waits in it for
# the memory it needs; one on the cluster takes none here.
MEM="${BUILDCTL_MEM_LAUNCHER:-}"
mkdir -p "$STATE"
# the client's config holds the token: kept in this shell only, never in a compiler's environment
config="${BUILDCTL_DIST_CONFIG:-}"
unset BUILDCTL_DIST_CONFIG

unit() { echo "$1" >>"$OUT_DIR/dist-units.txt"; }

# leave REASON: the rest of the build compiles here; the first launcher to leave says so, once.
leave() {
  if mkdir "$STATE/left" 2>/dev/null; then
    echo "$1" >"$OUT_DIR/dist-state.txt"
    echo "buildctl: warning: distributed compile: $1; compiling the rest locally" >&2
  fi
}

# take_slot N WAIT: hold one of the local slots 0..N-1 on fd 9 (WAIT=1: block until one is free).
take_slot() {
  local n="$1" i
  [ "$n" -ge 1 ] || return 1
  for ((i = 0; i < n; i++)); do
    exec 9>"$STATE/slot.$i"
    if flock -n 9; then return 0; fi
    exec 9>&-
  done
  [ "$2" = 1 ] || return 1
  exec 9>"$STATE/slot.$((RANDOM % n))"
  flock 9
}

here() {  # the compile on this machine, within the local memory rule
  take_slot "$(( LOCAL_MAX > 0 ? LOCAL_MAX : 1 ))" 1
  $MEM "$@"
}

# sccache ARGS...: the client with no descriptor but 0-2 open. Its daemon (started by the first client,
# or again by a later one) lives on: a descriptor it inherited, such as ninja's output pipe that ccache
# keeps open, would make ninja wait for that daemon forever.
sccache() {
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec "$SCCACHE" "$@"
  )
}

# The client's daemon, once per container: its config (token included) into /dev/shm, then the daemon.
start_client() {
  [ -e "$STATE/ready" ] && return 0
  exec 8>"$STATE/setup.lock"
  flock 8
  if [ ! -e "$STATE/ready" ]; then
    (umask 077 && printf '%s' "$config" >"$SCCACHE_CONF") || return 1
    sccache --start-server </dev/null >"$STATE/start.log" 2>&1 || return 1
    touch "$STATE/ready"
  fi
  exec 8>&-
}

record_stats() {  # sccache's counters, the latest snapshot last (under a lock)
  (
    flock 7
    sccache --show-stats --stats-format=json >"$STATE/stats.json.tmp" 2>/dev/null &&
      mv -f "$STATE/stats.json.tmp" "$OUT_DIR/dist-stats.json"
  ) 7>"$STATE/stats.lock"
}

# Not a compile (a link through ccache's masquerade, a preprocessor run): here.
case " $* " in
  *" -c "* | *" -S "*) ;;
  *) here "$@"; exit $? ;;
esac

if [ -e "$STATE/left" ]; then unit local; here "$@"; exit $?; fi
if take_slot "$LOCAL_JOBS" 0; then unit local; $MEM "$@"; exit $?; fi
if ! start_client; then
  exec 8>&-
  leave "the sccache client did not start ($(tail -n 1 "$STATE/start.log" 2>/dev/null | cut -c1-200))"
  unit local
  here "$@"
  exit $?
fi

unit cluster
output="$STATE/output.$$"
case "${1##*/}" in
  nvcc) python3 "$DIR/nvcc_dist.py" "$SCCACHE" "$@" >"$output" 2>&1 ;;  # (Python closes inherited descriptors)
  *) sccache "$@" >"$output" 2>&1 ;;
esac
rc=$?
record_stats
fell_back=$(grep -o '"dist_errors":[0-9]*' "$OUT_DIR/dist-stats.json" 2>/dev/null | cut -d: -f2)
if [ "$rc" -ne 0 ]; then
  # here again: a compile error fails here too (its message shown once), a failure of the cluster does not
  rm -f "$output"
  unit again
  here "$@"
  rc=$?
  if [ "$rc" -eq 0 ]; then leave "a compile failed on the cluster and succeeded here"; fi
  exit "$rc"
fi
cat "$output" >&2
rm -f "$output"
if [ "${fell_back:-0}" -gt 0 ]; then
  why=$(grep -m1 -o 'falling back to local: .*' "$STATE/sccache.log" 2>/dev/null | sed 's/^falling back to local: //' | cut -c1-200)
  leave "$fell_back compile(s) could not run on the cluster and fell back to this machine${why:+ ($why)}"
fi
exit 0
