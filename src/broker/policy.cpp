// broker/policy — loch's scheduling policy and the anchors' (policy.hpp says what each means).
#include "broker/policy.hpp"

namespace loch::broker {
namespace {

class Loch final : public SchedulingPolicy {
  public:
    std::string_view name() const override { return "loch"; }
    bool has_priorities() const override { return true; }
    bool takes_turns() const override { return true; }
    bool reads_ahead() const override { return true; }
    bool one_model_at_a_time() const override { return false; }
};

// llama-swap's default.
class FifoLock final : public SchedulingPolicy {
  public:
    std::string_view name() const override { return "fifo-lock"; }
    bool has_priorities() const override { return false; }
    bool takes_turns() const override { return false; }
    bool reads_ahead() const override { return false; }
    bool one_model_at_a_time() const override { return true; }
};

// Ollama's.
class KeepaliveLru final : public SchedulingPolicy {
  public:
    std::string_view name() const override { return "keepalive-lru"; }
    bool has_priorities() const override { return false; }
    bool takes_turns() const override { return false; }
    bool reads_ahead() const override { return false; }
    bool one_model_at_a_time() const override { return false; }
};

}  // namespace

std::shared_ptr<const SchedulingPolicy> loch_policy() {
    return std::make_shared<Loch>();
}

std::shared_ptr<const SchedulingPolicy> policy_named(std::string_view name) {
    if (name == "loch") return loch_policy();
    if (name == "fifo-lock") return std::make_shared<FifoLock>();
    if (name == "keepalive-lru") return std::make_shared<KeepaliveLru>();
    return nullptr;
}

}  // namespace loch::broker
