// The supervisor of one container: `slurm-k8s-shim --supervise`, the
// container's command in the environment variables SK_SUPERVISE_ARGV_<i>.
// The shim runs every container's command under one (spawn_container in
// k8s-shim/spawn.h), as a job-user process of its own session whose pid the
// shim records as the container's. Why (docs/architecture.md, "Containers'
// processes"): without a cgroup or PID namespace of its own, a process
// that daemonizes (setsid, double fork) leaves the container's process group
// and the shim's sight; the supervisor is a child subreaper
// (PR_SET_CHILD_SUBREAPER), so every orphan of the container is reparented
// to it and stays its descendant, whatever session or group it moved to.
//
// Contract:
// - It forks the command (same process group, signals unblocked, default
//   dispositions) and execs it through PATH of the container's environment,
//   SK_SUPERVISE_ARGV_<i> removed. The command is not on the supervisor's own
//   command line, so it shows once in ps or pgrep -f: as the main process.
//   When the exec fails it writes "cannot start 'ARGV0': REASON" to stderr
//   and exits 128.
// - The container ends when the command (its main process) exits: the
//   supervisor then kills every descendant left (sweep_descendants) and
//   exits as the main did: its exit code, or the same signal (no core).
// - supervisor_kill_signal(), sent to the supervisor's pid, kills every
//   process of the container now (the main included); the shim sends it when
//   a grace period is over, and a restarted shim or the agent to the
//   supervisors a dead shim recorded (common/daemons/supervisor.h). Every other
//   signal the supervisor receives (the shim signals the group: the main got
//   it too) is consumed and ignored.
// - Its process name is kSupervisorComm (common/daemons/supervisor.h): how the
//   restarted shim and the agent tell a supervisor from another process.
// - It writes nothing else to the container's stdout/stderr, and opens no
//   descriptor of its own but its reads of /proc and the exec-error pipe
//   (close-on-exec).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/daemons/supervisor.h"

namespace sk::shim {

// The command, encoded (encode_supervise_argv) and cut into parts of at most
// kSuperviseArgvPart bytes, in SK_SUPERVISE_ARGV_0, _1, ... (how many in
// SK_SUPERVISE_ARGV_PARTS, so that a pod's own variable of such a name is
// never read as a part; all are removed before the exec): the kernel takes
// no environment string over MAX_ARG_STRLEN (128 KiB), so one variable would
// bound a command there, where a command line is bounded by ARG_MAX (its
// words and the environment together, a quarter of the stack limit), as on
// any node.
constexpr const char kSuperviseArgvEnv[] = "SK_SUPERVISE_ARGV_";
constexpr const char kSuperviseArgvPartsEnv[] = "SK_SUPERVISE_ARGV_PARTS";
constexpr size_t kSuperviseArgvPart = size_t{96} * 1024;
// The environment entries (name, value) that carry `argv` to the supervisor.
std::vector<std::pair<std::string, std::string>> supervise_argv_env(
    const std::vector<std::string> &argv);
// Set (to "1") for a command on a terminal (an exec session with a TTY,
// k8s-shim/exec_session.h): stdin is a pseudo-terminal's slave end, which the
// supervisor, leader of its new session, makes its controlling terminal
// (TIOCSCTTY) before it forks the command, so that the command's process
// group is the terminal's foreground group (^C reaches it). Removed from the
// environment too.
constexpr const char kSuperviseTerminalEnv[] = "SK_SUPERVISE_TERMINAL";
// The nice value the command runs at (decimal, -20..19; removed from the
// environment too): the job's own, while the shim and the supervisor stay
// ahead of it (k8s-shim/spawn.h set_workload_nice). The command's is only
// ever raised (no privilege lowers it): a value below the supervisor's own
// leaves the command at the supervisor's.
constexpr const char kSuperviseNiceEnv[] = "SK_SUPERVISE_NICE";
// When set ("<agent socket>\n<pod uid>\n<the pod's GPUs, comma-separated>\n
// <container name>", removed from the environment too): before it forks the
// command, the supervisor asks the agent on a connection of its own to move
// it into its container's cgroup below the pod's (op cgroup_enter,
// common/cgroup/pod_cgroup.h), so the command and
// all it starts run there (an unavailable agent, restarting or with its
// connections for this user all taken, is asked again with back-off); a
// refusal or no answer within 15 s ends it with
// "cannot start 'ARGV0': not placed in its pod's cgroup: REASON" on stderr and
// status 128, as a failed exec does. The shim sets it when the agent said
// at attach that pods get cgroups of their own.
constexpr const char kSuperviseCgroupEnv[] = "SK_SUPERVISE_CGROUP";
// When set ("3", or "3:pass" when the command is the exec helper, removed from
// the environment too): descriptor 3 is the start report the shim reads: the
// supervisor writes "F" there when the command does not start (the cgroup,
// the fork or the exec failed) and the descriptor closes at the command's
// exec, so the shim marks the container running only once its command runs
// (a kubelet posts Started only then). With ":pass" the exec helper gets the
// descriptor (--started-fd) and reports its own failures the same way.
constexpr const char kSuperviseStartedEnv[] = "SK_SUPERVISE_STARTED";
constexpr int kSuperviseStartedFd = 3;

// A command as the value of SK_SUPERVISE_ARGV: each word as
// "<decimal length>:<bytes>" (a word holds any byte but NUL).
std::string encode_supervise_argv(const std::vector<std::string> &argv);
// Its inverse; false on a malformed value or an empty command.
bool decode_supervise_argv(std::string_view text, std::vector<std::string> *argv);

// SIGRTMAX - 1 (common/daemons/supervisor.h: the agent, which does not link the shim,
// sends it too, to the supervisors of a dead shim).
using sk::supervisor_kill_signal;

// The live (not zombie) descendants of the calling process, from one scan
// of /proc. One that moved to another session or group is found too: its
// parent chain leads here (orphans are reparented to a subreaper).
std::vector<pid_t> live_descendants();

// Kills every descendant of the calling process that it may signal, and
// reaps its children, until none is left. Each pass sends SIGSTOP to the
// descendants not yet stopped (a stopped or signalled process cannot fork:
// fork fails with a signal pending); once a pass finds none new, all get
// SIGKILL. So a fork bomb cannot outrun it: every process it stopped stays
// until the SIGKILL, and a job's process limit (RLIMIT_NPROC) bounds how
// many there can be. Descendants it may not signal (a setuid program) are
// skipped. The status of `main_pid` when reaped here goes to *main_status
// and *main_reaped is set.
void sweep_descendants(pid_t main_pid, int *main_status, bool *main_reaped);

// The supervisor's main: argv is the container's command (null-terminated,
// at least one word); `terminal` as kSuperviseTerminalEnv says, `nice` as
// kSuperviseNiceEnv (nullptr: the supervisor's). Returns the exit code, or
// does not return (the main's signal re-raised).
// started_fd >= 0: the start report (kSuperviseStartedEnv): "F" written there
// when the command cannot be started, the descriptor closed at its exec
// (started_pass: left open across the exec of the exec helper, which
// reports itself).
int supervise_main(char **argv, bool terminal = false, const int *nice = nullptr,
                   int started_fd = -1, bool started_pass = false);
// `slurm-k8s-shim --supervise`: supervise_main of SK_SUPERVISE_ARGV, which
// it removes from the environment (and kSuperviseTerminalEnv); 128 when it
// is missing or malformed.
int supervise_env_main();

}  // namespace sk::shim
