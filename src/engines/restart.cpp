#include "engines/restart.hpp"

#include <algorithm>

namespace loch::engines {

CrashTracker::CrashTracker(std::string model_name, config::RestartConfig policy)
    : model_(std::move(model_name)), policy_(policy) {}

bool CrashTracker::counts_as_crash(const ExitReport& r) {
    return r.kind != ExitKind::stopped && r.kind != ExitKind::port_in_use;
}

void CrashTracker::prune(Clock::time_point now) {
    while (!failures_.empty() && now - failures_.front() >= policy_.window) failures_.pop_front();
}

bool CrashTracker::record(Clock::time_point now, const ExitReport& r) {
    if (!counts_as_crash(r)) return false;
    prune(now);
    failures_.push_back(now);
    last_ = r;
    if (failures_.size() >= policy_.max_crashes) quarantined_until_ = now + policy_.quarantine;
    return true;
}

std::size_t CrashTracker::failures_in_window(Clock::time_point now) const {
    return static_cast<std::size_t>(
        std::count_if(failures_.begin(), failures_.end(), [&](auto t) { return now - t < policy_.window; }));
}

CrashTracker::Verdict CrashTracker::check(Clock::time_point now) {
    Verdict v;
    if (quarantined_until_) {
        if (now < *quarantined_until_) {
            v.quarantined = true;
            v.retry_in = *quarantined_until_ - now;
            const auto secs = [](auto d) {
                return std::to_string(std::chrono::ceil<std::chrono::seconds>(d).count());
            };
            v.message = "model '" + model_ + "' is quarantined: its engine failed " +
                        std::to_string(failures_.size()) + " times within " + secs(policy_.window) +
                        " s (last: " + (last_ ? last_->summary : "?") + "); retry in " + secs(v.retry_in) +
                        " s, or fix the cause and restart loch";
            return v;
        }
        // Quarantine served: a clean slate.
        quarantined_until_.reset();
        failures_.clear();
    }
    prune(now);
    if (failures_.empty()) return v;
    auto delay = policy_.backoff_initial;
    for (std::size_t i = 1; i < failures_.size() && delay < policy_.backoff_max; ++i) delay *= 2;
    delay = std::min(delay, policy_.backoff_max);
    const auto ready_at = failures_.back() + delay;
    if (ready_at > now) v.wait = ready_at - now;
    return v;
}

void CrashTracker::clear() {
    failures_.clear();
    last_.reset();
    quarantined_until_.reset();
}

}  // namespace loch::engines
