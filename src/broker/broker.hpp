// broker/broker — the single owner of loch's serving state: which engines run where, the memory ledger, the
// wait queue, per-device load serialization and GPU locks. The HTTP layer awaits the broker's decisions
// (acquire → Lease) and never touches its state.
//
// Threads: none of its own, and no locks. Everything — callers included — runs on the one thread of the
// io_context it is given (loch serve runs one); calls are plain coroutine calls, not posts, since acquire()
// is on the path of every request.
//
// A request for a model: ready with a free slot → a Lease at once; not running → admission (start / evict
// idle engines then start / refuse with numbers / wait); otherwise it waits in a bounded queue per priority
// class until a slot or memory frees, or max_wait passes (503 + Retry-After). docs/broker.md has the rules.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "broker/admission.hpp"
#include "broker/broker_view.hpp"
#include "broker/control_desk.hpp"
#include "broker/conversations.hpp"
#include "broker/device_book.hpp"
#include "broker/device_source.hpp"
#include "broker/error.hpp"
#include "broker/eta.hpp"
#include "broker/events.hpp"
#include "broker/file_cache.hpp"
#include "broker/footprint.hpp"
#include "broker/history.hpp"
#include "broker/hold_desk.hpp"
#include "broker/holds.hpp"
#include "broker/holds_book.hpp"
#include "broker/lease.hpp"
#include "broker/ledger.hpp"
#include "broker/outlook.hpp"
#include "broker/policy.hpp"
#include "broker/remembered.hpp"
#include "broker/tick_decision.hpp"
#include "broker/wait_queue.hpp"
#include "config/config.hpp"
#include "core/clock.hpp"
#include "devices/sysroot.hpp"
#include "engines/engine_client.hpp"
#include "engines/kind.hpp"
#include "engines/restart.hpp"
#include "engines/run.hpp"

namespace loch::broker {

using engines::EngineAddress;

class Broker;

// The size of the allocation an out-of-memory line names ("allocating 163840.00 MiB … failed"), if any.
std::optional<std::uint64_t> failed_allocation_bytes(const std::string& line);

// What one request asks of its model, checked before anything is started for it.
struct RequestNeeds {
    std::string route;                        // the API path; empty = not checked
    std::optional<std::uint64_t> max_tokens;  // tokens it may generate
    // Replaces the model's keep_alive from now on (Ollama's per-request keep_alive); nullopt inside =
    // forever, zero = stop as soon as it is idle.
    std::optional<std::optional<std::chrono::seconds>> keep_alive;
    // Its own memory beside the engine's reservation (an image's compute), held from grant until the lease
    // ends (Broker::request_cost asks the model's kind).
    std::optional<engines::RequestCost> transient;
    // The request's id (X-Request-Id): shown with it in the queue, and how cancel_waiting finds it.
    std::string request_id;
    // Lower than its model's (X-Loch-Priority: batch — a Batch API item): a request may lower its priority,
    // never raise it. A batch request yields: see Broker::yields_to_interactive.
    std::optional<config::Priority> priority;
};

struct BrokerOptions {
    std::shared_ptr<const SchedulingPolicy> policy;  // null: loch's own (broker/policy.hpp)
    std::chrono::milliseconds tick{1000};            // probe refresh, keep-alive eviction, backoff expiry
    // The tick while nothing happens (no request for 10 ticks, nothing loading, running, held or waiting):
    // it still wakes for the next keep-alive expiry, so only the devices' readings age — and a request for a
    // model that is not ready re-reads them first.
    std::chrono::milliseconds idle_tick{30000};
    std::chrono::seconds aging{30};      // batch waiters compete as interactive after this
    std::chrono::seconds free_wait{10};  // after a stop: how long to wait for the memory to show as free
    std::uint32_t cpu_cores = 0;         // the CPU's cores for engines' threads; 0 = the CPUs loch may use
    // A request that has waited this long for room that busy engines of equal or lower priority hold gets
    // its turn: they take no new request until it has run (broker/turns.cpp).
    std::chrono::milliseconds memory_turn_after{10000};
    // Where time comes from (null: the steady clock). Unit tests pass a core::ManualClock and advance it.
    core::Clock* clock = nullptr;
    // Where the broker's blocking file work (read-ahead, residency) runs (none: a worker thread of its own).
    // Unit tests pass their loop's executor, to run every step themselves.
    std::optional<boost::asio::any_io_executor> blocking_work;
};

// The CPUs this process may run on: its affinity mask, bounded by its cgroup's CPU quota; at least 1. Reads
// /proc and /sys: at start, not on the loop.
std::uint32_t cpus_loch_may_use(const devices::Sysroot& root = devices::Sysroot("/"));

class Broker {
  public:
    Broker(boost::asio::any_io_executor ex, const config::Config& cfg, std::unique_ptr<DeviceSource> devices,
           std::unique_ptr<FootprintSource> footprints, std::unique_ptr<engines::Launcher> launcher,
           BrokerOptions options = {});
    ~Broker();

