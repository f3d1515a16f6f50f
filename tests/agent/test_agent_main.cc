// slurm-k8s-test-agent: the agent daemon (agent/daemon.h) with the in-memory
// runtime added as runtime = fake (tests/agent/fake_runtime.h). Built for the
// tests only (component, valgrind, benchmarks); never installed.
#include <memory>

#include "agent/daemon.h"
#include "uv/handles.h"
#include "tests/agent/fake_runtime.h"

int main(int argc, char **argv) {
    using namespace sk::agent;
    RuntimeFactories extra;
    extra["fake"] = [](uv_loop_t *loop, const Clock &clock) -> std::unique_ptr<PodRuntime> {
        return std::make_unique<FakeRuntime>(
            [loop](std::function<void()> fn) { sk::defer(loop, std::move(fn)); },
            [&clock] { return clock.now_s(); });
    };
    return agent_daemon_main(argc, argv, extra);
}
