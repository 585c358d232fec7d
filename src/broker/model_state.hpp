// broker/model_state — internal to the broker: what it keeps per model and per waiting request, one
// definition for every file of the Broker class (broker.cpp, lifecycle.cpp, admission.cpp, holds.cpp, …:
// each includes it). Nothing outside src/broker includes it.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "broker/broker.hpp"
#include "broker/engine_state.hpp"

namespace loch::broker {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Broker::Model {
    explicit Model(const config::ModelConfig& c, const config::RestartConfig& rc)
        : cfg(&c), kind(&engines::kind_of(c)), crashes(c.name, rc) {}
    const config::ModelConfig* cfg;
    const engines::Kind* kind;
    ModelState state = ModelState::stopped;
    std::shared_ptr<engines::EngineRun> engine;       // loading / ready / stopping
    std::shared_ptr<engines::EngineRun> last_engine;  // the run that ended, for its log tail
    std::string device;                               // where it runs (a split: its main device)
    engines::Placement where;  // this run's placement: a split's other devices and shares too
    std::uint32_t active = 0;
    std::uint32_t active_interactive = 0;  // of `active`: interactive requests (batch ones yield to them)
    Clock::time_point last_used{};         // set when it is made (Broker::now())
    // When its last interactive requests were granted (at most kRecentUses, none older than
    // kRecentUseWindow): how much people use it now, against the model they ask for next (admission's
    // rule 2a).
    std::deque<Clock::time_point> people_uses;
    static constexpr std::size_t kRecentUses = 256;
    static constexpr auto kRecentUseWindow = std::chrono::minutes(5);
    void note_person_use(Clock::time_point now) {
        if (people_uses.size() == kRecentUses) people_uses.pop_front();
        people_uses.push_back(now);
    }
    std::uint32_t recent_people_uses(Clock::time_point now) const {
        const auto from = std::lower_bound(people_uses.begin(), people_uses.end(), now - kRecentUseWindow);
        return static_cast<std::uint32_t>(people_uses.end() - from);
    }
    std::optional<double> load_s;
    engines::ReadyFacts facts;  // this run's, from the kind's after_ready
    // Mutable: asking it whether a quarantine holds prunes old failures, also from the read-only views.
    mutable engines::CrashTracker crashes;
    std::optional<engines::ExitReport> last_exit;
    // Why the last launch could not even start (no program, an unsafe environment): the request whose
    // arrival triggered it gets this at once rather than waiting for the next attempt.
    std::optional<Error> start_error;
    // The last cold start's timeline (issue 33: loch's part of a cold start ≤ 5 ms): when the request that
    // found the model stopped arrived, had the devices read, had a footprint, was admitted (launch), when
    // the engine answered its health check, when the kind had read its facts, and when the request was
    // granted. `last_cold_start` is its milliseconds, shown in /loch/status.
    struct ColdStart {
        bool open = false;
        Clock::time_point arrived, devices_read, planned, launched, engine_ready, facts_read;
        std::chrono::milliseconds engine_took{0};  // the engine's own: spawn → its first healthy answer
    } cold;
    nlohmann::json last_cold_start;
    // This run took its room from batch work (its start stopped a batch engine): idle, it counts as batch
    // work itself in admission, so the batch it displaced gets the room back (docs/broker.md).
    bool borrowed_from_batch = false;
    // Ready since its load (or wake) and no request granted on it yet: where its requests are short against
    // the waiting person's reload, what it was started for goes first — its waiters do not yield it for room,
    // and it is not idle to admission while one waits (yielding.cpp). Else a batch model loaded beside a
    // person's evicted one was evicted back for them before its first item: every load undone unserved, the
    // batch starved (issue 54's image burst on the H100: 1 image in 60 s).
    bool unserved_load = false;
    // Its files in the page cache (broker/file_cache.hpp): the last measured residency, and a read-ahead
    // in flight or finished at.
    std::optional<FilesResidency> files;
    bool reading_ahead = false;
    Clock::time_point read_ahead_at{};
    std::optional<Footprint> footprint;
    bool planning = false;
    // Requests that arrive while it is planned wait on this timer (never expiring): the planner cancels it
    // when the footprint is there, so they go on at once, before the start the first one triggers can end.
    std::shared_ptr<boost::asio::steady_timer> planned;
    std::optional<MemoryFigure> measured;
    // Highest use seen per device over every run (engine log, per-process probe): the next admission
    // reserves at least this. Raised too when a load dies of out-of-memory.
    std::map<std::string, MemoryFigure> peak;
    // The memory cgroup's oom_kill counter when this run was launched (engines::KillEvidence).
    std::optional<std::uint64_t> oom_kills_at_launch;
    std::uint32_t oom_retries = 0;    // start-up OOMs answered by raising the figure and trying once more
    double avg_request_s = 5.0;       // the mean request duration (the first one measured replaces the prior)
    std::uint64_t requests_done = 0;  // how many were measured: 0 = no ETA from it
    std::string stop_reason;
    Clock::time_point stop_started{};  // admission waits for a stopping engine's memory this long at most
    std::uint32_t sleep_level = 0;     // while asleep: the level it sleeps at
    std::uint64_t runs = 0;
    Clock::time_point load_started{};
    std::string wait_reason;        // why a request for it waits now (queue status, queue_timeout)
    bool waits_for_room = false;    // its last request tried waits for memory busy engines hold (turns.cpp)
    bool unload_when_idle = false;  // `loch unload` while requests run: stop when the last one ends
    std::string idle_stop_reason;   // why, when it was not `loch unload` (a reload)
    // A request's keep_alive (Ollama's field) replaces the configured one until the next request sets it;
    // nullopt inside = forever.
    std::optional<std::optional<std::chrono::seconds>> keep_alive_override;
    // Cumulative, for /metrics: counters never go down.
    std::map<std::string, std::uint64_t> exits;  // by exit class
    std::uint64_t loads_ok = 0, loads_failed = 0, evictions = 0;
    double load_seconds_total = 0;
    std::map<std::string, std::uint64_t> transients;          // its requests' own memory, by ledger holder
    std::map<std::string, std::uint64_t> transient_retained;  // what the engine keeps of each (RequestCost)
    std::uint64_t retained = 0;  // this run: the largest a request left behind, added to its reservation
    std::uint64_t transient_bytes() const {
        std::uint64_t n = 0;
        for (const auto& [h, b] : transients) n += b;
        return n;
    }

