// The exec helper that confines a container's processes. libuv's uv_spawn
// has no hook between fork and exec, so spawn_process (k8s-shim/spawn.h)
// starts the shim's own binary as
//   slurm-k8s-shim --exec-confined [MOUNT FLAGS] [--no-new-privs]
//                  [--drop-capabilities] [--seccomp-default] -- PROGRAM ARGS...
// which makes the mounts, then applies what the flags say in this order (capabilities first: the
// bounding set can be dropped only while CAP_SETPCAP is held), then execvp()s
// PROGRAM with the environment and working directory it was given. What each
// flag does, and why the RuntimeDefault filter denies what it denies:
// docs/kubernetes-guide.md, "Pod fields on Slurm nodes".
#pragma once

namespace sk::shim {

constexpr const char kExecConfined[] = "--exec-confined";
constexpr const char kNoNewPrivsFlag[] = "--no-new-privs";
constexpr const char kDropCapsFlag[] = "--drop-capabilities";
constexpr const char kSeccompDefaultFlag[] = "--seccomp-default";
// Volumes at their mountPaths (k8s-shim/mount_ns.h), done before the flags
// above (the filter denies mounts): --bind SRC DST and --bind-ro SRC DST,
// any number, with --scratch DIR; or --join-mounts SUPERVISOR_PID. Then
// --chdir DIR (the working directory, which may be a mountPath: the helper
// itself starts in "/").
constexpr const char kBindFlag[] = "--bind";
constexpr const char kBindReadOnlyFlag[] = "--bind-ro";
constexpr const char kScratchFlag[] = "--scratch";
constexpr const char kJoinMountsFlag[] = "--join-mounts";
constexpr const char kChdirFlag[] = "--chdir";
// The start report's descriptor (k8s-shim/supervise.h, kSuperviseStartedEnv).
constexpr const char kStartedFdFlag[] = "--started-fd";
// --netns NET --utsns UTS: the pod's own network and UTS namespaces (the
// paths the agent holds them at, k8s-shim/sandbox.h), joined before
// anything else, with the user namespace that owns them (the job's user
// owns it: joining needs no privilege of the node).
constexpr const char kNetnsFlag[] = "--netns";
constexpr const char kUtsnsFlag[] = "--utsns";
// --hide PATH (any number, with --scratch): a device node left out of the
// container's view (the node's GPUs that are not its own).
constexpr const char kHideFlag[] = "--hide";

// argv[1] is kExecConfined. Returns only when the confinement or the exec
// failed, after a line "cannot start 'PROGRAM': why" on stderr (the
// container's log): the exit code then, 128 as for a start failure
// (k8s-shim/container.cc).
int exec_confined_main(int argc, char **argv);

}  // namespace sk::shim
