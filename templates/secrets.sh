# buildctl: this build's credentials, if it has any, into the environment of the shell that sources
# this file (`. /usr/local/lib/buildctl/secrets.sh`): the image's RUN steps that reach the network,
# the download and git helpers, the build script. Never onto disk for longer than that shell lives:
#   in a container: from /run/buildctl-secrets, copied in by buildctl before the start, removed here;
#   in an image build: from buildctl's server on the host, for as long as the build runs, announced
#   in /etc/hosts as buildctl-secrets-<port>-<token> (--add-host: no layer, history or cache key).
# What arrives is shell assignments (secrets.Credentials.payload): proxies with their passwords,
# pip's indexes, BUILDCTL_URL_MAP (the real URL behind each rendered one), an apt login. The apt login
# is written for apt-get and removed when the shell exits, before Docker commits the layer.
# bash only (/dev/tcp): it runs before curl is installed.
if [ -z "${BUILDCTL_SECRETS_TAKEN:-}" ]; then
  export BUILDCTL_SECRETS_TAKEN=1
  buildctl_apt_auth=""
  if [ -f /run/buildctl-secrets ]; then
    . /run/buildctl-secrets
    rm -f /run/buildctl-secrets
  elif read -r buildctl_addr buildctl_host < <(awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^buildctl-secrets-[0-9]+-[0-9a-f]+$/) { print $1, $i; exit } }' /etc/hosts 2>/dev/null); then
    buildctl_port=${buildctl_host#buildctl-secrets-}
    buildctl_port=${buildctl_port%%-*}
    if ! buildctl_payload=$({ printf '%s\n' "${buildctl_host##*-}" >&9 && cat <&9; } 9<>"/dev/tcp/$buildctl_addr/$buildctl_port"); then
      echo "buildctl: cannot reach buildctl's credential server at $buildctl_addr:$buildctl_port" \
           "(a firewall between the build's containers and the host?)" >&2
      return 1
    fi
    eval "$buildctl_payload"
    unset buildctl_host buildctl_addr buildctl_port buildctl_payload
  fi
  if [ -n "$buildctl_apt_auth" ] && [ -d /etc/apt/auth.conf.d ]; then
    (umask 077 && printf '%s' "$buildctl_apt_auth" > /etc/apt/auth.conf.d/90buildctl.conf)
    trap 'rm -f /etc/apt/auth.conf.d/90buildctl.conf' EXIT
  fi
  unset buildctl_apt_auth
fi
