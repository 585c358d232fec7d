// broker/observation — the broker's half of what devices and engines report, each tick: the device
// snapshots, each engine's measured memory against its reservation (the runtime guard: a measured figure
// above the booking replaces it at once; an over-committed device admits nothing and sheds idle holders),
// peaks remembered per footprint key, keep-alive expiry and quarantine. Member functions of Broker
// (broker.hpp); the state machine they feed is broker.cpp.
#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "broker/never_fits.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/time_text.hpp"

namespace loch::broker {

namespace {
constexpr std::size_t kNamedProcesses = 5;               // per device, largest first
constexpr std::uint64_t kCpuProcessFloor = 64ull << 20;  // the CPU's named programs: 64 MiB resident or more
}  // namespace

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------------------
// Devices and engines as measured

void Broker::refresh_devices() {
    last_refresh_ = now();
    std::vector<DeviceSnapshot> snap;
    try {
        snap = devices_->snapshot();
    } catch (const std::exception& e) {
        spdlog::warn("device probe failed: {}", e.what());
        return;
    }
    for (const auto& d : snap) {
        const std::string backend = backend_of(d, *cfg_);
        if (!ledger_.has_device(d.id)) {
            DeviceLimits l = limits_of(d, *cfg_, backend);
            ledger_.set_device(std::move(l));
        }
        if (d.used) ledger_.observe_used(d.id, d.used->bytes);
        if (!d.driver.empty()) devices_book_.observe_driver(d.id, d.driver);
        if (backend != "cpu" || d.id == "cpu")
            devices_book_.observe_placement(d.id, broker::placement_of(d, backend));
    }
    observe_engines(snap);
    observe_holds(snap);
    name_other_processes(snap);
}

void Broker::name_other_processes(const std::vector<DeviceSnapshot>& snap) {
    // Everything loch accounts for itself: its own process, its engines' groups, its jobs' groups.
    std::set<int> own = {static_cast<int>(::getpid())};
    for (const auto& [name, m] : models_)
        if (m->engine && m->state != ModelState::stopped)
            if (const auto pid = m->engine->pid())
                for (int p : devices_->group_members(*pid)) own.insert(p);
    for (const auto& [id, h] : holds_.live())
        if (h->spec.pgid)
            for (int p : devices_->group_members(*h->spec.pgid)) own.insert(p);
    const auto named = [&](const std::vector<std::pair<int, std::uint64_t>>& uses) {
        std::vector<OtherProcess> out;
        for (const auto& [pid, bytes] : uses) {
            if (own.contains(pid) || out.size() >= kNamedProcesses) continue;
            const auto info = devices_->describe(pid);
            out.push_back({pid, info ? info->user : "?", info ? info->command : "(gone)", bytes});
        }
        return out;
    };
    for (const auto& d : snap) {
        if (d.id == "cpu") continue;
        std::vector<std::pair<int, std::uint64_t>> uses(d.process_bytes.begin(), d.process_bytes.end());
        std::sort(uses.begin(), uses.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        ledger_.set_other_processes(d.id, named(uses));
    }
    // The CPU: the largest resident programs (a scan of every /proc entry, the costliest part of a tick:
    // every 10 s at most while busy, every 2 minutes while idle — it only names them; how much memory others
    // hold comes from the device's own reading).
    const auto scan_every = busy(now()) ? std::chrono::seconds(10) : std::chrono::seconds(120);
    if (ledger_.has_device("cpu") && now() - cpu_scan_at_ > scan_every) {
        cpu_scan_at_ = now();
        // Only programs of some size: a shell or an editor is not what holds a machine's memory.
        auto top = devices_->largest_resident(kNamedProcesses + own.size());
        std::erase_if(top, [](const auto& p) { return p.second < kCpuProcessFloor; });
        ledger_.set_other_processes("cpu", named(top));
    }
}

std::optional<MemoryFigure> Broker::group_use(const std::vector<int>& members, const std::string& device,
                                              const std::vector<DeviceSnapshot>& snap,
                                              std::string_view whose) const {
    std::uint64_t total = 0;
    bool any = false;
    if (device == "cpu") {
        for (int p : members)
            if (auto rss = devices_->resident_bytes(p)) total += *rss, any = true;
    } else {
        for (const auto& d : snap)
            if (d.id == device)
                for (int p : members)
                    if (auto it = d.process_bytes.find(p); it != d.process_bytes.end())
                        total += it->second, any = true;
    }
    if (!any) return std::nullopt;
    return MemoryFigure{total, Source::measured,
                        fmt::format("{} on {} by {} {} process(es)", device == "cpu" ? "RSS" : "use", device,
                                    whose, members.size())};
}

void Broker::observe_engines(const std::vector<DeviceSnapshot>& snap) {
    for (auto& [name, m] : models_) {
        if (!m->engine || m->state == ModelState::stopped || m->device.empty()) continue;
        const auto pid = m->engine->pid();
        if (!pid) continue;
        // The whole process group: servers such as vLLM hold their memory in worker processes. (RSS summed
        // over processes counts shared pages more than once: never under.)
        const auto members = devices_->group_members(*pid);
        if (m->device != "cpu" && m->where.split()) {
            // A split: each device's own use raises that device's reservation (no peak is remembered for
            // a split: its launch changes with the free memory it was split by).
            each_device(*m, [&](const std::string& dev) {
                if (auto on = group_use(members, dev, snap, "the engine's")) guard_measured(*m, dev, *on);
            });
            continue;
        }
        auto seen = group_use(members, m->device, snap, "the engine's");
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
    relieve_overcommit(device, m.name());
}

void Broker::relieve_overcommit(const std::string& device, const std::string& grown) {
    const std::uint64_t cap = ledger_.capacity(device);
    const std::uint64_t own = ledger_.own(device);
    if (own <= cap) return;
    std::vector<IdleHolder> idle;
    for (auto& [name, o] : models_) {
        if (o->name() == grown || o->state != ModelState::ready || o->active > 0 || o->cfg->pinned) continue;
        const auto devs = devices_of(*o);
        if (std::find(devs.begin(), devs.end(), device) != devs.end())
            idle.push_back({o->name(), o->last_used,
                            ledger_.reservation(device, o->name()).value_or(MemoryFigure{}).bytes});
    }
    // Over the device's capacity: nothing new is admitted there (its free memory is 0), and idle holders go
    // (broker/tick_decision.hpp).
    const auto relief = broker::relieve_overcommit(cap, own, std::move(idle));
    note_event(
        "overcommitted", {{"holder", grown}},
        fmt::format("{} is over its capacity by {} after '{}' grew; admitting nothing more there{}", device,
                    human_bytes(relief->over), grown,
                    relief->victims.empty()
                        ? " (no idle holder to evict)"
                        : fmt::format(" and evicting {} idle holder(s)", relief->victims.size())),
        {{"device", device}, {"capacity_bytes", cap}, {"booked_bytes", own}, {"over_by_bytes", relief->over}},
        true);
    evict(relief->victims, grown,
          fmt::format("{} over capacity after '{}' grew past its reservation", device, grown));
}

std::optional<engines::KillEvidence> Broker::kill_evidence(const Model& m) {
    const auto after = devices_->memory_cgroup();
    if (!m.oom_kills_at_launch || !after || !after->oom_kills) return std::nullopt;
    engines::KillEvidence e;
    e.oom_kills_before = *m.oom_kills_at_launch;
    e.oom_kills_after = *after->oom_kills;
    e.limit = after->limit;
    e.limit_file = after->limit_file;
    if (m.measured) {
        e.used = m.measured->bytes;
        e.used_how = "its last measured use: " + m.measured->detail;
    }
    // At the kill the cgroup stood at its limit; what it holds once the engine is gone was someone else's.
    if (e.limit && after->current && *after->current < *e.limit) {
        const auto rest = *e.limit - *after->current;
        if (!e.used || rest > *e.used) {
            e.used = rest;
            e.used_how = fmt::format("the limit less what the cgroup holds without it ({})",
                                     human_bytes(*after->current));
        }
    }
    if (auto r = ledger_.reservation(m.device, m.name())) e.reserved = r->bytes;
    return e;
}

void Broker::note_peak(Model& m, const MemoryFigure& f) {
    auto& p = m.peak[m.device];
    if (f.bytes <= p.bytes) return;
    p = f;
    if (auto k = footprint_key(m, m.device)) remembered_.raise(*k, f);
}

std::optional<FootprintKey> Broker::footprint_key(const Model& m, const std::string& device) const {
    const engines::Placement where = devices_book_.placement_of(device);
    try {
        auto spec = m.kind->launch(*cfg_, *m.cfg, where, 0);

        FootprintKey k{m.name(),    device, std::string(m.kind->name()),    std::move(spec.argv),
                       m.cfg->path, {},     devices_book_.driver_of(device)};
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

std::vector<IdleFacts> Broker::idle_facts() const {
    std::vector<IdleFacts> out;
    out.reserve(models_.size());
    for (const auto& [name, m] : models_) {
        const Model* mp = m.get();  // (clang 14 cannot capture a structured binding)
        const bool wanted = std::any_of(waiters_.begin(), waiters_.end(),
                                        [&](const auto& w) { return w.second->model == mp; });
        out.push_back(
            {m->name(), m->state, m->active, m->cfg->pinned, m->keep_alive(), m->last_used, wanted});
    }
    return out;
}

void Broker::evict_expired() {
    for (auto& stop : expired_engines(idle_facts(), now()))
        begin_stop(*models_.at(stop.model), std::move(stop.why), true);
}

void Broker::note_quarantine(Model& m) {
    const auto v = m.crashes.check(now());
    if (!v.quarantined) return;
    note("quarantine", m, v.message,
         {{"retry_in_s", std::chrono::duration_cast<std::chrono::seconds>(v.retry_in).count()}}, true);
    // The same answer as every request after them: with Retry-After and the last exit.
    fail_waiters(m, quarantine_error(m, v));
}

}  // namespace loch::broker
