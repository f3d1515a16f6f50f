// The SPANK plugin's side of the agent socket, over json-c (common/jsonc.h
// says why): the same codec as the agent's (common/wire_codec.h) and the same
// client (common/agent_call.h).
#pragma once

#include "common/agent_call.h"
#include "common/jsonc.h"
#include "common/wire.h"
#include "common/wire_codec.h"

namespace sk {

using PluginCodec = proto::Codec<jsonc::Api>;
using PluginAgentClient = BasicAgentClient<jsonc::Api>;

}  // namespace sk
