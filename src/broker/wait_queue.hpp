// broker/wait_queue — the order in which waiting requests are served, bounded per priority class.
//
// Interactive requests go first; a batch request that has waited `aging` is promoted to the interactive class
// and then competes first-come-first-served, so batch work never starves behind a steady interactive stream.
// Pure: the broker owns the timers, this only keeps order and bounds.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace loch::broker {

using config::Priority;
int rank(Priority p);  // higher = more important (for admission's "equal or lower priority")

class WaitQueue {
  public:
    using Clock = std::chrono::steady_clock;

    WaitQueue(std::size_t interactive_capacity, std::size_t batch_capacity, Clock::duration aging)
        : interactive_capacity_(interactive_capacity), batch_capacity_(batch_capacity), aging_(aging) {}

    // False when that class is full: the caller answers 503 + Retry-After.
    bool push(std::uint64_t id, Priority p, Clock::time_point now);
    bool remove(std::uint64_t id);
    bool contains(std::uint64_t id) const;

    // Service order now: effective class (batch promoted after `aging`), then arrival.
    std::vector<std::uint64_t> order(Clock::time_point now) const;

    std::size_t size() const { return entries_.size(); }
    std::size_t size(Priority p) const;
    std::size_t capacity(Priority p) const {
        return p == Priority::interactive ? interactive_capacity_ : batch_capacity_;
    }
    Clock::duration aging() const { return aging_; }

  private:
    struct Entry {
        std::uint64_t id;
        Priority priority;
        Clock::time_point since;
        std::uint64_t seq;  // tie-break for equal timestamps
    };
    std::size_t interactive_capacity_, batch_capacity_;
    Clock::duration aging_;
    std::uint64_t next_seq_ = 0;
    std::vector<Entry> entries_;
};

}  // namespace loch::broker
