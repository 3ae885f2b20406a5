#!/usr/bin/env bash
# buildctl-git-fetch URL REF DIR: shallow checkout of a tag, branch or commit, with submodules.
# URL is the recipe's URL as rendered, without credentials; when it had some, the real URL comes from
# this build's credentials (secrets.sh). git keeps no URL with credentials: it fetches by URL (no
# remote in .git/config) and writes FETCH_HEAD with the URL's user and password removed.
set -eu
[ -n "${BUILDCTL_SECRETS_TAKEN:-}" ] || . /usr/local/lib/buildctl/secrets.sh
url=$1 ref=$2 dir=$3 submodules=${4:-1}
real=$(printf '%s\n' "${BUILDCTL_URL_MAP:-}" | awk -v u="$url" '$1 == u { print $2; exit }')
mkdir -p "$dir"
cd "$dir"
if [ ! -d .git ]; then git init -q .; fi
git config --global --add safe.directory '*'
git fetch -q --depth 1 "${real:-$url}" "$ref" || { echo "buildctl: git ref $ref not found in $url" >&2; exit 1; }
git checkout -q --force FETCH_HEAD
if [ "$submodules" = 1 ] && [ -f .gitmodules ]; then
  git submodule -q update --init --recursive --depth 1
fi
