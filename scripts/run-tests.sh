#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   1. installs every package the build and the tests need (apt-get),
#   2. builds out of tree in $SK_BUILD_DIR (default ./build),
#   3. `make check`: Check unit tests, the test API server suite with kubectl,
#      component tests (agent, shim, kubelet endpoint),
#   4. the integration layer: a real Slurm cluster (munge, slurmctld, 3 slurmd,
#      fake GPUs) started by tests/slurm/cluster.sh, real sbatch/srun jobs,
#   5. `make check` again in an ASan + UBSan build, and the e2e layer on real
#      Slurm with that build's agent and shim (SK_SANITIZERS=0 skips both),
#   6. robustness layers on the normal build: the agent's and the shim's
#      component tests under valgrind memcheck (make check-valgrind), the soak
#      (make check-soak, SOAK_SECONDS), every libFuzzer target for a bounded
#      time (make fuzz-short, SK_FUZZ_SECONDS), static analysis (make lint),
#      clang-format over every tracked C/C++ source (make format-check),
#      ./configure --disable-daemons with the daemons' -dev packages hidden
#      (make check-disable-daemons);
#      SK_ROBUSTNESS=0 skips them all; a layer whose tool is missing exits 77
#      and is reported as skipped, never counted as passed,
#   7. `make distcheck` (SK_DISTCHECK=0 skips it).
# SK_CPU_HOGS=N runs the tests (steps 3-7) with N busy loops beside them, as on
# a loaded machine (the suite must pass so: its tests wait on events, not on
# time); the loops are stopped at exit.
# Prints each layer's summary and a final "total: N passed, N failed".
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SK_BUILD_DIR:-$top/build}
jobs=${SK_JOBS:-$(nproc)}
# Each layer's heading says when it starts (seconds since the script began),
# so a run's log shows where the suite's time goes.
say() { printf '\n=== %s === (at %d s)\n' "$*" "$SECONDS"; }

say "installing packages and the test user"
# cluster.sh install runs scripts/install-deps.sh and creates the unprivileged
# user (k8suser) the integration layer submits jobs as.
bash "$top/tests/slurm/cluster.sh" install >/dev/null \
  || { echo "run-tests: package installation failed" >&2; exit 1; }

# The tests run the built programs as other users (the job's user k8suser,
# nobody): each directory above the checkout must let them through (a clone
# into `mktemp -d` is 0700). Only search permission (o+x) is added, and said.
d=$top
while [ "$d" != / ]; do
  if [ -z "$(find "$d" -maxdepth 0 -perm -o=x)" ]; then
    echo "run-tests: adding o+x to $d (the tests run programs of this tree as other users)"
    chmod o+x "$d"
  fi
  d=$(dirname "$d")
done

say "building in $build"
(cd "$top" && autoreconf -fi >/dev/null 2>&1) || { echo "run-tests: autoreconf failed" >&2; exit 1; }
mkdir -p "$build"
(cd "$build" && "$top/configure" --enable-werror ${SK_CONFIGURE_FLAGS:-}) >"$build/configure.out" 2>&1 \
  || { tail -40 "$build/configure.out"; echo "run-tests: configure failed" >&2; exit 1; }
sed -n '/configuration$/,$p' "$build/configure.out"
# Built under bear when it is there: its compile database is what `make lint`
# analyses later, so the static analysis needs no build of its own.
bear_=()
command -v bear >/dev/null 2>&1 && bear_=(bear --output "$build/compile_commands.json" --append --)
rm -f "$build/compile_commands.json"
"${bear_[@]}" make -C "$build" -j"$jobs" >"$build/make.out" 2>&1 \
  || { grep -E "error|Error" "$build/make.out" | head -40; echo "run-tests: build failed" >&2; exit 1; }
# The test programs too (TESTS= builds them without running anything).
"${bear_[@]}" make -C "$build" -j"$jobs" check TESTS= >>"$build/make.out" 2>&1 \
  || { grep -E "error|Error" "$build/make.out" | head -40; echo "run-tests: build failed" >&2; exit 1; }

