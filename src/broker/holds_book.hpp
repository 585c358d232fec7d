// broker/holds_book — the holds' state, owned in one place: every live hold by id (waiting and granted), the
// most recent ended ones (their last answer), which queue id is which waiting hold, how long each job's last
// run held its hold, and released jobs whose processes may still hold their memory (draining). The broker's
// hold transitions (broker/holds.cpp: create, grant, end, the tick's measuring) change it through these calls
// only; everything else reads it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/holds.hpp"
#include "core/footprint.hpp"

namespace loch::broker {

// A hold (broker/holds.hpp): memory booked for work loch does not launch — a `loch run` job, or a program's
// declared hold. In the ledger under holder().
struct Hold {
    using time_point = std::chrono::steady_clock::time_point;
    std::string id;  // "hold-3": the API's name for it
    HoldSpec spec;
    std::uint64_t bytes = 0;  // asked for, raised to the measured use
    Source source = Source::configured;
    std::string size_why;              // where `bytes` came from
    std::vector<std::string> devices;  // where it may go, in preference order
    enum class State { waiting, granted, refused, released } state = State::waiting;
    std::string device;                             // granted: where it is booked
    time_point since{}, granted_at{}, heartbeat{};  // on the broker's clock
    std::string wait_reason;                        // waiting: why (admission's reason)
    std::optional<MemoryFigure> measured;           // its process group's last measured use
    std::uint64_t peak = 0;                         // the highest measured use
    nlohmann::json error;                           // refused: the error it got
    std::string end_reason;                         // released: why
    bool heartbeat_lost_noted = false;
    bool cancelled = false;  // released by `loch cancel`, not by its own client
    std::string holder() const { return "job:" + spec.name + "#" + id.substr(id.find('-') + 1); }
};

class HoldsBook {
  public:
    // A released job whose processes may still hold its memory: booked until the device shows none of them
    // (or `until` passed).
    struct Draining {
        std::string holder, device;
        std::vector<int> members;
        Hold::time_point until;
    };

    // A new hold with the next id ("hold-N"), not yet in the book.
    std::unique_ptr<Hold> make(Hold::time_point now);
    Hold& add(std::unique_ptr<Hold> h);
    // Forgets a live hold that never got anywhere (its creation failed).
    void discard(const std::string& id) { live_.erase(id); }
    Hold* find(const std::string& id);
    const Hold* find(const std::string& id) const;
    // A hold that ended recently (its last answer), newest kept.
    const Hold* find_ended(const std::string& id) const;
    const std::map<std::string, std::unique_ptr<Hold>>& live() const { return live_; }
    bool empty() const { return live_.empty(); }

    // Waiting holds by their queue id.
    void queue(std::uint64_t queue_id, Hold& h) { queued_[queue_id] = &h; }
    Hold* queued(std::uint64_t queue_id);
    void dequeue(std::uint64_t queue_id) { queued_.erase(queue_id); }
    // Takes `h` off its queue ids; returns them (the wait queue forgets them too).
    std::vector<std::uint64_t> dequeue_all(const Hold& h);
    const std::map<std::uint64_t, Hold*>& waiting() const { return queued_; }

    // The hold has ended: out of the live ones, kept among the recent ended ones.
    void retire(const Hold& h);

    // How long a job's last run held its hold (this loch's runs).
    void record_run(const std::string& job, double seconds) { run_s_[job] = seconds; }
    std::optional<double> last_run_s(const std::string& job) const;

    void drain(Draining d) { draining_.push_back(std::move(d)); }
    // Drops each draining job for which `done(d)` says so; whether any went.
    template <class F>
    bool drop_drained(F&& done) {
        return std::erase_if(draining_, std::forward<F>(done)) > 0;
    }

  private:
    static constexpr std::size_t kEndedKept = 64;
    std::map<std::string, std::unique_ptr<Hold>> live_;  // by id: waiting and granted ones
    std::deque<std::unique_ptr<Hold>> ended_;            // the most recent that ended
    std::map<std::uint64_t, Hold*> queued_;              // queue id → waiting hold
    std::uint64_t next_ = 1;
    std::map<std::string, double> run_s_;
    std::vector<Draining> draining_;
};

}  // namespace loch::broker
