#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   1. installs every package the build and the tests need (apt-get),
#   2. builds out of tree in $SK_BUILD_DIR (default ./build),
#   3. `make check`: Check unit tests, the test API server suite with kubectl,
#      component tests (agent, shim, kubelet endpoint); it runs in step 6's
#      sanitizer build (here only without it: SK_DISTCHECK=0 or SK_SANITIZERS=0),
#   4. the integration layer: a real Slurm cluster (munge, slurmctld, 3 slurmd,
#      fake GPUs) started by tests/slurm/cluster.sh, real sbatch/srun jobs
#      (its e2e cases run in step 6's build, with the sanitizers),
#   5. robustness layers on the normal build: the soak (make check-soak,
#      SOAK_SECONDS), the agent's and the shim's component tests under
#      valgrind memcheck (make check-valgrind), every libFuzzer target for a
#      bounded time (make fuzz-short, SK_FUZZ_SECONDS; its clang build runs
#      in the background from the end of the build), static analysis (make
#      lint; in the background from the end of the build, counted at the end),
#      clang-format over every tracked C/C++ source (make format-check),
#      ./configure --disable-daemons with the daemons' -dev packages hidden
#      (make check-disable-daemons), the plugin built against and run by Slurm
#      24.11 in a Debian 13 tree (tests/slurm/newer-slurm.sh, SK_NEWER_SLURM=0
#      skips it); they (nothing of the cluster's Slurm, its test user or its
#      ports) run beside step 6's e2e, which mostly waits on Slurm and
#      its timeouts, at nice 10 (lint and the fuzz build at 19, from the end
#      of the build);
#      SK_ROBUSTNESS=0 skips them all; a layer whose tool is missing exits 77
#      and is reported as skipped, never counted as passed,
#   6. `make distcheck` with configure --enable-sanitizers: the tarball (which
#      must hold every tracked file) built with ASan + UBSan, its `make check`,
#      install and uninstall, and the e2e layer on real Slurm with that
#      build's agent and shim (SK_DISTCHECK=0 skips it, SK_SANITIZERS=0 makes
#      it a plain distcheck without the e2e).
#   7. Slurm's cgroup/v2 in a QEMU guest with this build's plugin (make
#      check-cgroup-v2, tests/vm: this host's hybrid cgroup layout cannot run
#      it) and the e2e case pod_devices there (make check-cgroup-v2-e2e),
#      alone after the rest; SK_CGROUP_V2=0 skips them.
# The builds are made with line tables only (-g1: what valgrind's, the
# sanitizers' and gdb's backtraces need; a third less compile time than -g):
# SK_CXXFLAGS (default "-O2 -g1") and SK_SAN_CXXFLAGS ("-O1 -g1") change it.
# SK_CPU_HOGS=N runs the tests (steps 3-6) with N busy loops beside them, as on
# a loaded machine (the suite must pass so: its tests wait on events, not on
# time); the loops are stopped at exit.
# Prints each layer's summary and a final "total: N passed, N failed".
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SK_BUILD_DIR:-$top/build}
jobs=${SK_JOBS:-$(nproc)}
# Each layer's heading says when it starts (seconds since the script began),
# so a run's log shows where the suite's time goes.
# With the CPU time its children have used so far, user + system (a
# background layer's from when it is waited for): a layer that takes long but
# little CPU waits (on Slurm, on timeouts), one that takes the CPU's all
# computes.
# `times` in this shell (in a command substitution it would be the subshell's).
cpu_file=$(mktemp)
say() {
  times >"$cpu_file"
  printf '\n=== %s === (at %d s, CPU so far %s s)\n' "$*" "$SECONDS" \
    "$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%d", n }' "$cpu_file")"
}

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
(cd "$build" && "$top/configure" --enable-werror CXXFLAGS="${SK_CXXFLAGS:--O2 -g1}" ${SK_CONFIGURE_FLAGS:-}) >"$build/configure.out" 2>&1 \
  || { tail -40 "$build/configure.out"; echo "run-tests: configure failed" >&2; exit 1; }
