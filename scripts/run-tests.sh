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
# Every layer's checks are records of one result protocol (tests/lib/report.sh:
# a TAP line per check, in $build/results/<n>-<layer>.tap; a `make check` layer
# from automake's own .trs results), and the counts come from there, never from
# what a layer prints: each layer's "LAYER: N passed, N failed" after it ran,
# at the end every layer's again, the failed checks and "total: N passed, N
# failed" (tests/lib/results.py summary).
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

# shellcheck source=../tests/lib/report.sh
source "$top/tests/lib/report.sh"
results="$build/results"
layer_no=0
# new_layer NAME: a new layer's result file, empty, in $layer_path (numbered
# in the order the layers start, the order of the summary).
new_layer() {
  layer_no=$((layer_no + 1))
  layer_path=$(printf '%s/%02d-%s.tap' "$results" "$layer_no" "$1")
  : >"$layer_path"
}
# layer_failed FILE: how many of a layer's records failed; layer_empty FILE:
# true when it has none.
layer_failed() { python3 "$top/tests/lib/results.py" count "$1" | cut -d' ' -f2; }
layer_empty() { [ "$(python3 "$top/tests/lib/results.py" count "$1")" = "0 0 0" ]; }
# layer_counts FILE: "NAME: N passed, N failed" of one layer's records.
layer_counts() {
  local p f s name
  read -r p f s < <(python3 "$top/tests/lib/results.py" count "$1")
  name=$(basename "$1" .tap); name=${name#*-}
  echo "$name: $p passed, $f failed${s:+$([ "$s" != 0 ] && echo ", $s skipped")}"
}

say "installing packages and the test user"
# cluster.sh install runs scripts/install-deps.sh and creates the unprivileged
# users the integration layer submits jobs as (k8suser; k8suser2 for another
# user's jobs on the same nodes).
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
rm -rf "$results"; mkdir -p "$results"
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
  # The QEMU layers' subshell and what it runs (make, vm.sh, QEMU), should
  # the script end before it is joined.
  [ -z "${vm_pid:-}" ] || kill_tree "$vm_pid"
}
# kill_tree PID: SIGTERM to PID's descendants, deepest first, then to PID.
kill_tree() {
  local c
  for c in $(pgrep -P "$1"); do kill_tree "$c"; done
  kill "$1" 2>/dev/null
}
trap stop_hogs EXIT
if [ "${SK_CPU_HOGS:-0}" -gt 0 ] 2>/dev/null; then
  for _ in $(seq "$SK_CPU_HOGS"); do
    ( trap - EXIT; while :; do :; done ) &
    hogs+=($!)
  done
  say "running the tests with $SK_CPU_HOGS CPU hogs beside them (pids ${hogs[*]})"
fi

if [ "${SK_ROBUSTNESS:-1}" = 1 ]; then
  # The static analysis needs only the compile database recorded above, and
  # takes the CPU the other layers leave while they wait (on Slurm, on the
  # API, on their processes, on timeouts): it runs beside all of them, at
  # the lowest priority (nice 19: it must not slow the builds and tests in
  # front, it took a core from the sanitizer build for 17 minutes), and is
  # counted at the end. It builds nothing (SK_LINT_DB_READY), so it never
  # runs make in the tree the tests use.
  say "static analysis (make lint) starts in the background, at nice 19"
  new_layer lint; lint_file=$layer_path
  SK_RESULT_FILE="$lint_file" SK_LINT_BUILDDIR="$build" SK_LINT_DB_READY=1 setsid nice -n 19 make -C "$build" lint >"$build/lint.out" 2>&1 &
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
# `make check` runs once: in the distcheck's sanitizer build (step 6, the
# same tests with ASan + UBSan), as the e2e cases do; without that distcheck
# it runs here. The normal build's programs still run in the integration,
# soak and valgrind layers.
check_later=0
[ "${SK_DISTCHECK:-1}" = 1 ] && [ "${SK_SANITIZERS:-1}" = 1 ] && check_later=1
if [ "$check_later" = 0 ]; then
  say "make check (unit, test API server, component)"
  # The test programs run as an unprivileged user where they need to
  # (kubectl, the agent's socket tests); `make check` itself runs here. Its
  # records are automake's results, a test program each (the scripts' own
  # records are not asked for: SK_RESULT_FILE unset).
  new_layer make-check; file=$layer_path
  env -u SK_RESULT_FILE make -C "$build" -j"$jobs" check >"$build/check.out" 2>&1
  check_rc=$?
  python3 "$top/tests/lib/results.py" from-trs "$build" >"$file"
  grep -E "^(PASS|FAIL|ERROR|XFAIL|XPASS|SKIP):" "$build/check.out"
  if [ "$check_rc" != 0 ] && [ "$(layer_failed "$file")" = 0 ]; then
    [ -f "$build/test-suite.log" ] && cat "$build/test-suite.log"
    SK_RESULT_FILE="$file" report_record fail "make check exited $check_rc without a failed test"
  fi
  layer_counts "$file"