    // After a reload: the entry it restarts with once its engine has stopped (nullptr: none pending), and
    // whether the current config still names it.
    const config::ModelConfig* next_cfg = nullptr;
    bool retired = false;

    std::optional<std::chrono::seconds> keep_alive() const {
        return keep_alive_override ? *keep_alive_override : cfg->keep_alive;
    }

    const std::string& name() const { return cfg->name; }
    // What its file says: read with the config (off the loop); read here, once per entry, only for entries
    // whose files the loader did not check (built by hand in tests).
    const nlohmann::json& file() const {
        if (cfg->file_facts) return *cfg->file_facts;
        if (file_of != cfg) file_facts = kind->describe_file(*cfg), file_of = cfg;
        return file_facts;
    }
    mutable const config::ModelConfig* file_of = nullptr;
    mutable nlohmann::json file_facts;
    std::uint32_t slots() const { return std::max<std::uint32_t>(1, kind->slots(*cfg)); }
};

struct Broker::Waiter {
    Waiter(std::uint64_t i, Model* m, const asio::any_io_executor& s, core::Clock& clock)
        : id(i), model(m), timer(s, clock), since(clock.now()) {}
    std::uint64_t id;
    Model* model;
    core::Timer timer;  // max_wait
    Clock::time_point since;
    bool granted = false;
    std::optional<Error> error;
    std::string decision;   // what admission said when it queued ("loading on cpu …", "waiting for …")
    RequestNeeds needs;     // its own memory, if any (the pump books it when it grants); its priority
    std::string transient;  // the ledger holder booked for it at grant
};

template <class F>
void Broker::each_device(const Model& m, F&& f) {
    // Its placement's others only when the placement is this run's (begin_load set both; a model never
    // started, or moved by other means, has just its device).
    f(m.device);
    if (m.where.device == m.device)
        for (const auto& o : m.where.others) f(o.device);
}

}  // namespace loch::broker
