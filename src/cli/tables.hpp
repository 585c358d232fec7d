// cli/tables — `loch ps` and `loch status` as text: pure functions of /loch/status's JSON, so that what
// the commands print is unit-tested without a server.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace loch::cli {

// One row per model, like `ollama ps`: NAME STATE DEVICE MEMORY (source) REQUESTS IDLE UNTIL. `all`
// false: only models with an engine (loading, ready, stopping) or a request waiting.
std::string ps_table(const nlohmann::json& status, bool all);

// Devices (the ledger per holder with sources), the queue with each waiter's reason, recent events.
std::string status_text(const nlohmann::json& status, std::size_t events = 10);

// "45 s", "12 min", "3.5 h"
std::string span_text(double seconds);

}  // namespace loch::cli
