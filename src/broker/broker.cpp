#include "broker/broker.hpp"
#include "broker/model_state.hpp"

#include <algorithm>
#include <cmath>
#include <regex>

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
// Construction, ticks, events

namespace {
constexpr std::size_t kMaxEvents = 200;
}

template <class F>
void Broker::each_device(const Model& m, F&& f) {
    // Its placement's others only when the placement is this run's (begin_load set both; a model never
    // started, or moved by other means, has just its device).
    f(m.device);
    if (m.where.device == m.device)
        for (const auto& o : m.where.others) f(o.device);
}

void Broker::note(std::string_view kind, const Model& m, std::string message, nlohmann::json extra,
                  bool warn) {
    if (warn)
        spdlog::warn("{} '{}': {}", kind, m.name(), message);
    else
        spdlog::info("{} '{}': {}", kind, m.name(), message);
    nlohmann::json e = extra.is_object() ? std::move(extra) : nlohmann::json::object();
    e["at"] = iso8601_utc(std::chrono::system_clock::now());
    e["kind"] = kind;
    e["model"] = m.name();
    e["message"] = std::move(message);
    events_.push_back(std::move(e));
    while (events_.size() > kMaxEvents) events_.pop_front();
}

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
      queue_(cfg.queue.interactive, cfg.queue.batch, options.aging),
      remembered_(cfg.state_dir.empty() ? std::filesystem::path() : cfg.state_dir / "footprints.json"),
      alive_(std::make_shared<bool>(true)) {
    for (const auto& m : cfg_->models) models_[m.name] = std::make_unique<Model>(m, cfg_->restart);
}

Broker::~Broker() {
    *alive_ = false;
    // Engines still running are killed by their destructors (process group SIGKILL + reap).
}

void Broker::start() {
    refresh_devices();
    tick_timer_ = std::make_unique<asio::steady_timer>(ex_);
    asio::co_spawn(ex_, tick_loop(), asio::detached);
}

asio::awaitable<void> Broker::tick_loop() {
    auto alive = alive_;
    while (*alive && !shutting_down_) {
        tick_timer_->expires_after(tick_period());
        co_await tick_timer_->async_wait(asio::as_tuple(asio::use_awaitable));
        if (!*alive || shutting_down_) co_return;
        refresh_devices();
        evict_expired();
        pump();
    }
}

Clock::duration Broker::tick_period() const {
    const auto now = Clock::now();
    bool busy = !waiters_.empty() || !loading_devices_.empty() || now - last_request_ < 10 * options_.tick;
    for (const auto& [name, m] : models_) busy |= m->active > 0 || m->state == ModelState::loading;
    return busy ? Clock::duration(options_.tick) : Clock::duration(5 * options_.tick);
}

void Broker::refresh_devices() {
    last_refresh_ = Clock::now();
    std::vector<DeviceSnapshot> snap;
    try {
        snap = devices_->snapshot();
    } catch (const std::exception& e) {
        spdlog::warn("device probe failed: {}", e.what());
        return;
    }
    for (const auto& d : snap) {
        if (!ledger_.has_device(d.id)) {
            const auto dc = cfg_->device(d.id);
            DeviceLimits l;
            l.id = d.id;
            l.total = d.total;
            l.reserve = {dc.reserve, Source::configured, "devices." + d.id + ".reserve"};
            if (dc.budget)
                l.cap = MemoryFigure{*dc.budget, Source::configured, "devices." + d.id + ".budget"};
            if (d.driver_reserved) l.driver_reserved = *d.driver_reserved;
            if (dc.backend == "vulkan" && d.vulkan_heap)
                l.backend_bound = MemoryFigure{d.vulkan_heap->bytes, Source::measured,
                                               "the Vulkan DEVICE_LOCAL heap (devices." + d.id +
                                                   ".backend: vulkan): all a Vulkan engine can allocate"};
            ledger_.set_device(std::move(l));
        }
        if (d.used) ledger_.observe_used(d.id, d.used->bytes);
        if (!d.driver.empty()) drivers_[d.id] = d.driver;
        const std::string backend = cfg_->device(d.id).backend.value_or(d.backend);
        if (backend != "cpu" || d.id == "cpu") placements_[d.id] = {d.id, backend, d.ordinal, d.total.bytes};
    }
    observe_engines(snap);
}

