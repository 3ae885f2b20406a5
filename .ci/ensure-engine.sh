#!/usr/bin/env bash
# Make sure a Docker engine answers and debootstrap is available (for the local base image).
#   - installs what is missing (docker.io, debootstrap, debian-archive-keyring) with apt-get;
#   - starts dockerd in the background when `docker info` does not answer, its log in $DOCKERD_LOG;
#   - waits for `docker info` with a bounded poll, and fails loudly with the dockerd log tail.
# Works as root or as a user with sudo. DOCKER_HOST=tcp:// or ssh:// is respected: then a
# non-answering engine is an error, not something to start here; DOCKER_HOST=unix://PATH makes the
# started dockerd listen on PATH. DOCKERD_FLAGS adds flags to dockerd (e.g. --data-root DIR); for a
# second daemon next to a running one, never --bridge=none: dockerd then deletes the host's docker0.
set -euo pipefail

DOCKERD_LOG="${DOCKERD_LOG:-${RUNNER_TEMP:-/tmp}/buildctl-dockerd.log}"
WAIT_SECONDS="${DOCKERD_WAIT_SECONDS:-60}"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo -n); else
    echo "ensure-engine: not root and no sudo; run as root or install docker.io/debootstrap first" >&2
  fi
fi

engine_answers() { docker info >/dev/null 2>&1; }

missing=()
if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then missing+=(debootstrap); fi
if [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then missing+=(debian-archive-keyring); fi
if ! engine_answers && ! command -v dockerd >/dev/null 2>&1; then missing+=(docker.io); fi
if ! command -v docker >/dev/null 2>&1 && [[ ! " ${missing[*]} " == *" docker.io "* ]]; then missing+=(docker.io); fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "ensure-engine: installing ${missing[*]}" >&2
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if engine_answers; then
  echo "ensure-engine: engine answers ($(docker info --format '{{.ServerVersion}}, {{.Driver}}'))" >&2
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [[ "${DOCKER_HOST}" != unix://* ]]; then
  echo "ensure-engine: DOCKER_HOST=${DOCKER_HOST} does not answer (docker info):" >&2
  docker info 2>&1 | tail -5 >&2 || true
  exit 1
fi

sock=/var/run/docker.sock
dockerd_args=()
if [[ "${DOCKER_HOST:-}" == unix://* ]]; then
  sock="${DOCKER_HOST#unix://}"
  dockerd_args+=(-H "$DOCKER_HOST")
fi
read -r -a extra_flags <<<"${DOCKERD_FLAGS:-}"
dockerd_args+=("${extra_flags[@]}")
if [ -S "$sock" ] && pgrep -x dockerd >/dev/null 2>&1 && docker info 2>&1 | grep -qi "permission denied"; then
  # A daemon runs but refuses us: most likely the socket's permissions.
  echo "ensure-engine: dockerd runs but docker info fails:" >&2
  docker info 2>&1 | tail -5 >&2 || true
  echo "ensure-engine: fix: add this user to the docker group (sudo usermod -aG docker \$USER) or run as root" >&2
  exit 1
fi

echo "ensure-engine: starting dockerd (log: $DOCKERD_LOG)" >&2
: >"$DOCKERD_LOG"
"${SUDO[@]}" nohup dockerd "${dockerd_args[@]}" >>"$DOCKERD_LOG" 2>&1 &
dockerd_pid=$!

for _ in $(seq 1 "$((WAIT_SECONDS * 2))"); do
  if engine_answers; then
    echo "ensure-engine: engine answers ($(docker info --format '{{.ServerVersion}}, {{.Driver}}'))" >&2
    exit 0
  fi
  if [ ! -d "/proc/$dockerd_pid" ]; then  # not kill -0: under sudo the pid is root's
    echo "ensure-engine: dockerd exited early; last lines of $DOCKERD_LOG:" >&2
    tail -n 30 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
  sleep 0.5
done

echo "ensure-engine: dockerd did not answer within ${WAIT_SECONDS}s; last lines of $DOCKERD_LOG:" >&2
tail -n 30 "$DOCKERD_LOG" >&2 || true
if [ -S "$sock" ] && [ "$(id -u)" -ne 0 ]; then
  echo "ensure-engine: $sock exists; if docker info says permission denied: sudo usermod -aG docker \$USER" >&2
fi
exit 1
