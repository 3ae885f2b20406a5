#!/bin/sh
# buildctl-patch: apply patches to the source tree, in order, failing with the patch and the hunk.
#   buildctl-patch file   SRC STRIP PATCHFILE [LABEL]
#   buildctl-patch series SRC STRIP SERIESFILE [SKIP...]   (quilt series: one patch per line, # comments)
set -eu
mode=$1 src=$2 strip=$3 arg=$4
shift 4

apply() {  # PATCHFILE LABEL
  # A path source is copied over the last run's tree, so a file this patch creates (--- /dev/null)
  # may be there from the last run: it goes first (a tarball or git tree is patched once, fresh).
  awk -v strip="$strip" '
    /^--- \/dev\/null/ { new = 1; next }
    new && /^\+\+\+ / { sub(/^\+\+\+ /, ""); sub(/\t.*$/, ""); n = split($0, p, "/"); f = ""
                         for (i = strip + 1; i <= n; i++) f = f (f == "" ? "" : "/") p[i]
                         if (f != "" && f !~ /(^|\/)\.\.(\/|$)/) print f }
    { new = 0 }' "$1" | while IFS= read -r created; do rm -f "$src/$created"; done
  if ! out=$(patch -d "$src" -p"$strip" --forward --batch --no-backup-if-mismatch -r - <"$1" 2>&1); then
    printf '%s\n' "$out" >&2
    # GNU patch says "patching file F" then "Hunk #N FAILED at L."; name the first failure.
    where=$(printf '%s\n' "$out" | awk '
      /^patching file /{f=$3}
      /FAILED|malformed|previously applied|can.t find file|Only garbage/ {print (f ? f ": " : "") $0; exit}')
    echo "buildctl: patch $2 does not apply: ${where:-patch exited non-zero}" >&2
    exit 1
  fi
  echo "buildctl: applied patch $2"
}

case "$mode" in
  file)
    apply "$arg" "${1:-${arg##*/}}"
    ;;
  series)
    [ -f "$arg" ] || { echo "buildctl: patch series $arg not found in the source tree" >&2; exit 1; }
    dir=$(dirname "$arg")
    listed=$(sed -e 's/#.*//' -e 's/[[:space:]].*//' "$arg" | grep -v '^$' || true)
    for skip in "$@"; do
      printf '%s\n' "$listed" | grep -qxF "$skip" \
        || { echo "buildctl: skip names $skip, which the series $arg does not list" >&2; exit 1; }
    done
    for name in $listed; do
      case " $* " in *" $name "*) echo "buildctl: skipped patch $name"; continue ;; esac
      apply "$dir/$name" "$name"
    done
    ;;
  *)
    echo "buildctl-patch: unknown mode $mode" >&2; exit 2
    ;;
esac