    void start();  // first device probe and the tick loop

    // What the HTTP layer hears of: `interactive_arrival` (posted, on the loop) when an interactive request
    // queues or is granted while batch requests hold slots — the runner preempts at once rather than at its
    // next pass; `engine_stopping` on the loop right before an engine is told to stop (SIGTERM) — the proxy
    // closes its idle keep-alive connections to it, which would hold llama-server's exit by ~0.1 s.
    struct Listeners {
        std::function<void()> interactive_arrival;
        std::function<void(const engines::EngineAddress&)> engine_stopping;
    };
    Listeners& listeners() { return listeners_; }  // each client sets its own

    // Throws broker::Error: model_not_found, context_length_exceeded (max_tokens can never fit the slot
    // context: refused before any engine starts), insufficient_memory, queue_full, queue_timeout,
    // quarantined, engine_failed, shutting_down.
    boost::asio::awaitable<Lease> acquire(std::string model, RequestNeeds needs = {});
    // The ready-now path without a coroutine frame: a Lease when the model is ready with a free slot, else
    // nullopt (acquire() then queues it). Throws what acquire() throws for the request itself.
    std::optional<Lease> try_acquire(const std::string& model, const RequestNeeds& needs);
    // SIGHUP: serve `next` from now on. New models are added; removed ones are stopped (once idle) and no
    // longer found; a model whose launch changed (engine, file, args, memory, concurrency) restarts with the
    // new one once its running requests end, one that did not keeps running under its new settings
    // (priority, keep_alive, aliases, devices …). Device reserve and budget apply at once. Returns what
    // changed: {added, removed, restarting, updated, unchanged}.
    boost::asio::awaitable<nlohmann::json> reload(config::Config next);
    // Stops every engine and fails every waiter; the broker accepts nothing afterwards.
    boost::asio::awaitable<void> shutdown();

    // Its facets, for the clients that need only one:
    // what it knows (views and a request's questions, broker/broker_view.hpp),
    BrokerView& view() { return view_; }
    // memory for work it does not launch (broker/hold_desk.hpp),
    HoldDesk& holds() { return hold_desk_; }
    // and conversations that survive an eviction (broker/conversations.hpp): the proxy restores a saved
    // slot for a request that continues one, and confirms it with the first answer.
    Conversations& conversations() { return conversations_; }
    // and the engines' direct controls: load, unload, cancel a queued request, kill
    // (broker/control_desk.hpp).
    ControlDesk& control() { return control_desk_; }

  private:
    friend class Lease;
    friend class BrokerView;
    friend class HoldDesk;
    friend class ControlDesk;

