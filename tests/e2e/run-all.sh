#!/usr/bin/env bash
# The e2e fault and bad-input tests (tests/e2e/cases.sh) on one stack: the
# Kubernetes API test double, one slurm-k8s-agent per node, a real 3-node
# Slurm cluster with spank_k8s.so. Needs root. Usage:
#
#   tests/e2e/run-all.sh [CASE...]      (default: all cases, see E2E_CASES)
#
# SK_BUILD_DIR names the build tree (default $SK_TOP_BUILDDIR, else ./build).
# SK_NETNS=1: each Slurm node (its slurmd, its agent) a host of its own in a
# network namespace, the double and this script in the site's (tests/slurm/
# hosts.sh, tests/e2e/lib.sh).
# Prints PASS:/FAIL: lines per check, a line per case with its time, and
# "e2e: N passed, N failed" last; exit 0 only when nothing failed. Everything
# it starts is stopped by pid on exit (trap), also on failure. Runs in its
# own cluster dir and ports (/tmp/sk-e2e, 28817, 29001.., kubelet 29250..) next to others.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SK_BUILD_DIR="${SK_BUILD_DIR:-${SK_TOP_BUILDDIR:-$here/../../build}}"
export E2E_GRACE="${E2E_GRACE:-5}"
[ "$(id -u)" = 0 ] || { echo "e2e: skipped (needs root to run slurmd and munged)"; exit 77; }
[ -f "$SK_BUILD_DIR/spank/.libs/spank_k8s.so" ] || { echo "e2e: skipped (no build in $SK_BUILD_DIR)"; exit 77; }
id "${TEST_USER:-k8suser}" >/dev/null 2>&1 || { echo "e2e: skipped (no user ${TEST_USER:-k8suser}: tests/slurm/cluster.sh install)"; exit 77; }

# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=online_rl.sh
. "$here/online_rl.sh"
# shellcheck source=cases.sh
. "$here/cases.sh"
# SK_NETNS=1: each node a host of its own, this script in the site (lib.sh).
sk_enter_site "$0" "$@"

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=("${E2E_CASES[@]}")
T0=$SECONDS
passed=0 failed=0

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  rl_stop_log_followers now
  [ -n "${E2E_TL_FOLLOWER:-}" ] && kill $E2E_TL_FOLLOWER 2>/dev/null
  [ -n "${E2E_WATCH_PID:-}" ] && { kill "$E2E_WATCH_PID" 2>/dev/null; wait "$E2E_WATCH_PID" 2>/dev/null; }
  e2e_stop || { echo "FAIL: stopping the stack (see $E2E_D/cluster-stop.log)"; report_record fail "e2e: stopping the stack"; rc=1; }
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "--- starting the stack in $E2E_D"
if ! e2e_start; then
  echo "FAIL: the stack did not start"
  report_record fail "e2e: the stack did not start"
  echo "e2e: 0 passed, 1 failed"
  exit 1
fi
echo "    up in $((SECONDS - T0)) s"
# What a user sees in the API, recorded with timestamps (final pod statuses).
python3 "$here/watch.py" record "$E2E_D/watch.jsonl" --kubeconfig "$E2E_ADMIN_KUBECONFIG" &
E2E_WATCH_PID=$!

# The time-limit job runs (60 s) while the other cases do (not api_down).
tl_pending=0
[[ " ${cases[*]} " == *" time_limit "* ]] && tl_pending=1

for c in "${cases[@]}"; do
  if [ "$tl_pending" = 1 ] && [ "$c" != api_down ]; then
    case_time_limit_submit || echo "FAIL: could not submit the time-limit job"
    tl_pending=0
  fi
  declare -F "case_$c" >/dev/null || { echo "FAIL: no case $c"; report_record fail "e2e: no case $c"; failed=$((failed + 1)); continue; }
  echo "--- $c"
  t=$SECONDS
  out="$E2E_D/case-$c.out"
  # A subshell per case: its assertions are counted from its output.
  ( SK_PASSED=0 SK_FAILED=0; "case_$c" ) 2>"$E2E_D/case-$c.err" | tee "$out"
  p=$(grep -c '^PASS:' "$out"); f=$(grep -c '^FAIL:' "$out")
  [ "$p" -gt 0 ] || [ "$f" -gt 0 ] || { f=1; echo "FAIL: $c asserted nothing (stderr: $E2E_D/case-$c.err)"; report_record fail "e2e: $c asserted nothing"; }
  [ "$f" -gt 0 ] && sed 's/^/    stderr: /' "$E2E_D/case-$c.err" | tail -n 5
  passed=$((passed + p)); failed=$((failed + f))
  echo "    $c: $p passed, $f failed, $((SECONDS - t)) s"
done

echo "--- stopping"
rl_stop_log_followers now
[ -n "${E2E_TL_FOLLOWER:-}" ] && kill $E2E_TL_FOLLOWER 2>/dev/null
kill "$E2E_WATCH_PID" 2>/dev/null; wait "$E2E_WATCH_PID" 2>/dev/null; E2E_WATCH_PID=""
e2e_stop; rc=$?
left="$(e2e_procs)"
# The hosts' network namespaces too (this script's site ends with it).
[ "$SK_NETNS" = 1 ] && left="$left$(sk_netns_ours | sed 's/^/ netns /' | tr -d '\n')"
[ "$rc" = 0 ] && [ -z "$left" ] && passed=$((passed + 1)) && echo "PASS: everything stopped, no process left" \
  && report_record pass "e2e: everything stopped, no process left" \
  || { failed=$((failed + 1)); echo "FAIL: stop (rc $rc), left: $left"; report_record fail "e2e: stop (rc $rc), left: $left"; }
trap - EXIT
echo "total time $((SECONDS - T0)) s"
echo "e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
