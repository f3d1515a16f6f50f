// The agent socket client over jsoncpp, for the admin CLI and the tests
// (common/agent_call.h has the contract; the plugin's is common/plugin_wire.h).
#pragma once

#include "common/agent_call.h"
#include "common/daemons/json.h"

namespace sk {

using AgentClient = BasicAgentClient<json::Api>;

}  // namespace sk
