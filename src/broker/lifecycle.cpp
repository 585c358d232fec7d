// broker/lifecycle — an engine's life under the broker: begin_load (book, spawn), load (wait for ready,
// read what it says it took, handle out-of-memory at load), stop, evict, wake, exit (classify, quarantine,
// fail or retry the waiters), preload/unload and shutdown. Member functions of Broker (broker.hpp); the only
// file that changes a ModelState — the transitions are tabled in docs/broker.md ("A model's states").
#include "broker/broker.hpp"
#include "broker/model_state.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <regex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/time_text.hpp"
#include "engines/process.hpp"

namespace loch::broker {

using namespace std::chrono_literals;

// "allocating 163840.00 MiB on device 0: cudaMalloc failed" → bytes; nullopt without a size in MiB/GiB.
std::optional<std::uint64_t> failed_allocation_bytes(const std::string& line) {
    static const std::regex re(R"(([0-9]+(?:\.[0-9]+)?) ?(MiB|GiB|MB|GB))");
    std::smatch mt;
    if (!std::regex_search(line, mt, re)) return std::nullopt;
    const double v = std::stod(mt[1].str());
    const double unit = mt[2] == "GiB"  ? double(kGiB)
                        : mt[2] == "GB" ? 1e9
                        : mt[2] == "MB" ? 1e6
                                        : double(kMiB);
    return static_cast<std::uint64_t>(v * unit);
}

// ---------------------------------------------------------------------------------------------------------
// Engines: load, stop, exit

void Broker::begin_load(Model& m, const std::string& device) {
    Need need;
    need.device = device;
    need.source = m.footprint->source;
    need.why = m.footprint->detail;
    for (const auto& n : m.footprint->needs)
        if (n.device == device) need = need_on(m, n);
    std::vector<Need> parts = {need};
    // What it keeps in the host's RAM beside the device, under the same holder (released with it).
    if (auto host = host_part(need, ledger_)) parts.push_back(std::move(*host));
    begin_load(m, placement_of(device), parts);
}

void Broker::begin_load(Model& m, const engines::Placement& where, const std::vector<Need>& parts) {
    std::uint64_t total = 0;
    for (const auto& n : parts) {
        ledger_.reserve(n.device, m.name(), MemoryFigure{n.bytes, n.source, n.why});
        if (n.device == where.device || where.split())
            devices_book_.begin_loading(n.device);  // not a host part
        total += n.bytes;
    }
    m.state = ModelState::loading;
    m.device = where.device;
    m.where = where;
    m.facts = {};
    m.measured.reset();
    m.retained = 0;
    m.read_ahead_at = {};  // its engine reads the files now: the next wait may read them ahead again
    const auto devices = devices_of(m);
    std::shared_ptr<engines::EngineRun> engine;
    std::optional<std::vector<std::string>> slot_launch;
    try {
        auto spec = engines::make_engine_spec(*cfg_, *m.cfg, where);
        slot_launch = conversations_.with_slot_files(m.name(), *m.kind, *cfg_, *m.cfg, where, spec);
        for (const auto& on : where.all())  // refused before anything starts (engines/spec.hpp says why)
            if (auto why = engines::unsafe_environment(
                    on, spec, engines::inherited_env_value("GGML_CUDA_ENABLE_UNIFIED_MEMORY")))
                throw std::runtime_error(*why);
        engine = launcher_->launch(ex_, std::move(spec));
    } catch (const std::exception& e) {
        for (const auto& d : devices) devices_book_.end_loading(d);
        ledger_.release(m.name());
        m.state = ModelState::stopped;
        m.start_error =
            Error(ErrorKind::engine_failed,
                  fmt::format("model '{}' cannot be started: {}", m.name(), e.what()), {{"model", m.name()}});
        fail_waiters(m, *m.start_error);
        return;
    }
    m.load_started = now();
    if (m.cold.open) m.cold.launched = m.load_started;
    const auto cgroup = devices_->memory_cgroup();
    m.oom_kills_at_launch = cgroup ? cgroup->oom_kills : std::nullopt;
    std::vector<std::string> reserved;
    for (const auto& n : parts)
        reserved.push_back(n.why.empty()
                               ? fmt::format("{} on {}", human_bytes(n.bytes), n.device)
                               : fmt::format("{} on {} ({})", human_bytes(n.bytes), n.device, n.why));
    nlohmann::json extra = {
        {"device", where.device},
        {"reserved_bytes", total},
        {"source", to_string(parts.empty() ? m.footprint->source : parts.front().source)}};
    if (where.split()) extra["devices"] = devices;
    note("load_start", m,
         fmt::format("starting on {} (port {}), reserving {}", fmt::join(devices, " + "), engine->port(),
                     fmt::join(reserved, "; ")),
         std::move(extra));
    m.engine = engine;
    ++m.runs;
    auto alive = alive_;
    std::weak_ptr<engines::EngineRun> weak = engine;
    engine->on_exit([this, alive, &m, weak](const engines::ExitReport& r) {
        if (!*alive) return;
        if (auto e = weak.lock()) on_exit(m, e, r);
    });
    engine->on_outside_kill([this, alive, &m]() -> std::optional<engines::KillEvidence> {
        if (!*alive) return std::nullopt;
        return kill_evidence(m);
    });
    if (slot_launch)
        asio::co_spawn(ex_, conversations_.prepare(m.name(), engine, std::move(*slot_launch)),
                       asio::detached);
    asio::co_spawn(ex_, load(m, engine), asio::detached);
}

asio::awaitable<void> Broker::load(Model& m, std::shared_ptr<engines::EngineRun> engine) {
    auto alive = alive_;
    const auto res = co_await engine->start();
    if (!*alive) co_return;
    if (m.cold.open) {
        m.cold.engine_ready = now();
        m.cold.engine_took = std::chrono::duration_cast<std::chrono::milliseconds>(res.took);
    }
    for (const auto& d : devices_of(m)) devices_book_.end_loading(d);
    if (m.engine != engine) co_return;  // superseded (shut down meanwhile)
    if (!res.ready) {
        m.state = ModelState::stopped;
        const auto reserved = ledger_.reservation(m.device, m.name());
        ledger_.release(m.name());
        m.last_engine = engine;
        m.engine.reset();
        engines::ExitReport r = res.failure.value_or(engines::ExitReport{});
        m.last_exit = r;
        m.crashes.record(now(), r);
        ++m.loads_failed;
        ++m.exits[std::string(engines::to_string(r.kind))];
        learn_from_kill(m, r);
        note("load_failed", m, r.summary, {{"exit", r}}, true);
        note_quarantine(m);
        nlohmann::json details = {{"model", m.name()}, {"exit", r}};
        if (r.kind == engines::ExitKind::out_of_memory && reserved) {
            // Learn from it: the model needs more than was reserved. Raise its figure by the allocation that
            // failed (or a quarter), so that the next admission makes room for that much or refuses with the
            // numbers — the same failure never repeats.
            const auto failed = failed_allocation_bytes(r.matched_line);
            const std::uint64_t raised = reserved->bytes + failed.value_or(reserved->bytes / 4 + 64 * kMiB);
            note_peak(m,
                      {raised, Source::measured,
                       fmt::format("out of memory at load with {} reserved{}", human_bytes(reserved->bytes),
                                   failed ? "; a " + human_bytes(*failed) + " allocation failed" : "")});
            details["reserved_bytes"] = reserved->bytes;
            details["raised_to_bytes"] = raised;
            note("oom_at_load", m,
                 fmt::format("out of memory at load; its figure on {} is now {} (was {})", m.device,
                             human_bytes(raised), human_bytes(reserved->bytes)),
                 {{"raised_to_bytes", raised}}, true);
            if (m.oom_retries++ == 0) {  // once: the waiters stay and admission decides again
                pump();
                co_return;
            }
        }
        fail_waiters(m, Error(ErrorKind::engine_failed,
                              fmt::format("model '{}' failed to start: {}", m.name(), r.summary), details));
        apply_pending_config(m);
        pump();
        co_return;
    }
    m.oom_retries = 0;
    // What the engine says about itself (the slot context that decides the 400 for prompt + max_tokens)
    // before any request is let in.
    auto facts =
        co_await m.kind->after_ready(ex_, {engine->host(), engine->port(), engine->spec().api_key}, *m.cfg);
    if (!*alive || m.engine != engine) co_return;
    m.facts = std::move(facts);
    if (m.cold.open) m.cold.facts_read = now();
    if (const auto& gone = engine->exit_report()) {  // died between ready and now
        m.state = ModelState::stopped;
        ledger_.release(m.name());
        m.last_engine = engine;
        m.engine.reset();
        m.last_exit = *gone;
        m.crashes.record(now(), *gone);
        ++m.exits[std::string(engines::to_string(gone->kind))];
        note_quarantine(m);
        fail_waiters(m, Error(ErrorKind::engine_failed,
                              fmt::format("model '{}' died right after start: {}", m.name(), gone->summary),
                              {{"model", m.name()}, {"exit", *gone}}));
        apply_pending_config(m);
        pump();
        co_return;
    }
    m.state = ModelState::ready;
    m.unserved_load = true;
    m.load_s = std::chrono::duration<double>(res.took).count();
    m.last_used = now();
    // What the engine says it allocated raises the planned reservation, on each of its devices.
    const auto devices = devices_of(m);
    const auto logged = m.kind->measure_split(engine->startup_log(), m.where);
    for (std::size_t i = 0; i < devices.size() && i < logged.size(); ++i) {
        auto fig = logged[i];
        if (!fig) continue;
        fig->bytes += cfg_->device(devices[i]).margin;
        if (i == 0) m.measured = *fig;
        // The log's buffers are a floor (they leave out the process's own memory): they raise the
        // reservation, never lower it; the per-process probe raises it further as the engine works.
        ledger_.raise_to_measured(devices[i], m.name(), *fig);
    }
    for (const auto& d : devices) ledger_.mark_loaded(d, m.name());
    if (m.device != "cpu") ledger_.mark_loaded("cpu", m.name());  // its host part, if any
    ++m.loads_ok;
    m.load_seconds_total += *m.load_s;
    const auto held = ledger_.reservation(m.device, m.name());
    nlohmann::json figures = {{"device", m.device}, {"load_s", *m.load_s}};
    if (held) figures["reservation"] = *held;
    if (m.measured) figures["measured"] = *m.measured;
    note("ready", m,
         fmt::format("ready on {} in {:.1f} s{}; reservation {} ({})", m.device, *m.load_s,
                     m.measured ? ", engine log says " + human_bytes(m.measured->bytes) : "",
                     human_bytes(held ? held->bytes : 0),
                     held ? std::string(to_string(held->source)) : "none"),
         std::move(figures));
    pump();
    if (m.unload_when_idle && m.active == 0) begin_stop(m, "unloaded on request");
}

void Broker::begin_stop(Model& m, std::string why, bool keep_conversations) {
    if (!m.engine || m.state == ModelState::stopping || m.state == ModelState::stopped) return;
    // Only a ready, idle engine that was launched with slot files has slots worth saving.
    const bool save =
        keep_conversations && m.state == ModelState::ready && m.active == 0 && conversations_.saves(m.name());
    m.unload_when_idle = false;
    m.idle_stop_reason.clear();
    note("stop", m, why);
    m.state = ModelState::stopping;
    m.stop_started = now();
    m.stop_reason = std::move(why);
    auto engine = m.engine;
    auto alive = alive_;
    // The proxy's idle connections to it go first: they would hold the engine's exit.
    const auto stop = [this, alive, engine]() -> asio::awaitable<void> {
        if (*alive && listeners_.engine_stopping)
            listeners_.engine_stopping({engine->host(), engine->port(), engine->spec().api_key});
        co_await engine->stop();
    };
    if (!save) {
        asio::co_spawn(ex_, stop, asio::detached);  // (the callable: co_spawn keeps it alive)
        return;
    }
    // Its memory stays booked while the engine writes its slots (the state is `stopping`). At loch's shutdown
    // each save gets stop_grace (a person is waiting for loch to exit; one not done by then is abandoned, its
    // conversation re-read next time); else 5 minutes.
    const std::chrono::seconds limit = shutting_down_ ? cfg_->stop_grace : std::chrono::seconds(300);
    asio::co_spawn(
        ex_,
        [this, alive, name = m.name(), kind = m.kind, engine, stop, limit]() -> asio::awaitable<void> {
            if (*alive) co_await conversations_.save_before_stop(name, *kind, engine, limit);
            co_await stop();
        },
        asio::detached);
}

void Broker::begin_evict(Model& m, std::string why) {
    const auto level = m.kind->sleep_level(*m.cfg);
    if (level == 0 || m.state != ModelState::ready || !m.engine) return begin_stop(m, std::move(why), true);
    note("sleep", m, fmt::format("{}: asleep at level {} instead of stopped", why, level));
    m.state = ModelState::stopping;
    m.stop_started = now();
    m.stop_reason = why + " (going to sleep)";
    auto engine = m.engine;
    auto alive = alive_;
    asio::co_spawn(
        ex_,
        [this, alive, &m, engine, level, why]() -> asio::awaitable<void> {
            const engines::EngineAddress to{engine->host(), engine->port(), engine->spec().api_key};
            const bool ok = co_await m.kind->sleep(ex_, to, level);
            if (!*alive || m.engine != engine || m.state != ModelState::stopping) co_return;
            m.state = ModelState::ready;
            if (!ok) co_return begin_stop(m, why + " (it did not go to sleep)");
            Need awake;
            awake.device = m.device;
            awake.bytes = ledger_.reservation(m.device, m.name()).value_or(MemoryFigure{}).bytes;
            const auto f = m.kind->asleep(*m.cfg, awake);
            ledger_.reserve(m.device, m.name(), {f.device_bytes, Source::formula, f.why});
            if (f.host_bytes > 0 && m.device != "cpu" && ledger_.has_device("cpu"))
                ledger_.reserve("cpu", m.name() + "#asleep", {f.host_bytes, Source::formula, f.why});
            m.state = ModelState::asleep;
            m.sleep_level = level;
            note("asleep", m, f.why,
                 {{"device", m.device}, {"device_bytes", f.device_bytes}, {"host_bytes", f.host_bytes}});
            pump();
        },
        asio::detached);
}

void Broker::begin_wake(Model& m) {
    std::optional<Need> need;
    for (const auto& n : m.footprint->needs)
        if (n.device == m.device) need = need_on(m, n);
    if (!need) return begin_stop(m, "it cannot wake on " + m.device);
    ledger_.reserve(m.device, m.name(), {need->bytes, need->source, need->why});
    ledger_.release(m.name() + "#asleep");
    note("wake", m,
         fmt::format("waking on {}, reserving {} ({})", m.device, human_bytes(need->bytes), need->why));
    m.state = ModelState::loading;
    m.load_started = now();
    auto engine = m.engine;
    auto alive = alive_;
    const auto level = m.sleep_level;
    asio::co_spawn(
        ex_,
        [this, alive, &m, engine, level]() -> asio::awaitable<void> {
            const engines::EngineAddress to{engine->host(), engine->port(), engine->spec().api_key};
            const bool ok = co_await m.kind->wake(ex_, to, level);
            if (!*alive || m.engine != engine || m.state != ModelState::loading) co_return;
            m.state = ModelState::ready;
            m.unserved_load = true;
            m.sleep_level = 0;
            m.last_used = now();
            if (!ok) co_return begin_stop(m, "it did not wake up");
            pump();
        },
        asio::detached);
}

void Broker::learn_from_kill(Model& m, const engines::ExitReport& r) {
    // A memory limit's kill on the CPU: what it used becomes its figure there, so that the next admission
    // reserves that much (and refuses with the numbers when the limit cannot hold it) instead of starting it
    // into the same kill. (On a discrete GPU the limit bit host memory, which its figure does not describe.)
    if (!r.kill || !r.kill->counted() || !r.kill->used || m.device != "cpu") return;
    note_peak(m, {*r.kill->used, Source::measured,
                  fmt::format("killed by the memory limit at about {} ({})", human_bytes(*r.kill->used),
                              r.kill->used_how)});
}

void Broker::on_exit(Model& m, const std::shared_ptr<engines::EngineRun>& engine,
                     const engines::ExitReport& r) {
    if (m.engine != engine) return;
    if (m.state == ModelState::loading) return;  // load() reports start-up failures
    ++m.exits[std::string(engines::to_string(r.kind))];
    learn_from_kill(m, r);
    m.last_exit = r;  // (before the quarantine: its refusal names this exit)
    if (r.is_failure()) {
        note("exit", m, r.summary, {{"exit", r}}, true);
        m.crashes.record(now(), r);
        note_quarantine(m);
    }
    m.last_engine = engine;
    m.engine.reset();
    m.state = ModelState::stopped;
    m.borrowed_from_batch = false;
    ledger_.release(m.name());
    ledger_.release(m.name() + "#asleep");
    apply_pending_config(m);
    // "Really free": the next probe must show it; until then the memory counts as outside use.
    refresh_devices();
    pump();
}

asio::awaitable<nlohmann::json> Broker::preload(std::string model) {
    {
        Lease held = co_await do_acquire(model, {});
    }  // released at once: the engine stays up for its keep_alive
    co_return model_status(*find(model));
}

asio::awaitable<nlohmann::json> Broker::unload(std::string model) {
    Model* m = find(model);
    if (!m) throw Error(ErrorKind::model_not_found, "no model named '" + model + "'", {{"model", model}});
    if ((m->state == ModelState::ready && m->active == 0) || m->state == ModelState::asleep)
        begin_stop(*m, "unloaded on request", true);
    else if (m->state == ModelState::ready || m->state == ModelState::loading)
        m->unload_when_idle = true;  // once its requests end (a loading model: once its first ones have)
    co_return model_status(*m);
}

std::size_t Broker::kill_engines_now() {
    std::size_t n = 0;
    for (auto& [name, m] : models_)
        if (m->engine && !m->engine->exit_report())
            if (const auto pid = m->engine->pid(); pid && *pid > 0 && ::kill(-*pid, SIGKILL) == 0) ++n;
    return n;
}

asio::awaitable<void> Broker::shutdown() {
    co_await asio::co_spawn(
        ex_,
        [this]() -> asio::awaitable<void> {
            shutting_down_ = true;
            if (tick_timer_) tick_timer_->cancel();
            const Error e(ErrorKind::shutting_down, "loch is shutting down", {}, 5);
            for (auto& [id, w] : waiters_)
                if (!w->granted && !w->error) {
                    w->error = e;
                    w->timer.cancel();
                }
            std::vector<std::shared_ptr<engines::EngineRun>> running;
            for (auto& [n, m] : models_)
                if (m->engine) running.push_back(m->engine);
            // Idle engines save their conversations first (they survive a restart of loch).
            for (auto& [n, m] : models_) begin_stop(*m, "loch is shutting down", true);
            for (auto& engine : running) co_await engine->wait_exit();
        },
        asio::use_awaitable);
}

}  // namespace loch::broker
