// broker/policy — loch's scheduling policy and the anchors' (policy.hpp says what each means). Each answers
// the broker's four questions the same way every time: a table.
#include "broker/policy.hpp"

namespace loch::broker {
namespace {

struct Answers {
    std::string_view name;
    bool has_priorities, takes_turns, reads_ahead, one_model_at_a_time;
};

class FixedPolicy final : public SchedulingPolicy {
  public:
    explicit FixedPolicy(Answers a) : a_(a) {}
    std::string_view name() const override { return a_.name; }
    bool has_priorities() const override { return a_.has_priorities; }
    bool takes_turns() const override { return a_.takes_turns; }
    bool reads_ahead() const override { return a_.reads_ahead; }
    bool one_model_at_a_time() const override { return a_.one_model_at_a_time; }

  private:
    Answers a_;
};

constexpr Answers kPolicies[] = {
    // name, priorities, turns, read-ahead, one model at a time
    {"loch", true, true, true, false},
    {"fifo-lock", false, false, false, true},       // llama-swap's default
    {"keepalive-lru", false, false, false, false},  // Ollama's
};

}  // namespace

std::shared_ptr<const SchedulingPolicy> loch_policy() {
    return policy_named("loch");
}

std::shared_ptr<const SchedulingPolicy> policy_named(std::string_view name) {
    for (const auto& a : kPolicies)
        if (a.name == name) return std::make_shared<FixedPolicy>(a);
    return nullptr;
}

}  // namespace loch::broker
