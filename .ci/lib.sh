# Shared by .ci/services.sh and .ci/engines.sh (sourced, never run): the set's name and state folder,
# sudo when not root, messages, bounded waits and the pid files of what they start.
# The caller sets TAG (the prefix of its messages) and PID_MARKERS (strings one of which the command
# line of a process it started contains) before calling pid_of or stop_pid.

NAME="${BUILDCTL_SERVICES_NAME:-bctl-ci}"
if ! [[ "$NAME" =~ ^[a-z0-9][a-z0-9-]{0,11}$ ]]; then
  echo "${TAG:-services}: BUILDCTL_SERVICES_NAME=$NAME: use at most 12 of a-z 0-9 - (the bridge is br-<name>)" >&2
  exit 2
fi
PORT_BASE="${BUILDCTL_SERVICES_PORT_BASE:-47100}"
REGISTRY_PORT=$((PORT_BASE + 2))
STATE="${BUILDCTL_SERVICES_DIR:-${RUNNER_TEMP:-/tmp}/$NAME-services}"
LOGS="$STATE/logs"
RUN="$STATE/run"
WAIT="${BUILDCTL_SERVICES_WAIT:-60}"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo -n); fi

say() { echo "${TAG:-services}: $*" >&2; }
fail() { say "$*"; exit 1; }

# wait_for WHAT LOG CMD...: poll CMD until it succeeds, at most $WAIT s; else the log's tail and exit 1.
wait_for() {
  local what="$1" log="$2"; shift 2
  local deadline=$((SECONDS + WAIT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  say "$what did not answer within ${WAIT}s ($*); last lines of $log:"
  tail -n 30 "$log" >&2 2>/dev/null || true
  exit 1
}

# pid_of NAME: the pid in $RUN/NAME.pid when that process still runs and is ours: its command line
# names our state folder or one of PID_MARKERS, or (redis-server rewrites its command line) its working
# folder is in our state folder. A recycled pid is never taken for ours.
pid_of() {
  local file="$RUN/$1.pid" pid cwd marker
  [ -s "$file" ] || return 1
  pid=$(cat "$file")
  [ -r "/proc/$pid/cmdline" ] || return 1
  cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null || true)
  [[ "$cwd" == "$STATE"/* ]] && { echo "$pid"; return 0; }
  for marker in "$STATE" "${PID_MARKERS[@]}"; do
    if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -e "$marker"; then echo "$pid"; return 0; fi
  done
  return 1
}

stop_pid() {  # stop_pid NAME: TERM, a bounded wait, then KILL
  local name="$1" pid
  pid=$(pid_of "$name") || { rm -f "$RUN/$name.pid"; return 0; }
  say "stopping $name (pid $pid)"
  "${SUDO[@]}" kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 40))
  while [ -d "/proc/$pid" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  if [ -d "/proc/$pid" ]; then
    say "$name (pid $pid) did not stop in 40s; killing it"
    "${SUDO[@]}" kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.pid"
}

mkdir -p "$STATE" "$LOGS" "$RUN"
chmod 700 "$STATE"

# apt_install PKG...: install Debian packages without starting their services (redis on 6379, sshd
# on 22, a registry on 5000, podman's socket): a policy-rc.d that says no, unless the machine has one.
apt_install() {
  say "installing $*"
  local policy=/usr/sbin/policy-rc.d made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
    "${SUDO[@]}" chmod 755 "$policy"
    made_policy=1
  fi
  local rc=0
  { "${SUDO[@]}" apt-get update -q && "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "$@"; } >&2 || rc=$?
  if [ -n "$made_policy" ]; then "${SUDO[@]}" rm -f "$policy"; fi
  [ "$rc" -eq 0 ] || fail "apt-get install $* failed (exit $rc)"
}