    // What the facets forward (facets.cpp; each is documented on its facet). The facets' other calls are
    // their own (they read the broker's members as its friends).
    boost::asio::awaitable<nlohmann::json> models();
    boost::asio::awaitable<nlohmann::json> status();
    boost::asio::awaitable<nlohmann::json> history();
    boost::asio::awaitable<nlohmann::json> plan(std::string model);
    boost::asio::awaitable<nlohmann::json> create_hold(HoldSpec spec);
    std::optional<nlohmann::json> hold(const std::string& id, bool heartbeat = true);
    std::optional<nlohmann::json> update_hold(const std::string& id, std::optional<int> pgid);
    std::optional<nlohmann::json> release_hold(const std::string& id, const std::string& why);
    std::optional<nlohmann::json> cancel_hold(const std::string& id);
    nlohmann::json holds_json() const;
    boost::asio::awaitable<nlohmann::json> preload(std::string model);
    boost::asio::awaitable<nlohmann::json> unload(std::string model);
    std::size_t cancel_waiting(const std::string& request_id, const Error& why);
    std::size_t kill_engines_now();

    struct Model;
    struct Waiter;
    enum class Serve { granted, wait };

    boost::asio::awaitable<Lease> do_acquire(std::string model, RequestNeeds needs);
    void check_needs(const Model& m, const RequestNeeds& needs) const;
    // Grant a slot now (and book the request's own memory under `*holder`), or start what it needs (load,
    // evictions) and wait: broker/serve_decision.hpp decides, serve.cpp carries it out.
    // `aged`: a batch waiter past `aging` no longer yields to interactive work (it would starve).
    Serve try_serve(Model& m, const RequestNeeds& needs, std::string* holder, bool aged = false);
    class ServeAnswers;    // what the decision asks of the broker (serve.cpp)
    struct ServeExecutor;  // the one executor of its effects (serve.cpp)
    // A request that can never run where its model runs or would run, refused on arrival (before it waits
    // or an engine starts): a tensor above the device's largest allocation (Vulkan), or, for a cold model,
    // compute that does not fit beside the weights it would book.
    void check_runnable(Model& m, const RequestNeeds& needs);
    void refuse_if_never_fits(Model& m, const std::string& device, const MemoryFigure& engine,
                              const engines::RequestCost& t);
    // The refusal when the engine's `engine` and the request's own memory together exceed what `device` can
    // ever give, with what would fit; nullopt when they fit.
    std::optional<Error> never_fits_error(const Model& m, const std::string& device,
                                          const MemoryFigure& engine, const engines::RequestCost& t) const;
    std::string device_for_request(const Model& m) const;
    void close_cold_start(Model& m, std::chrono::steady_clock::time_point granted);
    Lease make_lease(Model& m, config::Priority priority, std::string decision,
                     std::chrono::steady_clock::duration waited, std::string transient_holder = {});
    void release(const std::string& model, std::chrono::steady_clock::duration held,
                 const std::string& transient, bool interactive);
    config::Priority priority_of(const Model& m, const RequestNeeds& needs) const;
    // Whether an interactive request runs or waits (for a slot, memory, a load) on a device `m` runs on or
    // would start on, or an interactive job waits for one: what, for a wait reason ("'chat' runs an
    // interactive request on cpu").
    std::optional<std::string> interactive_wants(const Model& m) const;
    void note_interactive_arrival();  // tells on_interactive_arrival's callback when batch work runs
    Listeners listeners_;
    std::uint32_t batch_active_ = 0;  // batch requests holding slots, over all models
    // Set while interactive_wants asks admission whether a person finds room without a batch engine: the
    // views that admission builds meanwhile ask interactive_wants again, which then does not probe.
    mutable bool yield_probe_ = false;
    struct YieldProbe {
        explicit YieldProbe(bool& flag) : flag_(flag) { flag_ = true; }
        ~YieldProbe() { flag_ = false; }
        YieldProbe(const YieldProbe&) = delete;
        YieldProbe& operator=(const YieldProbe&) = delete;
        bool& flag_;
    };
    void pump();
    void fail_waiters(const Model& m, const Error& e);