sed -n '/configuration$/,$p' "$build/configure.out"
# Built under bear when it is there: its compile database is what `make lint`
# analyses later, so the static analysis needs no build of its own. Through
# its compiler wrappers (first on PATH), not its preloaded library: that one
# reports every process libtool's shell scripts start, and made the build
# half as slow again.
bear_=()
command -v bear >/dev/null 2>&1 && bear_=(bear --force-wrapper --output "$build/compile_commands.json" --append --)
rm -f "$build/compile_commands.json"
"${bear_[@]}" make -C "$build" -j"$jobs" >"$build/make.out" 2>&1 \
  || { grep -E "error|Error" "$build/make.out" | head -40; echo "run-tests: build failed" >&2; exit 1; }
# The test programs too (TESTS= builds them without running anything).
"${bear_[@]}" make -C "$build" -j"$jobs" check TESTS= >>"$build/make.out" 2>&1 \
  || { grep -E "error|Error" "$build/make.out" | head -40; echo "run-tests: build failed" >&2; exit 1; }

hogs=()
stop_hogs() {
  rm -f "$cpu_file"
  [ ${#hogs[@]} -eq 0 ] || { kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; }
  # The background static analysis, should the script end before it is waited for.
  [ -z "${lint_pid:-}" ] || kill -- -"$lint_pid" 2>/dev/null
  [ -z "${fuzz_build_pid:-}" ] || kill -- -"$fuzz_build_pid" 2>/dev/null
}
trap stop_hogs EXIT
if [ "${SK_CPU_HOGS:-0}" -gt 0 ] 2>/dev/null; then
  for _ in $(seq "$SK_CPU_HOGS"); do
    ( trap - EXIT; while :; do :; done ) &
    hogs+=($!)
  done
  say "running the tests with $SK_CPU_HOGS CPU hogs beside them (pids ${hogs[*]})"
fi

passed=0 failed=0 skips=0
if [ "${SK_ROBUSTNESS:-1}" = 1 ]; then
  # The static analysis needs only the compile database recorded above, and
  # takes the CPU the other layers leave while they wait (on Slurm, on the
  # API, on their processes, on timeouts): it runs beside all of them, at
  # the lowest priority (nice 19: it must not slow the builds and tests in
  # front, it took a core from the sanitizer build for 17 minutes), and is
  # counted at the end. It builds nothing (SK_LINT_DB_READY), so it never
  # runs make in the tree the tests use.
  say "static analysis (make lint) starts in the background, at nice 19"
  SK_LINT_BUILDDIR="$build" SK_LINT_DB_READY=1 setsid nice -n 19 make -C "$build" lint >"$build/lint.out" 2>&1 &
  lint_pid=$!  # setsid: its own process group, which the EXIT trap can stop whole
  # The fuzz layer's clang build, one compile at a time, beside the first
  # layers (make check, the integration, the soak and valgrind mostly wait:
  # half a core idle): the fuzz layer then only runs its targets. A build
  # that failed here fails again there, where it is reported.
  setsid nice -n 19 bash "$top/tests/fuzz/build-and-run.sh" --build-only --jobs 1 >"$build/fuzz-prebuild.out" 2>&1 &
  fuzz_build_pid=$!
  # setsid gives each a session, and so an autogroup, of its own where the
  # kernel shares CPU time by session (sched_autogroup_enabled): nice 19
  # then ranks them only among themselves, and lint's group still had half
  # the CPU beside the sanitizer build (seen: clang-tidy and cc1plus at 48 %
  # each). The autogroup's own nice is what counts; set once setsid has run
  # (the same file of a process still in this script's group would renice
  # this script's).
  own_ag=$(cut -d' ' -f1 "/proc/$$/autogroup" 2>/dev/null)
  if [ -n "$own_ag" ]; then
    for p in "$lint_pid" "$fuzz_build_pid"; do
      for _ in $(seq 50); do
        ag=$(cut -d' ' -f1 "/proc/$p/autogroup" 2>/dev/null) || break
        if [ "$ag" != "$own_ag" ]; then
          echo 19 2>/dev/null >"/proc/$p/autogroup"
          break
        fi
        sleep 0.1
      done
    done
  fi
fi
# True when `make TARGET` (exit status $1, output in file $2) stopped because
# its script exited 77, automake's "skipped": make itself then exits 2 and
# prints "Error 77".
skipped() {
  [ "$1" = 77 ] || { [ "$1" != 0 ] && grep -qE '\*\*\* .*Error 77$' "$2"; }
}
# keep_failures NAME FILE: each FAIL line of FILE with what follows it (a
# check's detail: a diff, a memcheck report) up to the next PASS/FAIL line,
# 60 lines at most each and 200 per layer, kept for the end of the run, where
# CI's excerpt of the output (its head and its tail) shows them.
keep_failures() {
  grep -qa "^FAIL" "$2" || return 0
  { echo "--- $1: the failed checks with their details"
    awk '/^(PASS|FAIL|SKIP)[: ]/ { infail = /^FAIL/; n = 0 }
         infail && n++ < 60' "$2" | head -200; } >>"$failures"
}
failures=$(mktemp /tmp/sk-run-tests-failures.XXXXXX)
count_line() {  # adds the counts of an "N passed, N failed" line
  local line=$1
  local p f
  p=$(sed -nE 's/.*\b([0-9]+) passed, ([0-9]+) failed.*/\1/p' <<<"$line")
  f=$(sed -nE 's/.*\b([0-9]+) passed, ([0-9]+) failed.*/\2/p' <<<"$line")
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
}

# `make check` runs once: in the distcheck's sanitizer build (step 6, the
# same tests with ASan + UBSan), as the e2e cases do; without that distcheck
# it runs here. The normal build's programs still run in the integration,
# soak and valgrind layers.
check_later=0
[ "${SK_DISTCHECK:-1}" = 1 ] && [ "${SK_SANITIZERS:-1}" = 1 ] && check_later=1
if [ "$check_later" = 0 ]; then
  say "make check (unit, test API server, component)"
  # The test programs run as an unprivileged user where they need to
  # (kubectl, the agent's socket tests); `make check` itself runs here.
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
fi

say "integration (real Slurm cluster)"
# The e2e cases run once, in the distcheck's sanitizer build (its agent and
# shim, this build's plugin: the same cases, any sanitizer report a failure);
# without that distcheck they run here (tests/integration/test_e2e.sh).
e2e_later=0
[ "${SK_DISTCHECK:-1}" = 1 ] && [ "${SK_SANITIZERS:-1}" = 1 ] && e2e_later=1
SK_E2E_IN_DISTCHECK=$e2e_later make -C "$build" check-integration 2>&1 | tee "$build/integration.out"
int_rc=${PIPESTATUS[0]}
if skipped "$int_rc" "$build/integration.out"; then
  # This script runs as root, where the layer must run: a skip is a failure.
  echo "integration: 0 passed, 1 failed (skipped: it needs root)"; failed=$((failed + 1))
else
  count_line "$(grep -E '^integration: [0-9]+ passed, [0-9]+ failed' "$build/integration.out" | tail -1)"
  keep_failures integration "$build/integration.out"
  [ "$int_rc" != 0 ] && ! grep -qE "[1-9][0-9]* failed" "$build/integration.out" && failed=$((failed + 1))
fi

# One robustness layer: `make TARGET` in the normal build, its own
# "N passed, N failed" line counted; exit 77 (a tool missing) is a skip.
layer() {
  local name=$1 target=$2 out="$build/$2.out" rc
  say "$name (make $target)"
  ${layer_nice:+nice -n "$layer_nice"} make -C "$build" "$target" >"$out" 2>&1
  rc=$?
  layer_report "$target" "$rc"
}
# layer_report TARGET RC: counts what `make TARGET` (output in $build/TARGET.out)
# reported, exit status RC.
layer_report() {
  local target=$1 rc=$2 out="$build/$1.out" line
  line=$(grep -aE "(^|: )[0-9]+ passed, [0-9]+ failed" "$out" | tail -1)
  if skipped "$rc" "$out"; then
    tail -5 "$out"; echo "$target: skipped (a tool is missing)"; skips=$((skips + 1)); return
  fi
  grep -aE "^(PASS|FAIL|SKIP)[: ]|^lint: " "$out" | tail -40
  keep_failures "$target" "$out"
  if [ -n "$line" ] && [ "$target" != lint ]; then
    echo "$target: $line"; count_line "$line"
    [ "$rc" != 0 ] && ! grep -qE "[1-9][0-9]* failed" <<<"$line" && failed=$((failed + 1))
  elif [ "$rc" = 0 ]; then
    echo "$target: 1 passed, 0 failed"; passed=$((passed + 1))
  else
    tail -60 "$out"; echo "$target: 0 passed, 1 failed"; failed=$((failed + 1))
  fi
}
# The layers that share nothing with the e2e (no Slurm, no test user, no
# fixed port, no marker of the cluster's: the soak's and valgrind's agents
# and shims take free ports and state dirs of their own): beside the distcheck's e2e when
# there is one, which mostly waits, at nice 10 there (the e2e's processes
# come first).
cpu_layers() {
  layer "soak: pod churn with broken watches" check-soak
  layer "agent and shim under valgrind memcheck" check-valgrind
  wait "$fuzz_build_pid"
  fuzz_build_pid=
  layer "fuzzing, every target for a bounded time" fuzz-short
  layer "source formatting (clang-format)" format-check
  layer "plugin-only build without the daemons' libraries" check-disable-daemons
  # The plugin built against and run by Slurm 24.11 (a Debian 13 tree of its
  # own: its own ports, munge and user); SK_NEWER_SLURM=0 skips it.
  if [ "${SK_NEWER_SLURM:-1}" = 1 ]; then
    say "the plugin with Slurm 24.11 (a Debian 13 tree, tests/slurm/newer-slurm.sh)"
    ${layer_nice:+nice -n "$layer_nice"} bash "$top/tests/slurm/newer-slurm.sh" >"$build/newer-slurm.out" 2>&1
    layer_report newer-slurm $?
  fi
}
beside_e2e=0
if [ "${SK_ROBUSTNESS:-1}" = 1 ]; then
  if [ "${SK_DISTCHECK:-1}" = 1 ] && [ "${SK_SANITIZERS:-1}" = 1 ]; then
    beside_e2e=1
  else
    cpu_layers
  fi
fi

if [ "${SK_DISTCHECK:-1}" = 1 ]; then
  dc_flags="--enable-werror"
  dc_vars=()
  if [ "${SK_SANITIZERS:-1}" = 1 ]; then
    # The only build with the sanitizers: make check and the e2e layer run
    # there (tests/build/local.mk, installcheck-local).
    dc_flags="--enable-sanitizers --enable-werror CXXFLAGS='${SK_SAN_CXXFLAGS:--O1 -g1}'"
    dc_vars=(SK_DISTCHECK_E2E="$build/sanitizers-e2e.out" SK_E2E_PLUGIN_BUILD="$build"
             SK_DISTCHECK_SUMMARY="$build/sanitizers-check.summary")
    rm -f "$build/sanitizers-e2e.out" "$build/sanitizers-check.summary"
    say "make distcheck: the tarball built with ASan + UBSan, its make check, the e2e on real Slurm with its agent and shim"
  else
    say "make distcheck"
  fi
  make -C "$build" -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS="$dc_flags" "${dc_vars[@]}" >"$build/distcheck.out" 2>&1 &
  dc_pid=$!
  if [ "$beside_e2e" = 1 ]; then
    # The e2e starts when installcheck-local prints its "  E2E " line
    # (tests/build/local.mk); a distcheck that ends before it ran leaves
    # the layers to run after it.
    while kill -0 "$dc_pid" 2>/dev/null && ! grep -q '^  E2E ' "$build/distcheck.out" 2>/dev/null; do
      sleep 1
    done
    say "beside the e2e: the layers that share nothing with it, at nice 10"
    layer_nice=10 cpu_layers
  fi
  wait "$dc_pid"
  dc_rc=$?
  if [ "$check_later" = 1 ]; then
    # The make check of the sanitizer build: its tests, each program's summary
    # line, its counts (none at all when the distcheck stopped before it).
    grep -E "^(PASS|FAIL|ERROR|XFAIL|XPASS|SKIP): " "$build/distcheck.out"
    sed 's/^/sanitizer build: /' "$build/sanitizers-check.summary" 2>/dev/null
    p=$(sed -nE 's/^# PASS: +([0-9]+)/\1/p' "$build/distcheck.out" | head -1)
    f=$(( $(sed -nE 's/^# FAIL: +([0-9]+)/\1/p' "$build/distcheck.out" | head -1) + $(sed -nE 's/^# ERROR: +([0-9]+)/\1/p' "$build/distcheck.out" | head -1) ))
    echo "make check (sanitizer build): ${p:-0} passed, ${f:-0} failed"
    count_line "${p:-0} passed, ${f:-0} failed"
  fi
  if [ "$dc_rc" = 0 ]; then
    grep -E "^# (PASS|FAIL|ERROR):|^dist-complete.sh: " "$build/distcheck.out" | sed 's/^/distcheck: /'
    echo "distcheck: 1 passed, 0 failed"; passed=$((passed + 1))
  else
    grep -E "^(FAIL|ERROR):|^dist-complete.sh: | error: " "$build/distcheck.out" | head -40
    # A failed distcheck keeps its tree: the tarball's test-suite.log is there.
    for l in "$build"/slurm-k8s-*/_build/sub/test-suite.log; do [ -f "$l" ] && tail -80 "$l"; done
    tail -30 "$build/distcheck.out"; echo "distcheck: 0 passed, 1 failed"; failed=$((failed + 1))
  fi
  if [ ${#dc_vars[@]} -gt 0 ]; then
    e2e_out="$build/sanitizers-e2e.out"
    grep -aE "^(FAIL|    [a-z_]+: |--- /tmp/sk-sanitizer)" "$e2e_out" 2>/dev/null
    [ -f "$e2e_out" ] && keep_failures "sanitizer e2e" "$e2e_out"
    for what in "e2e" "e2e reports"; do
      line=$(grep -aE "^sanitizers $what: [0-9]+ passed, [0-9]+ failed" "$e2e_out" 2>/dev/null | tail -1)
      echo "${line:-sanitizers $what: 0 passed, 1 failed (no summary: did distcheck reach installcheck? see $e2e_out)}"
      count_line "${line:-0 passed, 1 failed}"
    done
  fi
fi

if [ -n "${lint_pid:-}" ]; then
  say "static analysis (make lint, running since the build): waiting for it"
  wait "$lint_pid"
  rc=$?
  lint_pid=
  layer_report lint "$rc"
fi

# Slurm's cgroup/v2 (tests/vm): this host's hybrid layout cannot run it, so
# in a QEMU guest (TCG) with a pure unified hierarchy, this build's plugin
# loaded; alone, after everything else, since TCG keeps both CPUs busy.
# SK_CGROUP_V2=0 skips it.
if [ "${SK_CGROUP_V2:-1}" = 1 ]; then
  layer "cgroup v2: Slurm's cgroup/v2 in a QEMU guest (tests/vm)" check-cgroup-v2
  layer "cgroup v2: the e2e's pod_devices in the guest (agent, test API server, kubectl)" check-cgroup-v2-e2e
fi

if [ -s "$failures" ]; then
  echo
  echo "=== the failed checks again, with their details ==="
  cat "$failures"
fi
rm -f "$failures"
echo
echo "run-tests: the suite took $SECONDS s"
skip_note=""
[ "$skips" != 0 ] && skip_note=", $skips skipped (not passed)"
echo "total: $passed passed, $failed failed$skip_note"
[ "$failed" = 0 ]
