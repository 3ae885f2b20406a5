#!/usr/bin/env bash
# buildctl-git-fetch URL REF DIR [SUBMODULES [COMMIT]]: shallow checkout of a tag, branch or commit, with
# submodules. COMMIT: the commit REF was resolved to before the key (store/git_refs.py): exactly it is
# checked out (fetched by its sha; else by REF, refused when REF names another commit now).
# URL is the recipe's URL as rendered, without credentials; when it had some, the real URL comes from
# this build's credentials (secrets.sh). git keeps no URL with credentials: it fetches by URL (no
# remote in .git/config) and writes FETCH_HEAD with the URL's user and password removed.
set -eu
[ -n "${BUILDCTL_SECRETS_TAKEN:-}" ] || . /usr/local/lib/buildctl/secrets.sh
url=$1 ref=$2 dir=$3 submodules=${4:-1} commit=${5:-}
real=$(printf '%s\n' "${BUILDCTL_URL_MAP:-}" | awk -v u="$url" '$1 == u { print $2; exit }')
# A login goes to git through a credential helper of its environment, for that URL's host only, never on its
# command line (every process's argv is readable in /proc, the host's included): git fetches URL as rendered.
# Only a URL whose credentials were its login alone (a token in its query stays in the URL git is given).
pct_decode() { printf '%b' "$(printf '%s' "$1" | sed 's/%\([0-9A-Fa-f][0-9A-Fa-f]\)/\\x\1/g')"; }
if [ -n "$real" ]; then
  scheme=${real%%://*} rest=${real#*://}
  hostpart=${rest%%[/?#]*}
  case "$hostpart" in
    *@*)
      login=${hostpart%@*} host=${hostpart##*@}
      if [ "$scheme://$host${rest#"$hostpart"}" = "$url" ]; then
        pass=
        case "$login" in *:*) pass=${login#*:} ;; esac
        BUILDCTL_GIT_USERNAME=$(pct_decode "${login%%:*}") BUILDCTL_GIT_PASSWORD=$(pct_decode "$pass")
        n=${GIT_CONFIG_COUNT:-0}
        export BUILDCTL_GIT_USERNAME BUILDCTL_GIT_PASSWORD GIT_CONFIG_COUNT=$((n + 1)) \
          "GIT_CONFIG_KEY_$n=credential.$scheme://$host.helper" \
          "GIT_CONFIG_VALUE_$n=!f() { test \"\$1\" = get && printf 'username=%s\\npassword=%s\\n' \"\$BUILDCTL_GIT_USERNAME\" \"\$BUILDCTL_GIT_PASSWORD\"; }; f"
        real=
      fi ;;
  esac
fi
mkdir -p "$dir"
cd "$dir"
if [ ! -d .git ]; then git init -q .; fi
git config --global --add safe.directory '*'
if [ -n "$commit" ]; then
  git fetch -q --depth 1 "${real:-$url}" "$commit" 2>/dev/null \
    || git fetch -q --depth 1 "${real:-$url}" "$ref" || { echo "buildctl: git ref $ref not found in $url" >&2; exit 1; }
  got=$(git rev-parse 'FETCH_HEAD^{commit}')
  if [ "$got" != "$commit" ]; then
    echo "buildctl: git ref $ref of $url is $got now, not $commit as resolved before the key; fix: build again (it resolves the ref anew)" >&2
    exit 1
  fi
  git checkout -q --force "$commit"
else
  git fetch -q --depth 1 "${real:-$url}" "$ref" || { echo "buildctl: git ref $ref not found in $url" >&2; exit 1; }
  git checkout -q --force FETCH_HEAD
fi
if [ "$submodules" = 1 ] && [ -f .gitmodules ]; then
  git submodule -q update --init --recursive --depth 1
fi
