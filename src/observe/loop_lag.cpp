// LoopLag: a periodic timer whose lateness is the event loop's lag.
#include "observe/loop_lag.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

namespace loch::observe {

LoopLag::LoopLag(boost::asio::any_io_executor ex, std::function<std::string()> describe,
                 std::function<void(double)> on_sample, Options options, std::function<bool()> busy)
    : timer_(std::move(ex)),
      describe_(std::move(describe)),
      on_sample_(std::move(on_sample)),
      busy_(std::move(busy)),
      options_(options) {}

void LoopLag::start() {
    if (running_) return;
    running_ = true;
    timer_.expires_after(options_.period);
    arm();
}

void LoopLag::stop() {
    running_ = false;
    timer_.cancel();
}

void LoopLag::wake_up() {
    if (!running_) return;
    const auto soon = std::chrono::steady_clock::now() + options_.period;
    if (timer_.expiry() <= soon) return;  // already on the short period
    timer_.expires_at(soon);              // (the pending wait ends as aborted and does not sample)
    arm();
}

void LoopLag::arm() {
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || !running_) return;
        const auto now = std::chrono::steady_clock::now();
        sample(now - timer_.expiry());
        // From now, not from the missed expiry: a long block is one sample, not a burst of catch-up wakes.
        timer_.expires_at(now + (!busy_ || busy_() ? options_.period : options_.idle_period));
        arm();
    });
}

void LoopLag::sample(std::chrono::steady_clock::duration late) {
    const double s = std::max(0.0, std::chrono::duration<double>(late).count());
    last_s_ = s;
    max_s_ = std::max(max_s_, s);
    ++samples_;
    if (on_sample_) on_sample_(s);
    if (late > options_.warn_over) {
        ++warnings_;
        spdlog::warn("event loop: {:.0f} ms late (every request waited as long); running: {}", s * 1000,
                     describe_ ? describe_() : std::string("(unknown)"));
    }
}

nlohmann::json LoopLag::json() const {
    return {{"lag_s", last_s_},
            {"max_lag_s", max_s_},
            {"samples", samples_},
            {"late_wakes", warnings_},
            {"warn_over_s", std::chrono::duration<double>(options_.warn_over).count()},
            {"period_s", std::chrono::duration<double>(options_.period).count()}};
}

}  // namespace loch::observe