hogs=()
stop_hogs() { [ ${#hogs[@]} -eq 0 ] || { kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; }; }
trap stop_hogs EXIT
if [ "${SK_CPU_HOGS:-0}" -gt 0 ] 2>/dev/null; then
  for _ in $(seq "$SK_CPU_HOGS"); do
    ( trap - EXIT; while :; do :; done ) &
    hogs+=($!)
  done
  say "running the tests with $SK_CPU_HOGS CPU hogs beside them (pids ${hogs[*]})"
fi

passed=0 failed=0 skips=0
# True when `make TARGET` (exit status $1, output in file $2) stopped because
# its script exited 77, automake's "skipped": make itself then exits 2 and
# prints "Error 77".
skipped() {
  [ "$1" = 77 ] || { [ "$1" != 0 ] && grep -qE '\*\*\* .*Error 77$' "$2"; }
}
count_line() {  # adds the counts of an "N passed, N failed" line
  local line=$1
  local p f
  p=$(sed -nE 's/.*\b([0-9]+) passed, ([0-9]+) failed.*/\1/p' <<<"$line")
  f=$(sed -nE 's/.*\b([0-9]+) passed, ([0-9]+) failed.*/\2/p' <<<"$line")
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
}

say "make check (unit, test API server, component)"
# The test programs run as an unprivileged user where they need to (kubectl,
# the agent's socket tests); `make check` itself runs here.
make -C "$build" -j"$jobs" check >"$build/check.out" 2>&1
check_rc=$?
grep -E "^(PASS|FAIL|ERROR|XFAIL|XPASS|SKIP):" "$build/check.out"
# Each Check program's own summary line, and each script's N passed line.
for log in $(find "$build/tests" "$build/agent" "$build/k8s-shim" "$build/spank" -name '*.log' ! -name test-suite.log 2>/dev/null | sort); do
  grep -ahE "^[0-9]+%: Checks: [0-9]+|^([a-z-]+: )?[0-9]+ passed, [0-9]+ failed" "$log" | sed "s|^|${log#"$build"/}: |"
done
p=$(sed -nE 's/^# PASS: +([0-9]+)/\1/p' "$build/check.out" | tail -1)
f=$(( $(sed -nE 's/^# FAIL: +([0-9]+)/\1/p' "$build/check.out" | tail -1) + $(sed -nE 's/^# ERROR: +([0-9]+)/\1/p' "$build/check.out" | tail -1) ))
count_line "${p:-0} passed, ${f:-0} failed"
if [ "$check_rc" != 0 ]; then
  [ -f "$build/test-suite.log" ] && cat "$build/test-suite.log"
  failed=$((failed + (f == 0 ? 1 : 0)))
fi

if [ "${SK_SANITIZERS:-1}" = 1 ]; then
say "make check under AddressSanitizer + UndefinedBehaviorSanitizer"
# A second build of the same tree; the integration layer cannot load an ASan
# plugin into slurmd, so it runs on the normal build only.
san="$build-sanitizers"
mkdir -p "$san"
if (cd "$san" && "$top/configure" --enable-sanitizers --enable-werror >configure.out 2>&1) &&
   make -C "$san" -j"$jobs" >"$san/make.out" 2>&1 &&
   make -C "$san" -j"$jobs" check >"$san/check.out" 2>&1; then
  grep -E "^# (PASS|FAIL|ERROR):" "$san/check.out" | sed 's/^/sanitizers: /'
  echo "sanitizers: 1 passed, 0 failed"; passed=$((passed + 1))
  san_e2e=1
else
  grep -E "^(FAIL|ERROR):|error:" "$san/make.out" "$san/check.out" 2>/dev/null | head -20
  [ -f "$san/test-suite.log" ] && tail -80 "$san/test-suite.log"
  echo "sanitizers: 0 passed, 1 failed"; failed=$((failed + 1))
fi
fi

if [ "${san_e2e:-0}" = 1 ]; then
  say "e2e on real Slurm with the ASan + UBSan agent and shim"
  # slurmd is not instrumented, so the plugin is the normal build's; the
  # agents and the shims (through slurmd, slurmstepd and the plugin, which
  # pass the *SAN_OPTIONS on) write any report into $reports.
  # Under /tmp: the shims run as the test user, who may not reach $san.
  reports=$(mktemp -d /tmp/sk-sanitizer-reports.XXXXXX); chmod 1777 "$reports"
  ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1" \
  UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1" \
  LSAN_OPTIONS="log_path=$reports/lsan" \
  SK_BUILD_DIR="$build" SK_DAEMON_BUILD_DIR="$san" bash "$top/tests/e2e/run-all.sh" >"$san/e2e.out" 2>&1
  line=$(grep -E '^e2e: [0-9]+ passed, [0-9]+ failed' "$san/e2e.out" | tail -1)
  grep -E "^(FAIL|    [a-z_]+: )" "$san/e2e.out"
  echo "sanitizers ${line:-e2e: 0 passed, 1 failed}"; count_line "${line:-0 passed, 1 failed}"
  if [ -n "$(find "$reports" -type f -size +0 2>/dev/null)" ]; then
    head -c 6000 "$reports"/*; cp -r "$reports" "$san/"
    echo "sanitizers e2e reports: 0 passed, 1 failed (kept in $san/$(basename "$reports"))"; failed=$((failed + 1))
  else
    echo "sanitizers e2e reports: 1 passed, 0 failed (none)"; passed=$((passed + 1))
  fi
  rm -rf "$reports"
fi

say "integration (real Slurm cluster)"
make -C "$build" check-integration 2>&1 | tee "$build/integration.out"
int_rc=${PIPESTATUS[0]}
if skipped "$int_rc" "$build/integration.out"; then
  # This script runs as root, where the layer must run: a skip is a failure.
  echo "integration: 0 passed, 1 failed (skipped: it needs root)"; failed=$((failed + 1))
else
  count_line "$(grep -E '^integration: [0-9]+ passed, [0-9]+ failed' "$build/integration.out" | tail -1)"
  [ "$int_rc" != 0 ] && ! grep -qE "[1-9][0-9]* failed" "$build/integration.out" && failed=$((failed + 1))
fi

# One robustness layer: `make TARGET` in the normal build, its own
# "N passed, N failed" line counted; exit 77 (a tool missing) is a skip.
layer() {
  local name=$1 target=$2 out="$build/$2.out" rc line
  say "$name (make $target)"
  make -C "$build" "$target" >"$out" 2>&1
  rc=$?
  line=$(grep -aE "(^|: )[0-9]+ passed, [0-9]+ failed" "$out" | tail -1)
  if skipped "$rc" "$out"; then
    tail -5 "$out"; echo "$target: skipped (a tool is missing)"; skips=$((skips + 1)); return
  fi
  grep -aE "^(PASS|FAIL|SKIP)[: ]|^lint: " "$out" | tail -40
  if [ -n "$line" ] && [ "$target" != lint ]; then
    echo "$target: $line"; count_line "$line"
    [ "$rc" != 0 ] && ! grep -qE "[1-9][0-9]* failed" <<<"$line" && failed=$((failed + 1))
  elif [ "$rc" = 0 ]; then
    echo "$target: 1 passed, 0 failed"; passed=$((passed + 1))
  else
    tail -60 "$out"; echo "$target: 0 passed, 1 failed"; failed=$((failed + 1))
  fi
}
if [ "${SK_ROBUSTNESS:-1}" = 1 ]; then
  export SK_LINT_BUILDDIR="$build"  # its compile database is recorded above
  layer "agent and shim under valgrind memcheck" check-valgrind
  layer "soak: pod churn with broken watches" check-soak
  layer "fuzzing, every target for a bounded time" fuzz-short
  layer "static analysis" lint
  layer "source formatting (clang-format)" format-check
  layer "plugin-only build without the daemons' libraries" check-disable-daemons
fi

if [ "${SK_DISTCHECK:-1}" = 1 ]; then
  say "make distcheck"
  if make -C "$build" -j"$jobs" distcheck >"$build/distcheck.out" 2>&1; then
    echo "distcheck: 1 passed, 0 failed"; passed=$((passed + 1))
  else
    tail -60 "$build/distcheck.out"; echo "distcheck: 0 passed, 1 failed"; failed=$((failed + 1))
  fi
fi

echo
echo "run-tests: the suite took $SECONDS s"
skip_note=""
[ "$skips" != 0 ] && skip_note=", $skips skipped (not passed)"
echo "total: $passed passed, $failed failed$skip_note"
[ "$failed" = 0 ]