void Broker::observe_engines(const std::vector<DeviceSnapshot>& snap) {
    for (auto& [name, m] : models_) {
        if (!m->engine || m->state == ModelState::stopped || m->device.empty()) continue;
        const auto pid = m->engine->pid();
        if (!pid) continue;
        // The whole process group: servers such as vLLM hold their memory in worker processes. (RSS summed
        // over processes counts shared pages more than once: never under.)
        const auto members = devices_->group_members(*pid);
        // What the group's processes use on one GPU, as the probe attributes it.
        const auto use_on = [&](const std::string& device) -> std::optional<MemoryFigure> {
            std::uint64_t total = 0;
            bool any = false;
            for (const auto& d : snap)
                if (d.id == device)
                    for (int p : members)
                        if (auto it = d.process_bytes.find(p); it != d.process_bytes.end())
                            total += it->second, any = true;
            if (!any) return std::nullopt;
            return MemoryFigure{
                total, Source::measured,
                fmt::format("use on the device by the engine's {} process(es)", members.size())};
        };
        std::optional<MemoryFigure> seen;
        if (m->device == "cpu") {
            std::uint64_t total = 0;
            bool any = false;
            for (int p : members)
                if (auto rss = devices_->resident_bytes(p)) total += *rss, any = true;
            if (any)
                seen = MemoryFigure{total, Source::measured,
                                    fmt::format("RSS of the engine's {} process(es)", members.size())};
        } else if (m->where.split()) {
            // A split: each device's own use raises that device's reservation (no peak is remembered for
            // a split: its launch changes with the free memory it was split by).
            each_device(*m, [&](const std::string& dev) {
                if (auto on = use_on(dev)) guard_measured(*m, dev, *on);
            });
            continue;
        } else {
            seen = use_on(m->device);
        }
        if (!seen) continue;
        // What its running requests booked for themselves is theirs, not the engine's (else the engine's
        // figure would keep a request's compute after it ended, counted twice for the next).
        if (const auto t = m->transient_bytes(); t > 0) {
            seen->bytes -= std::min(seen->bytes, t);
            seen->detail += fmt::format(" less {} booked by its running requests", human_bytes(t));
        }
        note_peak(*m, *seen);
        guard_measured(*m, m->device, *seen);
    }
}

void Broker::guard_measured(Model& m, const std::string& device, const MemoryFigure& seen) {
    const auto before = ledger_.reservation(device, m.name());
    if (!before || !ledger_.raise_to_measured(device, m.name(), seen)) return;
    // The ledger takes the measured figure at once (above); a growth past what was reserved is news.
    if (m.state == ModelState::ready || m.state == ModelState::asleep) {
        note("grew", m,
             fmt::format("uses {} on {}, {} more than its reservation of {} ({}); the ledger now books the "
                         "measured figure",
                         human_bytes(seen.bytes), device, human_bytes(seen.bytes - before->bytes),
                         human_bytes(before->bytes), to_string(before->source)),
             {{"device", device},
              {"reserved_bytes", before->bytes},
              {"reserved_source", to_string(before->source)},
              {"measured_bytes", seen.bytes},
              {"over_by_bytes", seen.bytes - before->bytes}},
             true);
    }
    relieve_overcommit(device, m);
}

void Broker::relieve_overcommit(const std::string& device, const Model& grown) {
    const std::uint64_t cap = ledger_.capacity(device);
    std::uint64_t own = ledger_.own(device);
    if (own <= cap) return;
    // Over the device's capacity: nothing new is admitted there (its free memory is 0), and idle holders go
    // first, the longest idle first. A holder with running requests is never stopped for this: their work
    // would be lost, and the memory the grown engine took is what loch guards, not what it kills for.
    std::vector<Model*> idle;
    for (auto& [name, o] : models_) {
        if (o.get() == &grown || o->state != ModelState::ready || o->active > 0 || o->cfg->pinned) continue;
        const auto devs = devices_of(*o);
        if (std::find(devs.begin(), devs.end(), device) != devs.end()) idle.push_back(o.get());
    }
    std::sort(idle.begin(), idle.end(),
              [](const Model* a, const Model* b) { return a->last_used < b->last_used; });
    const std::uint64_t over = own - cap;
    std::vector<std::string> victims;
    std::uint64_t freed = 0;
    for (Model* v : idle) {
        if (freed >= over) break;
        freed += ledger_.reservation(device, v->name()).value_or(MemoryFigure{}).bytes;
        victims.push_back(v->name());
    }
    note("overcommitted", grown,
         fmt::format("{} is over its capacity by {} after '{}' grew; admitting nothing more there{}", device,
                     human_bytes(over), grown.name(),
                     victims.empty() ? " (no idle holder to evict)"
                                     : fmt::format(" and evicting {} idle holder(s)", victims.size())),
         {{"device", device}, {"capacity_bytes", cap}, {"booked_bytes", own}, {"over_by_bytes", over}}, true);
    evict(victims, grown,
          fmt::format("{} over capacity after '{}' grew past its reservation", device, grown.name()));
}

void Broker::note_peak(Model& m, const MemoryFigure& f) {
    auto& p = m.peak[m.device];
    if (f.bytes <= p.bytes) return;
    p = f;
    if (auto k = footprint_key(m, m.device)) remembered_.raise(*k, f);
}