    // Holds (holds.cpp): admission for one, booking it, the views, and what the tick does for them.
    Serve try_grant(Hold& h);
    void book(Hold& h, const std::string& device);
    // Releases it (refused when `error` is given): off the ledger and the queue, kept for its last answer.
    void end_hold(Hold& h, std::string why, nlohmann::json error = nullptr);
    nlohmann::json hold_json(const Hold& h) const;
    std::size_t queue_position(std::uint64_t queue_id) const;
    void observe_holds(const std::vector<DeviceSnapshot>& snap);
    void expire_holds();
    std::optional<FootprintKey> job_key(const std::string& name, const std::string& device) const;
    // ETAs (waiting.cpp, arithmetic in eta.hpp): for a request queued for `m` behind `ahead` others of it,
    // for a hold, and when each holder on `device` is expected to give its memory back.
    Eta eta_for_request(const Model& m, std::size_t ahead) const;
    Eta eta_for_hold(const Hold& h) const;
    std::vector<HolderEnd> holder_ends(const std::string& device) const;
    // Every holder of memory as admission sees it (engines, running requests' own memory, holds), except
    // the one being decided for.
    std::vector<EngineView> holder_views(const Model* except_model, const Hold* except_hold) const;

    std::vector<std::string> allowed_devices(const Model& m) const;
    // At start: each model's configured limits that no allowed device can ever run (the kind says which and
    // the largest value that fits), logged as warnings and kept in the recent events.
    void warn_limits_that_never_fit();
    // The refusal for a model no device's engine build reaches (a GPU with only CPU builds); nullopt when
    // some device can run it.
    std::optional<Error> no_build_reaches(const Model& m) const;
    // How the engines' runtimes number a device: from the probe, else placement_without_probe().
    engines::Placement placement_of(const std::string& device) const;
    // `priority`: the request's, when lower than the model's (a batch item evicts only batch engines).
    AdmissionInput admission_input(const Model& m, std::optional<config::Priority> priority = {},
                                   bool aged = false) const;
    bool exclusive_ok(const Model& m) const;
    // CPU threads (cpu_threads.cpp): an idle CPU engine waits while others compute with threads that, with
    // its own, exceed the cores (for a person's request: others computing for people) — why, or nullopt.
    std::optional<std::uint32_t> cpu_threads_of(const Model& m) const;
    std::optional<std::string> cpu_threads_wait(const Model& m, config::Priority priority) const;
    // Why a ready engine with a free slot takes no new request now (turns.cpp): the CPU's cores are taken,
    // or another model's request of equal or higher priority waits for its turn on what this one holds.
    std::optional<std::string> turn_wait(const Model& m, config::Priority priority) const;
    // A request for `m` has waited memory_turn_after for room: the others' queued requests wait for it.
    bool has_memory_turn(const Model& m) const;
    std::chrono::steady_clock::time_point oldest_wait(
        const Model& m) const;  // its oldest waiting request's arrival (max: none)
    nlohmann::json cpu_threads_view() const;
    // A model that takes its devices alone (its config, or a policy of one model at a time); whether an
    // earlier waiter holds the queue, and every other engine stopped before `m` starts (one model at a time).
    bool exclusive(const Model& m) const;
    bool head_of_line_blocked() const;
    bool one_model_at_a_time(Model& m);
    void begin_load(Model& m, const std::string& device);
    // A start on every device of `where` at once, each with its part of the reservation (a split).
    void begin_load(Model& m, const engines::Placement& where, const std::vector<Need>& parts);
    // Split candidates for admission: over the 2, 3, … allowed GPUs with the most free memory, in shares
    // of their free memory — only when none of `needs` (the model's on each single device) has room now
    // (planning them costs).
    std::vector<SplitNeed> split_candidates(const Model& m, const std::vector<Need>& needs) const;
    // Every device the model's current run holds (its main device first).
    std::vector<std::string> devices_of(const Model& m) const;
    // The same, visited without allocating (the request path asks it).
    template <class F>
    static void each_device(const Model& m, F&& f);
    boost::asio::awaitable<void> load(Model& m, std::shared_ptr<engines::EngineRun> engine);
    // The page cache (read_ahead.cpp; broker/file_cache.hpp): the files a launch names, read ahead for a
    // start that waits, and their residency measured on the tick.
    std::vector<std::filesystem::path> files_of(const Model& m, const std::string& device) const;
    void read_ahead_for(Model& m, const std::string& device, std::string_view why);
    void measure_files();
    nlohmann::json page_cache_view() const;
    // keep_conversations: the engine first saves its slots (broker/saved_slots.hpp) — an eviction, an idle
    // or requested stop; not a shutdown, a reload or a move, nor after a failure.
    void begin_stop(Model& m, std::string why, bool keep_conversations = false);
    // Evicted: asleep where its kind can sleep (its device memory mostly freed, its weights maybe in host
    // RAM:
    // `<model>#asleep` in the CPU's ledger), else stopped.
    void begin_evict(Model& m, std::string why);
    void begin_wake(Model& m);  // asleep → ready, its full reservation booked again first
    // Stops each victim that admission chose for `for_model`, counting and logging the eviction.
    void evict(const std::vector<std::string>& victims, const std::string& for_whom, const std::string& why);
    void on_exit(Model& m, const std::shared_ptr<engines::EngineRun>& engine, const engines::ExitReport& r);
    void learn_from_kill(Model& m, const engines::ExitReport& r);
    boost::asio::awaitable<void> ensure_footprint(Model& m);  // planned once per entry; others wait for it
    boost::asio::awaitable<void> plan_footprint(Model& m);
    boost::asio::awaitable<void> tick_loop();
    void refresh_devices();
    void observe_engines(const std::vector<DeviceSnapshot>& snap);
    // Why a SIGKILL loch did not send ended `m`'s engine: the memory cgroup's oom_kill counter since its
    // launch, the limit, and about what it used (its last measured use, or the limit less what the cgroup
    // still holds once it is gone) against its reservation. nullopt when the cgroup cannot say.
    std::optional<engines::KillEvidence> kill_evidence(const Model& m);
    // What a process group uses on `device`: the probe's per-process figures on a GPU, RSS on the CPU
    // (summed: shared pages count more than once, never under); nullopt when none of its processes is
    // reported.
    std::optional<MemoryFigure> group_use(const std::vector<int>& members, const std::string& device,
                                          const std::vector<DeviceSnapshot>& snap,
                                          std::string_view whose) const;
    // The programs behind each device's outside use, named in the ledger (refusals, reasons, status).
    void name_other_processes(const std::vector<DeviceSnapshot>& snap);
    std::int64_t created_of(const config::ModelConfig& mc) const;
    // The runtime guard: a measured use above the reservation becomes the reservation at once, with an event
    // that has both numbers; a device then over its capacity admits nothing and evicts idle holders.
    void guard_measured(Model& m, const std::string& device, const MemoryFigure& seen);
    // `grown`: the holder whose growth put the device over (never evicted for it).
    void relieve_overcommit(const std::string& device, const std::string& grown);
    void keep_retained(Model& m, const std::string& transient_holder);
    void note_peak(Model& m, const MemoryFigure& f);
    // The planned need raised to the highest use measured on earlier runs (the reservation rule's third
    // candidate).
    Need need_on(const Model& m, const Need& planned) const;
    // What the model's footprint on `device` is remembered under (its launch there at port 0); nullopt
    // when it cannot be launched (no program).
    std::optional<FootprintKey> footprint_key(const Model& m, const std::string& device) const;
    // Stops the engines whose keep_alive ran out (broker/tick_decision.hpp decides).
    void evict_expired();
    std::vector<IdleFacts> idle_facts() const;  // every engine, as the keep-alive rule sees it
    int retry_after_s(const Model& m) const;
    // A quarantined model's refusal: the verdict's message, the last exit, Retry-After when it lifts.
    Error quarantine_error(const Model& m, const engines::CrashTracker::Verdict& v) const;
    Model* find(const std::string& name_or_alias);
    nlohmann::json model_status(const Model& m) const;
    Outlook outlook_of(const Model& m) const;  // outlook() without starting an estimate
    bool fits_one_device_now(const Model& m) const;
    // One line in the log and one entry in the recent events /loch/status shows.
    void note(std::string_view kind, const Model& m, std::string message, nlohmann::json extra = {},
              bool warn = false);
    // The same for any subject: {"model": …} or {"hold": …, "job": …} is merged into the event.
    void note_event(std::string_view kind, nlohmann::json subject, std::string message, nlohmann::json extra,
                    bool warn);
    void note_quarantine(Model& m);  // after a failure was recorded: the event when it starts a quarantine
    // The ledger's holders per device and the queue's length into history_ (a point only where they changed):
    // after every event and on the tick.
    void sample_history();
    // The model has stopped: a config entry waiting for that (reload) takes effect now.
    void apply_pending_config(Model& m);

