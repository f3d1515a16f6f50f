#!/usr/bin/env bash
# distcheck-hook: every file git tracks is in the tarball, but for those that
# only serve the repository (.ci/, .gitignore). A file a build or a test needs
# and EXTRA_DIST forgot would otherwise only show when someone builds the
# tarball; `make check` in distcheck would not see a missing test helper of a
# layer it does not run (the integration and e2e layers).
#
#   dist-complete.sh SRCDIR DISTDIR
#
# Prints each missing file; exits 1 when there is one, 0 when none or when
# SRCDIR is not a git checkout (a tarball's own distcheck).
set -uo pipefail
src=$1 dist=$2
if ! command -v git >/dev/null 2>&1 || ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "dist-complete.sh: $src is not a git checkout; nothing to compare"
  exit 0
fi
missing=0
while IFS= read -r -d '' f; do
  case $f in .ci/* | .gitignore) continue ;; esac
  [ -e "$dist/$f" ] || [ -L "$dist/$f" ] || { echo "dist-complete.sh: $f is tracked but not in the tarball (add it to EXTRA_DIST or a _SOURCES list)"; missing=$((missing + 1)); }
done < <(git -C "$src" ls-files -z)
[ "$missing" = 0 ] || { echo "dist-complete.sh: $missing tracked file(s) missing from the tarball"; exit 1; }
echo "dist-complete.sh: every tracked file is in the tarball"
