#!/usr/bin/env bash
# Two more container engines for the engine matrix (tests/integration/test_engine_matrix_integration.py,
# docs/engines.md), on this machine, beside the default engine and engine B (.ci/services.sh):
#   docker26  Debian trixie's docker.io (Docker 26.1) in a container of the default engine, made from
#             buildctl/base:trixie (image <name>/docker26:trixie, labelled buildctl=ci-engine, never
#             buildctl=1, so `invoke clean` never takes it): its socket in /run/<name>-docker26/ (a bind
#             mount), its data root the volume <name>-docker26 (overlay2 needs a real file system under
#             it), the host's network (its builds reach 127.0.0.1 as a host's engine does) with a bridge
#             of its own (b26-<name>, made here, --iptables=false) and cgroups under /<name>-docker26.
#             --privileged, or where the default engine's bounding set lacks a capability (then a
#             privileged container does not start) every other capability, unconfined, all devices.
#   podman    bookworm's Podman 4.3, its Docker-compatible API (`podman system service`), ROOTLESS as the
#             user <name>-podman (made here, with 65536 subordinate uids and gids), storage in its home
#             /var/lib/<name>-podman (native overlay), runc (crun 1.8 refuses a hybrid cgroup layout),
#             cgroupfs and a file event log (no systemd user session), XDG_RUNTIME_DIR /run/user/<uid>
#             (Podman 4.3's rootless network namespace mounts only that path); its socket
#             /run/<name>-podman/podman.sock, group-owned by the invoking user; the services' registry
#             (127.0.0.1:<port base + 2>) trusted over plain HTTP, as Docker trusts 127.0.0.0/8.
#
#   bash .ci/engines.sh start    start what is not running (idempotent), give both the default engine's
#                                base images (buildctl/base:bookworm, :trixie), then print `export K=V` lines
#   bash .ci/engines.sh env      print them again
#   bash .ci/engines.sh status   which engines answer (exit 1 if one does not)
#   bash .ci/engines.sh stop     stop them (idempotent); images and storage stay
#   bash .ci/engines.sh purge    stop, then remove the image, the volume, the user and its storage
#
# Names and state as .ci/services.sh (BUILDCTL_SERVICES_NAME, _PORT_BASE, _DIR, _WAIT); the bridge's
# address BUILDCTL_ENGINES_BRIDGE_CIDR (default 10.214.0.1/24). Waits are bounded; an engine that does
# not answer fails the command with the tail of its log. Never touches the default engine's or engine
# B's settings: everything here is named after <name> and found by its own name or pid file.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=engines
source .ci/lib.sh  # NAME, REGISTRY_PORT, STATE, LOGS, RUN, WAIT, SUDO; say, fail, wait_for, pid_of, stop_pid, apt_install

D26="$NAME-docker26"                  # container, volume and cgroup parent
D26_IMAGE="$NAME/docker26:trixie"
D26_BASE=buildctl/base:trixie
D26_DIR="/run/$D26"
D26_SOCK="$D26_DIR/docker.sock"
D26_BRIDGE="b26-${NAME:0:11}"         # at most 15 characters
D26_CIDR="${BUILDCTL_ENGINES_BRIDGE_CIDR:-10.214.0.1/24}"
PODMAN_USER="$NAME-podman"
PODMAN_HOME="/var/lib/$PODMAN_USER"
PODMAN_DIR="/run/$PODMAN_USER"
PODMAN_SOCK="$PODMAN_DIR/podman.sock"
PID_MARKERS=("$PODMAN_SOCK")

# as_podman CMD...: CMD as the rootless user, in its home, with its runtime folder (podman_prefix: the
# words before CMD, for a command whose pid is recorded: its command line then names the socket).
podman_prefix() {
  PREFIX=("${SUDO[@]}" env -C "$PODMAN_HOME" runuser -u "$PODMAN_USER" -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
          HOME="$PODMAN_HOME" XDG_RUNTIME_DIR="/run/user/$(id -u "$PODMAN_USER")")
}
as_podman() { podman_prefix; "${PREFIX[@]}" "$@"; }

# ------------------------------------------------------------------------------------------- docker 26

docker26() { docker -H "unix://$D26_SOCK" "$@"; }

