// Fuzzes the line HAProxy's agent-check sends to loch's agent port (balancer/agent_answer.hpp) with
// arbitrary bytes, and the answer built from it with the same bytes as the broker's reason. Any outcome but a
// crash or a leak is fine, except an answer that is not exactly one line, or a question accepted without a
// model.
// fuzz-sources: balancer/agent_answer.cpp
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "balancer/agent_answer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view line(reinterpret_cast<const char*>(data), size);
    const auto q = loch::balancer::parse_agent_question(line);
    if (q && q->model.empty()) __builtin_trap();
    loch::broker::Outlook o;
    o.why = std::string(line);
    o.queue_limit = size % 7;
    o.queued = size % 5;
    o.slots = static_cast<std::uint32_t>(size % 3);
    for (int f = 0; f <= static_cast<int>(loch::broker::Outlook::Fit::never); ++f) {
        o.fit = static_cast<loch::broker::Outlook::Fit>(f);
        const auto a = loch::balancer::agent_answer(o, q && q->resident_tier);
        if (a.empty() || a.back() != '\n' || a.find('\n') != a.size() - 1 ||
            a.find('\r') != std::string::npos)
            __builtin_trap();
    }
    return 0;
}