std::optional<FootprintKey> Broker::footprint_key(const Model& m, const std::string& device) const {
    const auto it = placements_.find(device);
    const engines::Placement where = it != placements_.end() ? it->second : placement_without_probe(device);
    try {
        auto spec = m.kind->launch(*cfg_, *m.cfg, where, 0);
        const auto driver = drivers_.find(device);
        FootprintKey k{m.name(),
                       device,
                       std::string(m.kind->name()),
                       std::move(spec.argv),
                       m.cfg->path,
                       {},
                       driver != drivers_.end() ? driver->second : std::string()};
        if (!k.argv.empty()) k.engine_file = k.argv.front();
        return k;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

Need Broker::need_on(const Model& m, const Need& planned) const {
    Need n = planned;
    if (auto it = m.peak.find(planned.device); it != m.peak.end() && it->second.bytes > n.bytes) {
        n.why = fmt::format("measured peak {} of an earlier run ({}) > {}", human_bytes(it->second.bytes),
                            it->second.detail, planned.why);
        n.bytes = it->second.bytes;
        n.source = Source::measured;
    }
    // The highest an earlier loch measured for this very launch (restarts forget nothing).
    if (const auto k = footprint_key(m, planned.device))
        if (const auto earlier = remembered_.get(*k); earlier && earlier->bytes > n.bytes) {
            n.why = fmt::format("{} > {}", earlier->detail, n.why);
            n.bytes = earlier->bytes;
            n.source = Source::measured_earlier;
        }
    return n;
}

void Broker::evict_expired() {
    const auto now = Clock::now();
    for (auto& [name, m] : models_) {
        const auto keep_alive = m->keep_alive();
        if (m->state != ModelState::ready || m->active > 0 || m->cfg->pinned || !keep_alive) continue;
        if (now - m->last_used < *keep_alive) continue;
        const Model* mp = m.get();  // (clang 14 cannot capture a structured binding)
        const bool wanted = std::any_of(waiters_.begin(), waiters_.end(),
                                        [&](const auto& w) { return w.second->model == mp; });
        if (!wanted)
            begin_stop(
                *m, fmt::format("idle for {} s (keep_alive {} s)",
                                std::chrono::duration_cast<std::chrono::seconds>(now - m->last_used).count(),
                                keep_alive->count()));
    }
}

void Broker::note_quarantine(Model& m) {
    const auto v = m.crashes.check(Clock::now());
    if (!v.quarantined) return;
    note("quarantine", m, v.message,
         {{"retry_in_s", std::chrono::duration_cast<std::chrono::seconds>(v.retry_in).count()}}, true);
    fail_waiters(m, Error(ErrorKind::quarantined, v.message, {{"model", m.name()}}));
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

void Broker::check_needs(const Model& m, const RequestNeeds& needs) const {
    if (!needs.route.empty() && !m.kind->serves(*m.cfg, needs.route))
        throw Error(
            ErrorKind::invalid_request,
            fmt::format("model '{}' ({} engine) does not serve {}", m.name(), m.kind->name(), needs.route),
            {{"model", m.name()}, {"engine", m.kind->name()}, {"route", needs.route}});
    if (!needs.max_tokens) return;
    // The slot context: what the running (or last) engine reported, else what the config gives it. A
    // prompt takes at least one token, so max_tokens ≥ slot context can never be served.
    std::optional<std::uint64_t> slot_ctx = m.facts.slot_ctx;
    std::string source = m.facts.slot_ctx_source;
    if (!slot_ctx) {
        slot_ctx = m.kind->configured_slot_ctx(*m.cfg);
        source = "the model's configuration";
    }
    if (!slot_ctx || *needs.max_tokens < *slot_ctx) return;
    throw Error(ErrorKind::context_length_exceeded,
                fmt::format("max_tokens ({}) can never fit the slot context of model '{}' ({} tokens): "
                            "lower max_tokens, or raise args.ctx",
                            *needs.max_tokens, m.name(), *slot_ctx),
                {{"model", m.name()},
                 {"max_tokens", *needs.max_tokens},
                 {"slot_ctx", *slot_ctx},
                 {"slot_ctx_source", source}});
}

std::optional<Lease> Broker::try_acquire(const std::string& name, const RequestNeeds& needs) {
    Model* m = shutting_down_ ? nullptr : find(name);
    if (!m || m->state != ModelState::ready) return std::nullopt;
    check_needs(*m, needs);
    std::string holder;
    if (try_serve(*m, needs, &holder) != Serve::granted) return std::nullopt;
    if (needs.keep_alive) m->keep_alive_override = *needs.keep_alive;
    last_request_ = Clock::now();
    return make_lease(*m, "ready", {}, std::move(holder));
}

nlohmann::json Broker::progress(const std::string& name) {
    Model* m = find(name);
    if (!m) return {{"model", name}};
    nlohmann::json j = {{"model", m->name()}, {"state", to_string(m->state)}, {"reason", m->wait_reason}};
    if (m->state == ModelState::loading) {
        j["loading"] = {{"elapsed_s", std::chrono::duration<double>(Clock::now() - m->load_started).count()}};
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
    last_request_ = Clock::now();
    if (m->state != ModelState::ready && last_request_ - last_refresh_ > options_.tick) refresh_devices();
    co_await ensure_footprint(*m);
    // The usual case — ready, a slot free — is granted without a Waiter (and its timer) being made.
    if (std::string holder; try_serve(*m, needs, &holder) == Serve::granted)
        co_return make_lease(*m, "ready", {}, std::move(holder));
    auto w = std::make_shared<Waiter>(next_waiter_++, m, ex_);
    w->decision = m->wait_reason;
    w->needs = needs;

    const auto prio = m->cfg->priority;
    const std::size_t cap = queue_.capacity(prio);
    if (!queue_.push(w->id, prio, Clock::now())) {
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
    // Freshly queued: its own load/eviction may have been started by try_serve already; pump picks it up.
    w->timer.expires_after(cfg_->max_wait);
    co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
    queue_.remove(w->id);
    waiters_.erase(w->id);
    if (w->granted) co_return make_lease(*m, w->decision, Clock::now() - w->since, std::move(w->transient));
    if (w->error) throw *w->error;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - w->since).count();
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

Lease Broker::make_lease(Model& m, std::string decision, Clock::duration waited,
                         std::string transient_holder) {
    Lease l;
    l.transient_ = std::move(transient_holder);
    l.decision_ = std::move(decision);
    l.queue_wait_ = waited;
    l.priority_ = std::string(config::to_string(m.cfg->priority));
    l.broker_ = this;
    l.alive_ = alive_;
    l.granted_at_ = Clock::now();
    l.model_ = m.name();
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

void Broker::release(const std::string& name, Clock::duration held, const std::string& transient) {
    if (!transient.empty()) ledger_.release(transient);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    Model& m = *it->second;
    if (!transient.empty()) {
        m.transients.erase(transient);
        keep_retained(m, transient);
    }
    if (m.active > 0) --m.active;
    m.last_used = Clock::now();
    const double s = std::chrono::duration<double>(held).count();
    m.avg_request_s = 0.8 * m.avg_request_s + 0.2 * s;
    if (m.active == 0) {
        each_device(m, [&](const std::string& d) {
            auto lock = gpu_lock_.find(d);
            if (lock != gpu_lock_.end() && lock->second == name) gpu_lock_.erase(lock);
        });
        const auto keep_alive = m.keep_alive();
        if (m.unload_when_idle)
            begin_stop(m, m.idle_stop_reason.empty() ? "unloaded on request" : m.idle_stop_reason);
        else if (keep_alive && keep_alive->count() == 0 && !m.cfg->pinned)
            begin_stop(m, "keep_alive 0: stopped when its request ended");
    }
    pump();
}

int Broker::retry_after_s(const Model& m) const {
    std::size_t ahead = 0;
    for (const auto& [id, w] : waiters_)
        if (w->model == &m) ++ahead;
    const double est = m.avg_request_s * double(ahead + 1) / double(m.slots());
    return std::clamp(static_cast<int>(std::ceil(est)), 1, 300);
}

bool Broker::exclusive_ok(const Model& m) const {
    bool ok = true;
    each_device(m, [&](const std::string& d) {
        auto lock = gpu_lock_.find(d);
        if (lock != gpu_lock_.end() && lock->second != m.name()) ok = false;
        if (!m.cfg->exclusive) return;
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

void Broker::evict(const std::vector<std::string>& victims, const Model& for_model, const std::string& why) {
    for (const auto& v : victims)
        if (auto it = models_.find(v); it != models_.end()) {
            Model& victim = *it->second;
            std::uint64_t held = 0;
            for (const auto& d : devices_of(victim))
                held += ledger_.reservation(d, victim.name()).value_or(MemoryFigure{}).bytes;
            ++victim.evictions;
            note("evict", victim, why,
                 {{"for", for_model.name()}, {"device", victim.device}, {"freed_bytes", held}});
            begin_evict(victim, why);
        }
}

std::optional<engines::Refusal> Broker::check_before_start(const std::string& name,
                                                           const engines::RequestView& r) {
    Model* m = find(name);
    if (!m) return std::nullopt;
    engines::RequestView view = r;
    view.model = m->cfg;
    return m->kind->check_before_start(*m->cfg, view);
}

std::optional<engines::RequestCost> Broker::request_cost(const std::string& name,
                                                         const engines::RequestView& r) {
    Model* m = find(name);
    if (!m) return std::nullopt;
    // Costed for the device it runs on (the first it may use while cold): placement flags (clip_on_cpu …)
    // change what a GPU holds; on the CPU everything counts.
    engines::RequestView placed = r;
    std::string device = m->device;  // a running model's own (the device walk below is for a cold one)
    if (device.empty()) {
        const auto devices = allowed_devices(*m);
        device = devices.empty() ? "cpu" : devices.front();
    }
    if (auto it = placements_.find(device); it != placements_.end()) placed.where = &it->second;
    return m->kind->request_cost(*m->cfg, placed);
}

Broker::Serve Broker::book_transient(Model& m, const engines::RequestCost& t, std::string* holder) {
    const auto engine = ledger_.reservation(m.device, m.name()).value_or(MemoryFigure{});
    const std::uint64_t cap = ledger_.capacity(m.device);
    if (engine.bytes + t.bytes > cap) {
        // Never: the weights and this request's compute together exceed what the device can ever give.
        const std::uint64_t budget = cap > engine.bytes ? cap - engine.bytes : 0;
        auto help = t.would_help ? t.would_help(budget) : std::vector<std::string>{};
        if (const auto* lim = ledger_.limits(m.device); lim && lim->backend_bound) {
            // The Vulkan trap: the heap bounds it, the GTT pool would not.
            const auto gtt = ledger_.capacity_without_backend_bound(m.device);
            help.push_back(fmt::format(
                "the ROCm build of the engine (devices.{}.backend: rocm): it allocates from GTT, {} here{}, "
                "not from the {} Vulkan heap",
                m.device, human_bytes(gtt), engine.bytes + t.bytes <= gtt ? " — enough for this request" : "",
                human_bytes(lim->backend_bound->bytes)));
        }
        nlohmann::json d = t.details;
        d["model"] = m.name();
        d["device"] = m.device;
        d["engine_bytes"] = engine.bytes;
        d["engine_source"] = to_string(engine.source);
        d["request_bytes"] = t.bytes;
        d["capacity_bytes"] = cap;
        d["would_help"] = help;
        Error e(ErrorKind::insufficient_memory,
                fmt::format(
                    "model '{}': {} does not fit beside its weights on {}: {} ({}) + {} = {} > the {} the "
                    "device can ever give{}",
                    m.name(), t.why, m.device, human_bytes(engine.bytes), to_string(engine.source),
                    human_bytes(t.bytes), human_bytes(engine.bytes + t.bytes), human_bytes(cap),
                    help.empty() ? "" : fmt::format("; would fit: {}", fmt::join(help, "; "))),
                std::move(d));
        note("refused", m, e.what(), {{"request_bytes", t.bytes}}, true);
        throw e;
    }
    if (t.bytes <= ledger_.free(m.device)) {
        *holder = fmt::format("{}#{}", m.name(), next_transient_++);
        ledger_.reserve(m.device, *holder, {t.bytes, Source::formula, t.why});
        ledger_.mark_loaded(m.device, *holder);
        m.transients[*holder] = t.bytes;
        if (t.retained_bytes > 0) m.transient_retained[*holder] = t.retained_bytes;
        return Serve::granted;
    }
    // It fits once memory frees: evict idle engines for it, or wait.
    AdmissionInput in = admission_input(m);
    Need n;
    n.device = m.device;
    n.bytes = t.bytes;
    n.source = Source::formula;
    n.why = t.why;
    in.needs = {n};
    const Decision d = decide(in, ledger_);
    if (d.kind == Decision::Kind::evict_then_start) {
        m.wait_reason =
            fmt::format("evicting {} for this request's {}: {}", fmt::join(d.victims, ", "), t.why, d.reason);
        note("admission", m, "request: " + d.reason,
             {{"decision", "evict_then_start"}, {"victims", d.victims}});
        evict(d.victims, m, "evicted to make room for a request to '" + m.name() + "'");
    } else {
        m.wait_reason = "this request's " + t.why + ": " + d.reason;
    }
    return Serve::wait;
}

Broker::Serve Broker::try_serve(Model& m, const RequestNeeds& needs, std::string* holder) {
    if (shutting_down_) throw Error(ErrorKind::shutting_down, "loch is shutting down", {}, 5);
    const auto verdict = m.crashes.check(Clock::now());
    if (verdict.quarantined) {
        nlohmann::json d = {{"model", m.name()}};
        if (m.last_exit) d["last_exit"] = *m.last_exit;
        const auto retry = std::chrono::duration_cast<std::chrono::seconds>(verdict.retry_in).count();
        throw Error(ErrorKind::quarantined, verdict.message, d, static_cast<int>(std::max<long>(1, retry)));
    }
    switch (m.state) {
        case ModelState::ready:
            if (m.active < m.slots() && exclusive_ok(m)) {
                if (needs.transient && needs.transient->bytes > 0 &&
                    book_transient(m, *needs.transient, holder) != Serve::granted)
                    return Serve::wait;
                ++m.active;
                if (m.cfg->exclusive) each_device(m, [&](const std::string& d) { gpu_lock_[d] = m.name(); });
                return Serve::granted;
            }
            if (m.active < m.slots()) {
                const auto lock = gpu_lock_.find(m.device);
                m.wait_reason =
                    lock != gpu_lock_.end()
                        ? fmt::format("{} is held exclusively by '{}'", m.device, lock->second)
                        : fmt::format("exclusive: waiting for the other models' requests on {}", m.device);
            } else {
                m.wait_reason = fmt::format("all {} slot(s) busy", m.slots());
            }
            return Serve::wait;
        case ModelState::loading:
            m.wait_reason = fmt::format(
                "loading on {} for {:.0f} s{}", m.device,
                std::chrono::duration<double>(Clock::now() - m.load_started).count(),
                m.load_s ? fmt::format(" (the last load took {:.1f} s)", *m.load_s) : std::string());
            return Serve::wait;
        case ModelState::stopping:
            m.wait_reason = "stopping (" + m.stop_reason + "); starts again once it has exited";
            return Serve::wait;
        case ModelState::stopped:
        case ModelState::asleep:  // admitted like a start; woken instead of launched
            break;
    }
    if (verdict.wait > Clock::duration::zero()) {  // restart backoff; the tick retries
        m.wait_reason = fmt::format("restart backoff after a failure: starts in {} s",
                                    std::chrono::ceil<std::chrono::seconds>(verdict.wait).count());
        return Serve::wait;
    }
    if (!m.footprint) {
        m.wait_reason = "planning its memory footprint";
        return Serve::wait;
    }
    // An asleep engine's own small reservation is not in the way of its waking (decided without it).
    std::optional<MemoryFigure> residue;
    if (m.state == ModelState::asleep) {
        residue = ledger_.reservation(m.device, m.name());
        ledger_.release(m.name());
    }
    const AdmissionInput input = admission_input(m);
    const Decision d = decide(input, ledger_);
    if (residue && !(d.kind == Decision::Kind::start && d.device == m.device))
        ledger_.reserve(m.device, m.name(), *residue);
    switch (d.kind) {
        case Decision::Kind::start:
            if (m.state == ModelState::asleep) {
                m.wait_reason = "waking on " + m.device + ": " + d.reason;
                if (d.device == m.device)
                    begin_wake(m);
                else
                    begin_stop(m, "fits on " + d.device + " instead: restarted there");
                return Serve::wait;
            }
            if (d.devices.size() > 1) {
                for (const auto& split : input.splits) {
                    const auto devices = split_devices(split);
                    if (devices != d.devices) continue;
                    engines::Placement where = placement_of(devices.front());
                    for (std::size_t i = 1; i < devices.size(); ++i)
                        where.others.push_back(placement_of(devices[i]));
                    where.shares = split.shares;
                    m.wait_reason = "cold start split over " + fmt::format("{}", fmt::join(devices, " + ")) +
                                    ": " + d.reason;
                    begin_load(m, where, split.parts);
                    return Serve::wait;
                }
            }
            m.wait_reason = "cold start on " + d.device + ": " + d.reason;
            begin_load(m, d.device);
            return Serve::wait;
        case Decision::Kind::evict_then_start: {
            m.wait_reason =
                fmt::format("evicting {} to start on {}: {}", fmt::join(d.victims, ", "), d.device, d.reason);
            note("admission", m, d.reason, {{"decision", "evict_then_start"}, {"victims", d.victims}});
            evict(d.victims, m, "evicted to make room for '" + m.name() + "'");
            return Serve::wait;
        }
        case Decision::Kind::refuse: {
            nlohmann::json details = {{"model", m.name()},
                                      {"device", d.refusal.device},
                                      {"need_bytes", d.refusal.need},
                                      {"capacity_bytes", d.refusal.capacity},
                                      {"largest_free_bytes", d.refusal.largest_free},
                                      {"would_help", d.refusal.would_help},
                                      {"empty_capacity_bytes", d.refusal.empty_capacity},
                                      {"outside_bytes", d.refusal.outside},
                                      {"driver_reserved_bytes", d.refusal.driver_reserved},
                                      {"footprint_source", to_string(m.footprint->source)}};
            for (const auto& n : admission_input(m).needs)
                if (n.device == d.refusal.device) {
                    details["need_source"] = to_string(n.source);
                    details["need_detail"] = n.why;
                }
            std::string vulkan;
            if (const auto* lim = ledger_.limits(d.refusal.device); lim && lim->backend_bound) {
                vulkan = fmt::format(
                    "; the Vulkan heap ({}) bounds it: the ROCm build (devices.{}.backend: rocm) allocates "
                    "from "
                    "GTT, {} here",
                    human_bytes(lim->backend_bound->bytes), d.refusal.device,
                    human_bytes(ledger_.capacity_without_backend_bound(d.refusal.device)));
                details["would_help"].push_back(vulkan.substr(2));
            }
            for (const auto& p : d.refusal.split)
                details["split"].push_back({{"device", p.device},
                                            {"need_bytes", p.need},
                                            {"capacity_bytes", p.capacity},
                                            {"free_bytes", p.free}});
            Error refusal(ErrorKind::insufficient_memory,
                          fmt::format("model '{}' does not fit: {} (largest free now {}){}", m.name(),
                                      d.reason, human_bytes(d.refusal.largest_free), vulkan),
                          details);
            note("refused", m, refusal.what(), {{"need_bytes", d.refusal.need}, {"device", d.refusal.device}},
                 true);
            throw refusal;
        }
        case Decision::Kind::wait:
            m.wait_reason = d.reason;
            return Serve::wait;
    }
    return Serve::wait;
}

void Broker::pump() {
    const auto order = queue_.order(Clock::now());
    for (auto id : order) {
        auto it = waiters_.find(id);
        if (it == waiters_.end()) continue;
        auto w = it->second;
        if (w->granted || w->error) continue;
        try {
            if (try_serve(*w->model, w->needs, &w->transient) == Serve::granted) {
                w->granted = true;
                queue_.remove(id);
                w->timer.cancel();
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

// ---------------------------------------------------------------------------------------------------------
// Admission input

engines::Placement Broker::placement_of(const std::string& device) const {
    if (auto it = placements_.find(device); it != placements_.end()) return it->second;
    return placement_without_probe(device);
}

std::vector<std::string> Broker::allowed_devices(const Model& m) const {
    std::vector<std::string> out;
    const auto known = ledger_.devices();
    if (!m.cfg->devices.empty()) {
        out = m.cfg->devices;
    } else {
        for (const auto& d : known)
            if (d != "cpu") out.push_back(d);
    }
    // The CPU: when allowed explicitly, as a configured fallback, or when the machine has nothing else.
    const bool no_gpu = std::none_of(known.begin(), known.end(), [](const auto& d) { return d != "cpu"; });
    if ((m.cfg->cpu_fallback || (m.cfg->devices.empty() && no_gpu)) &&
        std::find(out.begin(), out.end(), "cpu") == out.end())
        out.push_back("cpu");
    return out;
}

AdmissionInput Broker::admission_input(const Model& m) const {
    AdmissionInput in;
    in.priority = rank(m.cfg->priority);
    if (m.footprint)
        for (const auto& n : m.footprint->needs) in.needs.push_back(need_on(m, n));
    // Keep room for pinned models: a device that a pinned model not running now is configured for comes
    // after the others (it will want that room, and nothing evicts it once it runs).
    std::set<std::string> pinned_room;
    for (const auto& [name, o] : models_)
        if (o.get() != &m && o->cfg->pinned && o->state == ModelState::stopped)
            pinned_room.insert(o->cfg->devices.begin(), o->cfg->devices.end());
    std::stable_partition(in.needs.begin(), in.needs.end(),
                          [&](const Need& n) { return !pinned_room.contains(n.device); });
    const auto now = Clock::now();
    for (const auto& [name, o] : models_) {
        if (o.get() == &m || o->state == ModelState::stopped) continue;
        const Model* op = o.get();  // (clang 14 cannot capture a structured binding)
        const bool wanted = std::any_of(waiters_.begin(), waiters_.end(),
                                        [&](const auto& w) { return w.second->model == op; });
        EngineView v;
        v.name = name;
        v.device = o->device;
        v.bytes = ledger_.reservation(o->device, name).value_or(MemoryFigure{}).bytes;
        for (const auto& d : devices_of(*o))
            if (d != o->device)
                v.also_on.emplace_back(d, ledger_.reservation(d, name).value_or(MemoryFigure{}).bytes);
        v.priority = rank(o->cfg->priority);
        v.evictable = (o->state == ModelState::ready || o->state == ModelState::asleep) && o->active == 0 &&
                      !o->cfg->pinned && !wanted;
        v.held_as = o->state != ModelState::ready ? std::string(to_string(o->state))
                    : o->active > 0               ? "busy"
                    : o->cfg->pinned              ? "pinned"
                    : wanted                      ? "wanted by a queued request"
                                                  : "idle";
        v.idle_s = std::chrono::duration<double>(now - o->last_used).count();
        v.load_s = o->load_s.value_or(1.0);
        in.engines.push_back(std::move(v));
    }
    in.devices_loading.assign(loading_devices_.begin(), loading_devices_.end());
    in.splits = split_candidates(m, in.needs);
    return in;
}

std::vector<std::string> Broker::devices_of(const Model& m) const {
    std::vector<std::string> out;
    each_device(m, [&](const std::string& d) { out.push_back(d); });
    return out;
}

std::vector<SplitNeed> Broker::split_candidates(const Model& m, const std::vector<Need>& needs) const {
    std::vector<SplitNeed> out;
    if (!m.footprint) return out;
    for (const auto& n : needs)  // one device has room now: it goes there, no split is asked for
        if (ledger_.has_device(n.device) && n.bytes <= ledger_.free(n.device)) return out;
    std::vector<std::string> gpus;
    for (const auto& d : allowed_devices(m))
        if (d != "cpu" && ledger_.has_device(d) && placement_of(d).backend != "cpu") gpus.push_back(d);
    // The most free first (the main device, listed first to the engine), of one backend: one
    // engine build runs them all.
    std::stable_sort(gpus.begin(), gpus.end(),
                     [&](const auto& a, const auto& b) { return ledger_.free(a) > ledger_.free(b); });
    if (!gpus.empty()) {
        const auto backend = placement_of(gpus.front()).backend;
        std::erase_if(gpus, [&](const auto& d) { return placement_of(d).backend != backend; });
    }
    for (std::size_t k = 2; k <= gpus.size(); ++k) {
        // Layers in shares of what is free on each device now; where some device has (almost) nothing free,
        // of what can ever be free there (the split then waits for, or evicts for, its room).
        const bool by_free = std::all_of(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(k),
                                         [&](const auto& d) { return ledger_.free(d) >= kGiB; });
        engines::Placement where = placement_of(gpus.front());
        for (std::size_t i = 0; i < k; ++i) {
            if (i > 0) where.others.push_back(placement_of(gpus[i]));
            const auto bytes = by_free ? ledger_.free(gpus[i]) : ledger_.capacity(gpus[i]);
            where.shares.push_back(std::max(1.0f, std::round(float(bytes) / float(kGiB) * 10.0f) / 10.0f));
        }
        auto parts = footprints_->split(*cfg_, *m.cfg, where);
        if (parts.size() != k) continue;  // this kind does not split (or the file cannot be planned)
        out.push_back({std::move(parts),
                       fmt::format("--split-mode layer --tensor-split {}", fmt::join(where.shares, ",")),
                       where.shares});
    }
    return out;
}

asio::awaitable<void> Broker::ensure_footprint(Model& m) {
    if (m.footprint) co_return;
    if (m.planning) {
        asio::steady_timer t(ex_);
        while (m.planning) {
            t.expires_after(20ms);
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        co_return;
    }
    m.planning = true;
    auto alive = alive_;
    // The dry run allocates on the devices it sizes (~0.5 GiB on a GPU): it never runs beside a load there,
    // and holds a reservation while it runs. (Cached results return at once.)
    const auto devices = allowed_devices(m);
    asio::steady_timer t(ex_);
    const auto busy = [&] {
        return std::any_of(devices.begin(), devices.end(),
                           [&](const auto& d) { return loading_devices_.contains(d); });
    };
    while (busy()) {
        t.expires_after(20ms);
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        if (!*alive) co_return;
    }
    const std::string holder = "estimate of " + m.name();
    const std::uint64_t holds = m.kind->estimate_gpu_bytes();
    std::vector<engines::Placement> placements;
    for (const auto& d : devices) {
        placements.push_back(placement_of(d));
        loading_devices_.insert(d);
        if (holds > 0 && d != "cpu" && ledger_.has_device(d))
            ledger_.reserve(
                d, holder,
                {holds, Source::configured, std::string(m.kind->name()) + " estimate on the device"});
    }
    Footprint fp;
    try {
        fp = co_await footprints_->estimate(*cfg_, *m.cfg, placements);
    } catch (const std::exception& e) {
        fp = m.kind->formula(*cfg_, *m.cfg, placements);
        fp.detail += std::string("; estimate failed: ") + e.what();
    }
    if (!*alive) co_return;
    ledger_.release(holder);
    for (const auto& d : devices) loading_devices_.erase(d);
    // Keep only the devices admission may use, in the model's preference order.
    m.footprint = std::move(fp);
    m.planning = false;
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
    begin_load(m, placement_of(device), {need});
}

void Broker::begin_load(Model& m, const engines::Placement& where, const std::vector<Need>& parts) {
    std::uint64_t total = 0;
    for (const auto& n : parts) {
        ledger_.reserve(n.device, m.name(), MemoryFigure{n.bytes, n.source, n.why});
        loading_devices_.insert(n.device);
        total += n.bytes;
    }
    m.state = ModelState::loading;
    m.device = where.device;
    m.where = where;
    m.facts = {};
    m.measured.reset();
    m.retained = 0;
    const auto devices = devices_of(m);
    std::shared_ptr<engines::EngineRun> engine;
    try {
        engine = launcher_->launch(ex_, engines::make_engine_spec(*cfg_, *m.cfg, where));
    } catch (const std::exception& e) {
        for (const auto& d : devices) loading_devices_.erase(d);
        ledger_.release(m.name());
        m.state = ModelState::stopped;
        fail_waiters(m, Error(ErrorKind::engine_failed,
                              fmt::format("model '{}' cannot be started: {}", m.name(), e.what()),
                              {{"model", m.name()}}));
        return;
    }
    m.load_started = Clock::now();
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
    asio::co_spawn(ex_, load(m, engine), asio::detached);
}

asio::awaitable<void> Broker::load(Model& m, std::shared_ptr<engines::EngineRun> engine) {
    auto alive = alive_;
    const auto res = co_await engine->start();
    if (!*alive) co_return;
    for (const auto& d : devices_of(m)) loading_devices_.erase(d);
    if (m.engine != engine) co_return;  // superseded (shut down meanwhile)
    if (!res.ready) {
        m.state = ModelState::stopped;
        const auto reserved = ledger_.reservation(m.device, m.name());
        ledger_.release(m.name());
        m.last_engine = engine;
        m.engine.reset();
        engines::ExitReport r = res.failure.value_or(engines::ExitReport{});
        m.last_exit = r;
        m.crashes.record(Clock::now(), r);
        ++m.loads_failed;
        ++m.exits[std::string(engines::to_string(r.kind))];
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
    if (const auto& gone = engine->exit_report()) {  // died between ready and now
        m.state = ModelState::stopped;
        ledger_.release(m.name());
        m.last_engine = engine;
        m.engine.reset();
        m.last_exit = *gone;
        m.crashes.record(Clock::now(), *gone);
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
    m.load_s = std::chrono::duration<double>(res.took).count();
    m.last_used = Clock::now();
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

void Broker::begin_stop(Model& m, std::string why) {
    if (!m.engine || m.state == ModelState::stopping || m.state == ModelState::stopped) return;
    m.unload_when_idle = false;
    m.idle_stop_reason.clear();
    note("stop", m, why);
    m.state = ModelState::stopping;
    m.stop_reason = std::move(why);
    auto engine = m.engine;
    asio::co_spawn(
        ex_, [engine]() -> asio::awaitable<void> { co_await engine->stop(); }, asio::detached);
}

void Broker::begin_evict(Model& m, std::string why) {
    const auto level = m.kind->sleep_level(*m.cfg);
    if (level == 0 || m.state != ModelState::ready || !m.engine) return begin_stop(m, std::move(why));
    note("sleep", m, fmt::format("{}: asleep at level {} instead of stopped", why, level));
    m.state = ModelState::stopping;
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
    m.load_started = Clock::now();
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
            m.sleep_level = 0;
            m.last_used = Clock::now();
            if (!ok) co_return begin_stop(m, "it did not wake up");
            pump();
        },
        asio::detached);
}

void Broker::on_exit(Model& m, const std::shared_ptr<engines::EngineRun>& engine,
                     const engines::ExitReport& r) {
    if (m.engine != engine) return;
    if (m.state == ModelState::loading) return;  // load() reports start-up failures
    ++m.exits[std::string(engines::to_string(r.kind))];
    if (r.is_failure()) {
        note("exit", m, r.summary, {{"exit", r}}, true);
        m.crashes.record(Clock::now(), r);
        note_quarantine(m);
    }
    m.last_exit = r;
    m.last_engine = engine;
    m.engine.reset();
    m.state = ModelState::stopped;
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
        begin_stop(*m, "unloaded on request");
    else if (m->state == ModelState::ready || m->state == ModelState::loading)
        m->unload_when_idle = true;  // once its requests end (a loading model: once its first ones have)
    co_return model_status(*m);
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
            for (auto& [n, m] : models_) begin_stop(*m, "loch is shutting down");
            for (auto& engine : running) co_await engine->wait_exit();
        },
        asio::use_awaitable);
}

}  // namespace loch::broker
