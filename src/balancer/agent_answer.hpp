// balancer/agent_answer — what loch tells HAProxy's agent-check about one model on this box (issue 30,
// docs/several-boxes.md). HAProxy sends one line, loch answers one line; the words are HAProxy's own
// (configuration manual, "agent-check"): a weight in percent, `up`/`down`, `ready`/`drain`, `maxconn:N`,
// and a reason after `#` that its stats page shows.
//
// The line in: `<model> [resident] [key=<api key>]`.
//   - `<model>` alone: how well this box would serve it, as the issue asks — resident with a free slot
//     `up 100%`; resident but busy less, down to 1% as its queue fills; not resident: by the memory that
//     would be left once it is loaded (fits now 11–50%, after evicting idle models 1–10%, only later 1%);
//     `drain` when the model's queue is full; `down` when it can never fit here; unknown model `down`.
//   - `<model> resident`: the same for a box where it is resident (or loading), `drain` elsewhere. A
//     backend of these servers, with the plain ones as `backup` servers, keeps a model on the box that has
//     it: HAProxy spreads by weight, so with one tier a resident box at 100% still lets a box at 1% take
//     (and load) one request in a hundred; the backup tier is used only while no resident box can take it.
//   - `key=`: required when loch has api_keys (an agent reachable from other machines).
// Every answer that is not `drain`/`down` says `ready up` as well, which undoes an earlier `drain`/`down`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "broker/outlook.hpp"

namespace loch::balancer {

struct AgentQuestion {
    std::string model;
    bool resident_tier = false;
    std::optional<std::string> key;
};

// Parses the agent's line (without its newline); nullopt for an empty or unreadable one.
std::optional<AgentQuestion> parse_agent_question(std::string_view line);

// The answer line, newline included.
std::string agent_answer(const broker::Outlook& o, bool resident_tier);

}  // namespace loch::balancer