d26_running() { [ "$(docker inspect -f '{{.State.Running}}' "$D26" 2>/dev/null)" = true ]; }

# The capabilities a privileged container would get that this machine's bounding set lacks.
missing_caps() {
  local bnd names i
  bnd=$((16#$(awk '/^CapBnd:/ {print $2}' /proc/self/status)))
  names=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
         NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
         SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
         AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ
         PERFMON BPF CHECKPOINT_RESTORE)
  for i in "${!names[@]}"; do
    if (( (bnd >> i & 1) == 0 )); then echo "${names[$i]}"; fi
  done
}

start_docker26() {
  local log="$LOGS/docker26.log"
  if d26_running && docker26 info >/dev/null 2>&1; then return 0; fi
  docker image inspect "$D26_BASE" >/dev/null 2>&1 \
    || fail "$D26_BASE is missing on the default engine; fix: bash .ci/bootstrap (it makes the base images)"
  if ! docker image inspect "$D26_IMAGE" >/dev/null 2>&1; then
    say "building $D26_IMAGE (trixie's docker.io from deb.debian.org; log $LOGS/docker26-image.log)"
    printf '%s\n' "FROM $D26_BASE" "LABEL buildctl=ci-engine" \
      "RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io iptables && rm -rf /var/lib/apt/lists/*" \
      | docker build --network host -t "$D26_IMAGE" - >"$LOGS/docker26-image.log" 2>&1 \
      || { tail -n 30 "$LOGS/docker26-image.log" >&2; fail "building $D26_IMAGE failed"; }
  fi
  if ! ip link show "$D26_BRIDGE" >/dev/null 2>&1; then "${SUDO[@]}" ip link add "$D26_BRIDGE" type bridge; fi
  if ! ip -4 addr show dev "$D26_BRIDGE" | grep -qF "${D26_CIDR%/*}/"; then
    "${SUDO[@]}" ip addr add "$D26_CIDR" dev "$D26_BRIDGE"
  fi
  "${SUDO[@]}" ip link set "$D26_BRIDGE" up
  "${SUDO[@]}" mkdir -p "$D26_DIR"
  "${SUDO[@]}" chmod 755 "$D26_DIR"
  docker rm -f "$D26" >/dev/null 2>&1 || true  # a stopped one of ours (the name is ours alone)
  local isolation=(--privileged) missing
  missing=$(missing_caps | xargs)
  if [ -n "$missing" ]; then
    # A privileged container asks for every capability; where the engine lacks one it does not start.
    [ -f /sys/fs/cgroup/cgroup.controllers ] \
      && fail "the default engine lacks capabilities ($missing) and cgroups are v2: docker26 needs --privileged here"
    say "the default engine lacks capabilities ($missing): docker26 gets all others, unconfined, instead of --privileged"
    isolation=(--cap-add ALL)
    for c in $missing; do isolation+=(--cap-drop "$c"); done
    isolation+=(--security-opt seccomp=unconfined --security-opt apparmor=unconfined
                --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm'
                -v /sys/fs/cgroup:/sys/fs/cgroup:rw)
  fi
  local group=()
  if getent group docker >/dev/null; then group=(-G "$(getent group docker | cut -d: -f3)"); fi
  say "starting docker26: unix://$D26_SOCK (container $D26, data volume $D26, bridge $D26_BRIDGE; log $log)"
  # cgroup v2 (a nested dockerd needs its own processes out of the root cgroup): as moby's hack/dind.
  local nest='if [ -f /sys/fs/cgroup/cgroup.controllers ]; then mkdir -p /sys/fs/cgroup/init;
    xargs -rn1 </sys/fs/cgroup/cgroup.procs >/sys/fs/cgroup/init/cgroup.procs 2>/dev/null || :;
    sed -e "s/ / +/g" -e "s/^/+/" </sys/fs/cgroup/cgroup.controllers >/sys/fs/cgroup/cgroup.subtree_control || :; fi; exec "$@"'
  docker run -d --name "$D26" --label "buildctl.ci-engine=$NAME" "${isolation[@]}" --network host \
    -v "$D26:/var/lib/docker" -v "$D26_DIR:$D26_DIR" "$D26_IMAGE" sh -c "$nest" sh \
    dockerd -H "unix://$D26_SOCK" "${group[@]}" --bridge "$D26_BRIDGE" --iptables=false --ip-masq=false \
    --cgroup-parent "/$D26" >/dev/null 2>"$log.start" || { cat "$log.start" >&2; fail "docker run $D26 failed"; }
  wait_for "docker26" "$log" d26_answers
}

d26_answers() {
  if ! d26_running; then
    docker logs "$D26" >"$LOGS/docker26.log" 2>&1 || true
    say "docker26 exited; last lines of its log:"; tail -n 30 "$LOGS/docker26.log" >&2; exit 1
  fi
  docker logs "$D26" >"$LOGS/docker26.log" 2>&1 || true
  docker26 info
}

stop_docker26() {
  if docker inspect "$D26" >/dev/null 2>&1; then
    say "stopping docker26 (container $D26)"
    docker stop -t 30 "$D26" >/dev/null 2>&1 || true
    docker rm -f "$D26" >/dev/null 2>&1 || true
  fi
  if ip link show "$D26_BRIDGE" >/dev/null 2>&1; then "${SUDO[@]}" ip link del "$D26_BRIDGE" || true; fi
}

# ------------------------------------------------------------------------------------------- podman

ensure_podman_packages() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v newuidmap >/dev/null 2>&1 || missing+=(uidmap)
  command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
  command -v fuse-overlayfs >/dev/null 2>&1 || missing+=(fuse-overlayfs)
  command -v catatonit >/dev/null 2>&1 || missing+=(catatonit)
  [ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"
}

# The next free range of subordinate ids after every range in FILE (at least 100000).
next_subid() {
  awk -F: 'BEGIN { n = 100000 } NF >= 3 && $2 + $3 > n { n = $2 + $3 } END { print n }' "$1"
}

ensure_podman_user() {
  if ! id -u "$PODMAN_USER" >/dev/null 2>&1; then
    say "adding the user $PODMAN_USER (rootless Podman; home $PODMAN_HOME)"
    "${SUDO[@]}" useradd --system --user-group --create-home --home-dir "$PODMAN_HOME" \
      --shell /usr/sbin/nologin "$PODMAN_USER"
  fi
  local first
  if ! grep -q "^$PODMAN_USER:" /etc/subuid 2>/dev/null; then
    first=$(next_subid /etc/subuid)
    "${SUDO[@]}" usermod --add-subuids "$first-$((first + 65535))" "$PODMAN_USER"
  fi
  if ! grep -q "^$PODMAN_USER:" /etc/subgid 2>/dev/null; then
    first=$(next_subid /etc/subgid)
    "${SUDO[@]}" usermod --add-subgids "$first-$((first + 65535))" "$PODMAN_USER"
  fi
  local conf="$PODMAN_HOME/.config/containers" uid
  uid=$(id -u "$PODMAN_USER")
  as_podman mkdir -p "$conf"
  as_podman tee "$conf/containers.conf" >/dev/null <<EOF
# $NAME: written by .ci/engines.sh
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOF
  as_podman tee "$conf/storage.conf" >/dev/null <<EOF
[storage]
driver = "overlay"
EOF
  as_podman tee "$conf/registries.conf" >/dev/null <<EOF
unqualified-search-registries = ["docker.io"]
[[registry]]
location = "127.0.0.1:$REGISTRY_PORT"
insecure = true
EOF
  "${SUDO[@]}" install -d -o "$PODMAN_USER" -g "$PODMAN_USER" -m 700 "/run/user/$uid"
  "${SUDO[@]}" install -d -o "$PODMAN_USER" -g "$PODMAN_USER" -m 711 "$PODMAN_DIR"
  # slirp4netns (rootless networks) opens /dev/net/tun; udev makes it 0666 on a usual Debian host
  if [ -c /dev/net/tun ] && ! as_podman test -r /dev/net/tun -a -w /dev/net/tun; then
    say "/dev/net/tun is not open to other users here (no udev rule); making it 0666, as udev does"
    "${SUDO[@]}" chmod 0666 /dev/net/tun
  fi
}

podman_answers() { docker -H "unix://$PODMAN_SOCK" version >/dev/null 2>&1 && [ -r "$PODMAN_SOCK" ]; }

start_podman() {
  local log="$LOGS/podman.log"
  if pid_of podman >/dev/null && podman_answers; then return 0; fi
  ensure_podman_packages
  ensure_podman_user
  say "starting podman (rootless, user $PODMAN_USER): unix://$PODMAN_SOCK (log $log)"
  : >>"$log"
  podman_prefix
  setsid "${PREFIX[@]}" podman system service --time 0 "unix://$PODMAN_SOCK" >>"$log" 2>&1 </dev/null &
  echo $! >"$RUN/podman.pid"  # sudo's or runuser's: TERM reaches podman through it
  wait_for "podman" "$log" test -S "$PODMAN_SOCK"
  # the invoking user (CI's runner, or root) reaches the socket through its group
  "${SUDO[@]}" chgrp "$(id -g)" "$PODMAN_SOCK"
  "${SUDO[@]}" chmod 660 "$PODMAN_SOCK"
  wait_for "podman" "$log" podman_answers
}

stop_podman() {
  stop_pid podman
  id -u "$PODMAN_USER" >/dev/null 2>&1 || return 0
  # rootless Podman keeps a pause process (its user namespace) after the service: ours, by its pid file
  local pause pid
  pause="/run/user/$(id -u "$PODMAN_USER")/libpod/tmp/pause.pid"
  if pid=$("${SUDO[@]}" cat "$pause" 2>/dev/null) && [ "$(stat -c %U "/proc/$pid" 2>/dev/null)" = "$PODMAN_USER" ]; then
    "${SUDO[@]}" kill -TERM "$pid" 2>/dev/null || true
  fi
}

# ------------------------------------------------------------------------------------------- base images

# The default engine's base images (bash .ci/bootstrap makes them with debootstrap) on ENGINE as well,
# by `docker save | docker load`: the same image ids, so the artifact keys are the same on every engine.
sync_base_images() {
  local host="$1" ref id
  for ref in buildctl/base:bookworm buildctl/base:trixie; do
    id=$(docker image inspect -f '{{.Id}}' "$ref" 2>/dev/null) || continue
    [ "$(docker -H "$host" image inspect -f '{{.Id}}' "$ref" 2>/dev/null)" = "$id" ] && continue
    say "loading $ref into $host"
    docker save "$ref" | docker -H "$host" load -q >/dev/null || fail "loading $ref into $host failed"
  done
}

# ------------------------------------------------------------------------------------------- commands

print_env() {
  local q
  emit() { printf -v q '%q' "$2"; echo "export $1=$q"; }
  emit BUILDCTL_SVC_ENGINE_DOCKER26 "unix://$D26_SOCK"
  emit BUILDCTL_SVC_ENGINE_PODMAN "unix://$PODMAN_SOCK"
}

status() {
  local rc=0
  if docker26 info >/dev/null 2>&1; then echo "docker26: answers"; else echo "docker26: DOWN"; rc=1; fi
  if podman_answers; then echo "podman: answers"; else echo "podman: DOWN"; rc=1; fi
  return "$rc"
}

case "${1:-}" in
  start)
    start_docker26
    start_podman
    sync_base_images "unix://$D26_SOCK"
    sync_base_images "unix://$PODMAN_SOCK"
    say "both answer (logs: $LOGS)"
    print_env
    ;;
  env) print_env ;;
  status) status ;;
  stop)
    stop_podman
    stop_docker26
    ;;
  purge)
    stop_podman
    stop_docker26
    say "removing $D26_IMAGE, the volume $D26, the user $PODMAN_USER and $PODMAN_HOME"
    docker volume rm "$D26" >/dev/null 2>&1 || true
    docker image rm "$D26_IMAGE" >/dev/null 2>&1 || true
    if id -u "$PODMAN_USER" >/dev/null 2>&1; then
      "${SUDO[@]}" rm -rf "/run/user/$(id -u "$PODMAN_USER")"
      "${SUDO[@]}" userdel -r "$PODMAN_USER" 2>/dev/null || "${SUDO[@]}" rm -rf "$PODMAN_HOME"
    fi
    "${SUDO[@]}" rm -rf "$PODMAN_DIR" "$D26_DIR"
    ;;
  *)
    echo "usage: bash .ci/engines.sh start|env|status|stop|purge" >&2
    exit 2
    ;;
esac