    boost::asio::any_io_executor ex_;
    // Every config loch has served (the first, then each reload): models, leases and coroutines in flight
    // keep pointers into the one they started with, so none is ever freed while loch runs (a few KiB each).
    std::vector<std::shared_ptr<const config::Config>> configs_;
    const config::Config* cfg_;  // the current one: configs_.back()
    std::unique_ptr<DeviceSource> devices_;
    std::unique_ptr<FootprintSource> footprints_;
    std::unique_ptr<engines::Launcher> launcher_;
    BrokerOptions options_;
    core::Clock& clock_;                              // options_.clock, or the steady clock
    std::shared_ptr<const SchedulingPolicy> policy_;  // options_.policy, or loch's
    core::Clock::time_point now() const { return clock_.now(); }
    Ledger ledger_;
    WaitQueue queue_;
    std::map<std::string, std::unique_ptr<Model>> models_;  // by model name
    std::map<std::uint64_t, std::shared_ptr<Waiter>> waiters_;
    HoldsBook holds_;  // holds: live, ended, queued, draining (broker/holds_book.hpp)
    DeviceBook
        devices_book_;  // placements, drivers, loads in flight, exclusive locks (broker/device_book.hpp)
    RememberedFootprints remembered_;  // <state_dir>/footprints.json
    FileCache file_cache_;             // models' files: read-ahead, residency
    std::uint32_t cpu_cores_ = 1;      // options_.cpu_cores, or the CPUs loch may use
    std::chrono::steady_clock::time_point files_measured_at_{};
    bool measuring_files_ = false;
    RecentEvents events_;          // what happened: log lines and the recent ones status shows
    History history_;              // the last hour of memory by holder, the queue, evictions (dashboard)
    Conversations conversations_;  // saved slots and restores (after events_ and clock_: it notes and times)
    BrokerView view_{*this};
    HoldDesk hold_desk_{*this};
    ControlDesk control_desk_{*this};
    std::chrono::system_clock::time_point started_at_ = std::chrono::system_clock::now();
    std::uint64_t next_waiter_ = 1;
    std::uint64_t next_transient_ = 1;
    bool shutting_down_ = false;
    std::shared_ptr<bool> alive_;  // tells detached coroutines the broker is gone
    std::unique_ptr<core::Timer> tick_timer_;
    // The tick runs at BrokerOptions::idle_tick while nothing happens (issue 55: an idle loch costs
    // ~nothing), waking earlier for the next keep-alive expiry. A request for a model that is not ready
    // re-reads the devices first when the last reading is older than one tick, so admission never decides on
    // a stale one.
    std::chrono::steady_clock::time_point last_refresh_{}, last_request_{};
    std::chrono::steady_clock::time_point cpu_scan_at_{};  // the last scan for the largest CPU programs
    bool busy(std::chrono::steady_clock::time_point now) const;
    void note_request();  // a request or a hold arrived: busy from now, the idle tick cut short
    std::chrono::steady_clock::duration tick_period() const;
};

}  // namespace loch::broker
