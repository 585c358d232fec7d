#include "broker/broker.hpp"
#include "broker/model_state.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/time_text.hpp"

namespace loch::broker {

using namespace std::chrono_literals;

namespace asio = boost::asio;

// ---------------------------------------------------------------------------------------------------------
// Construction, ticks

Broker::Broker(asio::any_io_executor ex, const config::Config& cfg, std::unique_ptr<DeviceSource> devices,
               std::unique_ptr<FootprintSource> footprints, std::unique_ptr<engines::Launcher> launcher,
               BrokerOptions options)
    : ex_(ex),
      configs_{std::make_shared<const config::Config>(cfg)},
      cfg_(configs_.back().get()),
      devices_(std::move(devices)),
      footprints_(std::move(footprints)),
      launcher_(std::move(launcher)),
      options_(options),
      clock_(options.clock ? *options.clock : core::steady_clock()),
      policy_(options.policy ? options.policy : loch_policy()),
      queue_(cfg.queue.interactive, cfg.queue.batch, options.aging),
      remembered_(cfg.state_dir.empty() ? std::filesystem::path() : cfg.state_dir / "footprints.json"),
      file_cache_(options.blocking_work),
      cpu_cores_(options.cpu_cores ? options.cpu_cores : cpus_loch_may_use()),
      conversations_(ex, cfg.state_dir.empty() ? std::filesystem::path() : cfg.state_dir / "slots",
                     cfg.slot_save, clock_, events_),
      alive_(std::make_shared<bool>(true)) {
    for (const auto& m : cfg_->models) {
        models_[m.name] = std::make_unique<Model>(m, cfg_->restart);
        models_[m.name]->last_used = now();
    }
}

Broker::~Broker() {
    *alive_ = false;
    // Engines still running are killed by their destructors (process group SIGKILL + reap).
}

void Broker::start() {
    refresh_devices();
    warn_limits_that_never_fit();
    tick_timer_ = std::make_unique<core::Timer>(ex_, clock_);
    asio::co_spawn(ex_, tick_loop(), asio::detached);
}

asio::awaitable<void> Broker::tick_loop() {
    auto alive = alive_;
    while (*alive && !shutting_down_) {
        tick_timer_->expires_after(tick_period());
        co_await tick_timer_->wait();
        if (!*alive || shutting_down_) co_return;
        refresh_devices();
        evict_expired();
        expire_holds();
        measure_files();
        pump();
        sample_history();
    }
}

void Broker::note_request() {
    last_request_ = now();
    // An idle tick may be sleeping for up to idle_tick: a request makes the broker busy, so it ticks again
    // within one tick (keep-alive, the runtime guard, backoff all run on it).
    if (tick_timer_ && tick_timer_->expiry() > last_request_ + options_.tick) tick_timer_->cancel();
}

bool Broker::busy(Clock::time_point now) const {
    bool busy = !waiters_.empty() || !holds_.empty() || devices_book_.any_loading() ||
                now - last_request_ < 10 * options_.tick;
    for (const auto& [name, m] : models_) busy |= m->active > 0 || m->state == ModelState::loading;
    return busy;
}

Clock::duration Broker::tick_period() const {
    const auto now = this->now();
    if (busy(now)) return options_.tick;
    // Idle: the next keep-alive expiry or the idle tick, whichever comes first.
    const auto next = until_next_expiry(idle_facts(), now, options_.idle_tick);
    return std::max<Clock::duration>(next, options_.tick);
}

Broker::Model* Broker::find(const std::string& name_or_alias) {
    const auto* mc = cfg_->find_model(name_or_alias);
    if (!mc) return nullptr;
    auto it = models_.find(mc->name);
    return it == models_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------------------------------------------------
// Acquire / release

asio::awaitable<Lease> Broker::acquire(std::string model, RequestNeeds needs) {
    // Directly, not through a post: the hot path of every request (see broker.hpp on threads).
    co_return co_await do_acquire(std::move(model), needs);
}

std::optional<Lease> Broker::try_acquire(const std::string& name, const RequestNeeds& needs) {
    Model* m = shutting_down_ ? nullptr : find(name);
    if (!m || m->state != ModelState::ready || head_of_line_blocked()) return std::nullopt;
    check_needs(*m, needs);
    check_runnable(*m, needs);
    std::string holder;
    if (try_serve(*m, needs, &holder) != Serve::granted) return std::nullopt;
    if (needs.keep_alive) m->keep_alive_override = *needs.keep_alive;
    note_request();
    return make_lease(*m, priority_of(*m, needs), "ready", {}, std::move(holder));
}

nlohmann::json BrokerView::progress(const std::string& name) {
    const Broker& b = broker_;
    const Broker::Model* m = broker_.find(name);
    if (!m) return {{"model", name}};
    nlohmann::json j = {{"model", m->name()}, {"state", to_string(m->state)}, {"reason", m->wait_reason}};
    // A waiting client does not know its place: the ETA as if it were the last of its model's waiters.
    std::size_t ahead = 0;
    for (const auto& [id, w] : b.waiters_) ahead += w->model == m ? 1 : 0;
    j.update(nlohmann::json(b.eta_for_request(*m, ahead > 0 ? ahead - 1 : 0)));
    if (m->state == ModelState::loading) {
        j["loading"] = {{"elapsed_s", std::chrono::duration<double>(b.now() - m->load_started).count()}};
        if (m->load_s) j["loading"]["expected_s"] = *m->load_s;
    }
    return j;
}

asio::awaitable<Lease> Broker::do_acquire(std::string name, RequestNeeds needs) {
    if (shutting_down_) throw Error(ErrorKind::shutting_down, "loch is shutting down", {}, 5);
    Model* m = find(name);
    if (!m) {
        std::vector<std::string> names;
        for (const auto& mc : cfg_->models) names.push_back(mc.name);
        throw Error(ErrorKind::model_not_found,
                    fmt::format("no model named '{}' (known: {})", name, fmt::join(names, ", ")),
                    {{"model", name}, {"available", names}});
    }
    check_needs(*m, needs);
    if (needs.keep_alive) m->keep_alive_override = *needs.keep_alive;
    note_request();
    // A record that launched and is still open while the model is stopped again is a start that failed:
    // this request starts a new one.
    const bool cold = (m->state == ModelState::stopped || m->state == ModelState::asleep) &&
                      (!m->cold.open || m->cold.launched != Clock::time_point{});
    if (cold) m->cold = {true, last_request_};
    if (m->state != ModelState::ready && last_request_ - last_refresh_ > options_.tick) refresh_devices();
    if (cold) m->cold.devices_read = now();
    co_await ensure_footprint(*m);
    if (cold) m->cold.planned = now();
    check_runnable(*m, needs);  // before it waits or an engine starts for it
    // The usual case — ready, a slot free — is granted without a Waiter (and its timer) being made.
    m->start_error.reset();
    if (std::string holder; !head_of_line_blocked() && try_serve(*m, needs, &holder) == Serve::granted)
        co_return make_lease(*m, priority_of(*m, needs), "ready", {}, std::move(holder));
    if (m->start_error) throw *m->start_error;  // the start it triggered failed before anything ran
    auto w = std::make_shared<Waiter>(next_waiter_++, m, ex_, clock_);
    w->decision = m->wait_reason;
    w->needs = needs;

    const auto prio = priority_of(*m, needs);
    const std::size_t cap = queue_.capacity(prio);
    if (!queue_.push(w->id, prio, now())) {
        const int retry = retry_after_s(*m);
        throw Error(ErrorKind::queue_full,
                    fmt::format("the {} queue is full: {} requests are already waiting (limit {})",
                                config::to_string(prio), queue_.size(prio), cap),
                    {{"model", m->name()},
                     {"priority", config::to_string(prio)},
                     {"queued", queue_.size(prio)},
                     {"queue_limit", cap}},
                    retry);
    }
    waiters_[w->id] = w;
    if (prio == config::Priority::interactive) note_interactive_arrival();
    // Freshly queued: its own load/eviction may have been started by try_serve already; pump picks it up.
    w->timer.expires_after(cfg_->max_wait);
    co_await w->timer.wait();
    queue_.remove(w->id);
    waiters_.erase(w->id);
    if (w->granted) co_return make_lease(*m, prio, w->decision, now() - w->since, std::move(w->transient));
    if (w->error) throw *w->error;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now() - w->since).count();
    Error timeout(ErrorKind::queue_timeout,
                  fmt::format("model '{}' could not be served within max_wait ({} s): {}", m->name(), waited,
                              m->wait_reason),
                  {{"model", m->name()},
                   {"waited_s", waited},
                   {"max_wait_s", cfg_->max_wait.count()},
                   {"state", to_string(m->state)},
                   {"blocked_by", m->wait_reason}},
                  retry_after_s(*m));
    note("queue_timeout", *m, timeout.what(), {{"waited_s", waited}}, true);
    throw timeout;
}

void Broker::close_cold_start(Model& m, Clock::time_point granted) {
    const auto ms = [](Clock::time_point from, Clock::time_point to) {
        return from == Clock::time_point{} || to < from
                   ? 0.0
                   : std::chrono::duration<double, std::milli>(to - from).count();
    };
    const auto& c = m.cold;
    const double total = ms(c.arrived, granted), engine = double(c.engine_took.count());
    m.last_cold_start = {{"total_ms", total},
                         {"devices_read_ms", ms(c.arrived, c.devices_read)},
                         {"planned_ms", ms(c.devices_read, c.planned)},
                         {"admitted_ms", ms(c.planned, c.launched)},
                         {"engine_ready_ms", ms(c.launched, c.engine_ready)},
                         {"engine_own_ms", engine},
                         {"facts_ms", ms(c.engine_ready, c.facts_read)},
                         {"granted_ms", ms(c.facts_read, granted)},
                         {"loch_ms", std::max(0.0, total - engine)}};
    m.cold.open = false;
}

Lease Broker::make_lease(Model& m, config::Priority priority, std::string decision, Clock::duration waited,
                         std::string transient_holder) {
    Lease l;
    l.transient_ = std::move(transient_holder);
    l.decision_ = std::move(decision);
    l.queue_wait_ = waited;
    l.priority_ = std::string(config::to_string(priority));
    l.interactive_ = priority == config::Priority::interactive;
    l.broker_ = this;
    l.alive_ = alive_;
    l.granted_at_ = now();
    l.model_ = m.name();
    if (m.cold.open && m.cold.facts_read != Clock::time_point{}) close_cold_start(m, l.granted_at_);
    if (m.engine) l.address_ = {m.engine->host(), m.engine->port(), m.engine->spec().api_key};
    l.facts_ = m.facts;
    l.kind_ = m.kind;
    l.model_cfg_ = m.cfg;
    l.watchdog_ = m.cfg->watchdog;
    l.engine_ = m.engine;
    return l;
}

// What the engine keeps after a request (its pool at the largest request so far) stays booked as the
// engine's: the ledger never shows free what the process still holds (sd-server kept up to ~900 MiB on the
// H200).
void Broker::keep_retained(Model& m, const std::string& holder) {
    const auto it = m.transient_retained.find(holder);
    if (it == m.transient_retained.end()) return;
    const std::uint64_t kept = it->second;
    m.transient_retained.erase(it);
    if (kept <= m.retained || m.state == ModelState::stopped) return;
    if (const auto r = ledger_.reservation(m.device, m.name())) {
        const std::uint64_t grown = kept - m.retained;
        ledger_.raise_to_measured(
            m.device, m.name(),
            {r->bytes + grown, r->source,
             fmt::format("{} + {} the engine keeps after its largest request (a pool that never shrinks)",
                         r->detail, human_bytes(grown))});
    }
    m.retained = kept;
}

void Broker::release(const std::string& name, Clock::duration held, const std::string& transient,
                     bool interactive) {
    if (!transient.empty()) ledger_.release(transient);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    Model& m = *it->second;
    if (!transient.empty()) {
        m.transients.erase(transient);
        keep_retained(m, transient);
    }
    if (m.active > 0) --m.active;
    if (interactive && m.active_interactive > 0) --m.active_interactive;
    if (!interactive && batch_active_ > 0) --batch_active_;
    m.last_used = now();
    const double s = std::chrono::duration<double>(held).count();
    m.avg_request_s = m.requests_done++ == 0 ? s : 0.8 * m.avg_request_s + 0.2 * s;
    if (m.active == 0) {
        each_device(m, [&](const std::string& d) { devices_book_.unlock(d, name); });
        const auto keep_alive = m.keep_alive();
        if (m.unload_when_idle)
            begin_stop(m, m.idle_stop_reason.empty() ? "unloaded on request" : m.idle_stop_reason,
                       m.idle_stop_reason.empty());
        else if (keep_alive && keep_alive->count() == 0 && !m.cfg->pinned)
            begin_stop(m, "keep_alive 0: stopped when its request ended", true);
    }
    pump();
}

Error Broker::quarantine_error(const Model& m, const engines::CrashTracker::Verdict& v) const {
    nlohmann::json d = {{"model", m.name()}};
    if (m.last_exit) d["last_exit"] = *m.last_exit;
    const auto retry = std::chrono::duration_cast<std::chrono::seconds>(v.retry_in).count();
    d["retry_in_s"] = retry;
    return Error(ErrorKind::quarantined, v.message, d, static_cast<int>(std::max<long>(1, retry)));
}

int Broker::retry_after_s(const Model& m) const {
    std::size_t ahead = 0;
    for (const auto& [id, w] : waiters_)
        if (w->model == &m) ++ahead;
    const double est = m.avg_request_s * double(ahead + 1) / double(m.slots());
    return std::clamp(static_cast<int>(std::ceil(est)), 1, 300);
}

bool Broker::exclusive(const Model& m) const {
    return m.cfg->exclusive || policy_->one_model_at_a_time();
}

bool Broker::head_of_line_blocked() const {
    if (!policy_->one_model_at_a_time()) return false;
    for (const auto& [id, w] : waiters_)
        if (!w->granted && !w->error) return true;
    return false;
}

bool Broker::one_model_at_a_time(Model& m) {
    // llama-swap's swap: every other engine is stopped (once its requests end) before this one starts.
    std::vector<std::string> others, busy;
    for (auto& [n, o] : models_) {
        if (o.get() == &m || o->state == ModelState::stopped) continue;
        if (o->state == ModelState::ready && o->active == 0)
            others.push_back(n);
        else
            busy.push_back(n);
    }
    if (others.empty() && busy.empty()) return true;
    m.wait_reason = fmt::format("one model at a time: waiting for {} to stop",
                                fmt::join(others.empty() ? busy : others, ", "));
    if (!others.empty()) evict(others, m.name(), "one model at a time (the fifo_lock policy)");
    return false;
}

bool Broker::exclusive_ok(const Model& m) const {
    bool ok = true;
    each_device(m, [&](const std::string& d) {
        if (const auto holder = devices_book_.holder(d); holder && *holder != m.name()) ok = false;
        if (!exclusive(m)) return;
        // Takes its devices only when no other model runs a request on any of them.
        for (const auto& [n, o] : models_) {
            if (o.get() == &m || o->active == 0 || o->state == ModelState::stopped) continue;
            each_device(*o, [&](const std::string& od) {
                if (od == d) ok = false;
            });
        }
    });
    return ok;
}

void Broker::evict(const std::vector<std::string>& victims, const std::string& for_whom,
                   const std::string& why) {
    for (const auto& v : victims)
        if (auto it = models_.find(v); it != models_.end()) {
            Model& victim = *it->second;
            std::uint64_t held = 0;
            for (const auto& d : devices_of(victim))
                held += ledger_.reservation(d, victim.name()).value_or(MemoryFigure{}).bytes;
            ++victim.evictions;
            note("evict", victim, why, {{"for", for_whom}, {"device", victim.device}, {"freed_bytes", held}});
            begin_evict(victim, why);
        }
}

void Broker::pump() {
    if (queue_.size() == 0) return;  // every release calls it: the usual case orders nothing
    const auto order = queue_.order(now());
    for (auto id : order) {
        if (Hold* h = holds_.queued(id)) {
            Hold& hold = *h;
            try {
                if (try_grant(hold) == Serve::granted) {
                    queue_.remove(id);
                    holds_.dequeue(id);
                }
            } catch (const Error& e) {
                end_hold(hold, e.what(),
                         {{"type", to_string(e.kind())}, {"message", e.what()}, {"details", e.details()}});
            }
            continue;
        }
        auto it = waiters_.find(id);
        if (it == waiters_.end()) continue;
        auto w = it->second;
        if (w->granted || w->error) continue;
        try {
            const bool aged = now() - w->since >= options_.aging;
            if (try_serve(*w->model, w->needs, &w->transient, aged) == Serve::granted) {
                w->granted = true;
                queue_.remove(id);
                w->timer.cancel();
            } else if (policy_->one_model_at_a_time()) {
                break;  // head of line: nothing behind it goes first
            }
        } catch (const Error& e) {
            w->error = e;
            queue_.remove(id);
            w->timer.cancel();
        }
    }
}

void Broker::fail_waiters(const Model& m, const Error& e) {
    for (auto& [id, w] : waiters_) {
        if (w->model != &m || w->granted || w->error) continue;
        w->error = e;
        queue_.remove(id);
        w->timer.cancel();
    }
}

}  // namespace loch::broker