fi

say "integration (real Slurm cluster)"
# The e2e cases run once, in the distcheck's sanitizer build (its agent and
# shim, this build's plugin: the same cases, any sanitizer report a failure);
# without that distcheck they run here (tests/integration/test_e2e.sh).
e2e_later=0
[ "${SK_DISTCHECK:-1}" = 1 ] && [ "${SK_SANITIZERS:-1}" = 1 ] && e2e_later=1
# As root the layer must run: a skip (exit 77) is a failure here.
new_layer integration; file=$layer_path
SK_RESULT_FILE="$file" report_run "integration" \
  env SK_E2E_IN_DISTCHECK=$e2e_later make -C "$build" check-integration 2>&1 | tee "$build/integration.out"
if [ "${PIPESTATUS[0]}" = 77 ]; then
  SK_RESULT_FILE="$file" report_record fail "integration: skipped, but this script runs as root, where it must run"
fi
keep_failures integration "$build/integration.out"
layer_counts "$file"

# One robustness layer: `make TARGET` in the normal build, its checks the
# records it writes (report_run: exit 77 with none, a tool missing, is a
# skip; a failure without a failed check is one).
layer() {
  new_layer "$2"
  layer_in "$1" "$2" "$layer_path"
}
# layer_in NAME TARGET FILE: the same, its records in FILE (made beforehand).
layer_in() {
  local name=$1 target=$2 file=$3 out="$build/$2.out"
  say "$name (make $target)"
  SK_RESULT_FILE="$file" report_run "make $target" \
    ${layer_nice:+nice -n "$layer_nice"} make -C "$build" "$target" >"$out" 2>&1
  layer_report "$target" "$file"
}
# layer_report TARGET FILE: what people read of it (its check lines, the
# failures' details kept for the end) and its counts from FILE.
layer_report() {
  local target=$1 file=$2 out="$build/$1.out"
  grep -aE "^(PASS|FAIL|SKIP)[: ]|^lint: " "$out" | tail -40
  keep_failures "$target" "$out"
  if [ "$(layer_failed "$file")" != 0 ]; then
    tail -30 "$out"
  fi
  layer_counts "$file"
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
    new_layer newer-slurm; file=$layer_path
    SK_RESULT_FILE="$file" report_run newer-slurm \
      ${layer_nice:+nice -n "$layer_nice"} bash "$top/tests/slurm/newer-slurm.sh" >"$build/newer-slurm.out" 2>&1
    layer_report newer-slurm "$file"
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
    new_layer make-check-sanitizers; dc_check_file=$layer_path
    new_layer e2e-sanitizers; dc_e2e_file=$layer_path
    dc_vars=(SK_DISTCHECK_E2E="$build/sanitizers-e2e.out" SK_E2E_PLUGIN_BUILD="$build"
             SK_DISTCHECK_SUMMARY="$dc_check_file" SK_DISTCHECK_E2E_RESULT="$dc_e2e_file")
    rm -f "$build/sanitizers-e2e.out"
    say "make distcheck: the tarball built with ASan + UBSan, its make check, the e2e on real Slurm with its agent and shim"
  else
    say "make distcheck"
  fi
  new_layer distcheck; dc_file=$layer_path
  # Its exit status also in a file: `wait` answered 127 for it once (bash no
  # longer knew the child, the distcheck having passed), so the file decides.
  rm -f "$build/distcheck.rc"
  (
    trap - EXIT
    env -u SK_RESULT_FILE make -C "$build" -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS="$dc_flags" "${dc_vars[@]}" >"$build/distcheck.out" 2>&1
    echo "$?" >"$build/distcheck.rc"
  ) &
  dc_pid=$!
  if [ "$beside_e2e" = 1 ] && [ "${SK_CGROUP_V2:-1}" = 1 ]; then
    # The QEMU layers (below) start when the distcheck ends, beside what is
    # left of the layers that run beside its e2e (valgrind's tail, fuzzing,
    # the formatting, the plugin-only and Slurm 24.11 builds, at nice 10):
    # one after the other they took 560 s at the end of the suite, the
    # guest's TCG leaving a core idle part of the time. Their records go to
    # files made here (the summary's order), what they print to a file shown
    # when they are joined.
    new_layer check-cgroup-v2; vm_file1=$layer_path
    new_layer check-cgroup-v2-e2e; vm_file2=$layer_path
    vm_log="$build/vm-layers.log"
    (
      trap - EXIT
      cpu_file=$(mktemp)  # say's, its own
      # The distcheck's end: its process gone or a zombie (this script
      # reaps it only later).
      while st=$(sed 's/.*) //' "/proc/$dc_pid/stat" 2>/dev/null) && [ "${st:0:1}" != Z ]; do sleep 2; done
      layer_in "cgroup v2: Slurm's cgroup/v2 in a QEMU guest (tests/vm)" check-cgroup-v2 "$vm_file1"
      layer_in "cgroup v2: the e2e's pod_devices in the guest (agent, test API server, kubectl)" check-cgroup-v2-e2e "$vm_file2"
      rm -f "$cpu_file"
    ) >"$vm_log" 2>&1 &
    vm_pid=$!
  fi
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
  [ -s "$build/distcheck.rc" ] && dc_rc=$(cat "$build/distcheck.rc")
  if [ "$check_later" = 1 ]; then
    # The make check of the sanitizer build: its tests (automake's results,
    # written by installcheck-local before distcheck removed the build).
    grep -E "^(PASS|FAIL|ERROR|XFAIL|XPASS|SKIP): " "$build/distcheck.out"
    # A make check that failed stopped distcheck before installcheck: its
    # results are read from the tree distcheck keeps then.
    if [ ! -s "$dc_check_file" ]; then
      for d in "$build"/slurm-k8s-*/_build/sub; do
        [ -d "$d" ] && python3 "$top/tests/lib/results.py" from-trs "$d" >>"$dc_check_file"
      done
    fi
    layer_counts "$dc_check_file"
  fi
  if [ "$dc_rc" = 0 ]; then
    grep -E "^# (PASS|FAIL|ERROR):|^dist-complete.sh: " "$build/distcheck.out" | sed 's/^/distcheck: /'
    SK_RESULT_FILE="$dc_file" report_record pass "distcheck: the tarball holds every tracked file, builds, checks, installs and uninstalls"
  else
    grep -E "^(FAIL|ERROR):|^dist-complete.sh: | error: " "$build/distcheck.out" | head -40
    # A failed distcheck keeps its tree: the tarball's test-suite.log is there.
    # Its failed checks first (a test's log is longer than the tail shown).
    for l in "$build"/slurm-k8s-*/_build/sub/test-suite.log; do
      [ -f "$l" ] || continue
      grep -aE -A4 "^not ok" "$l" | head -60
      tail -80 "$l"
    done
    tail -30 "$build/distcheck.out"
    SK_RESULT_FILE="$dc_file" report_record fail "distcheck exited $dc_rc (see $build/distcheck.out)"
  fi
  layer_counts "$dc_file"
  if [ ${#dc_vars[@]} -gt 0 ]; then
    e2e_out="$build/sanitizers-e2e.out"
    grep -aE "^(FAIL|    [a-z_]+: |--- /tmp/sk-sanitizer)" "$e2e_out" 2>/dev/null
    [ -f "$e2e_out" ] && keep_failures "sanitizer e2e" "$e2e_out"
    if layer_empty "$dc_e2e_file"; then
      SK_RESULT_FILE="$dc_e2e_file" report_record fail "the sanitizer e2e did not run (did distcheck reach installcheck? see $e2e_out)"
    fi
    layer_counts "$dc_e2e_file"
  fi
fi

if [ -n "${lint_pid:-}" ]; then
  say "static analysis (make lint, running since the build): waiting for it"
  wait "$lint_pid"
  rc=$?
  lint_pid=
  if layer_empty "$lint_file"; then
    if [ "$rc" = 77 ]; then
      SK_RESULT_FILE="$lint_file" report_record skip "lint: a tool is missing"
    else
      SK_RESULT_FILE="$lint_file" report_record fail "lint exited $rc without its verdicts"
    fi
  fi
  layer_report lint "$lint_file"
fi

# Slurm's cgroup/v2 (tests/vm): this host's hybrid layout cannot run it, so
# in a QEMU guest (TCG) with a pure unified hierarchy, this build's plugin
# loaded: since the distcheck's end beside the last robustness layers (above),
# else alone, after everything else. SK_CGROUP_V2=0 skips it.
if [ -n "${vm_pid:-}" ]; then
  say "cgroup v2: the QEMU layers, running since the distcheck ended: waiting for them"
  wait "$vm_pid"
  vm_pid=
  cat "$vm_log"
elif [ "${SK_CGROUP_V2:-1}" = 1 ]; then
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
echo "=== every layer's checks (tests/lib/results.py summary $results) ==="
python3 "$top/tests/lib/results.py" summary "$results"
