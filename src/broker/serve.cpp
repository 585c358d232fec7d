// broker/serve — one request's way to a slot, now: granted on a ready engine (its own memory booked beside
// it, or room made for that), or what it needs is started (a load, evictions, a split) and it waits; the
// rules that hold it back (quarantine, yielding to people, exclusive models, CPU threads, turns) and the
// refusal with the numbers when nothing can ever make room. Member functions of Broker (broker.hpp).
#include "broker/broker.hpp"
#include "broker/model_state.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/time_text.hpp"

namespace loch::broker {

Broker::Serve Broker::book_transient(Model& m, const engines::RequestCost& t, std::string* holder) {
    const auto engine = ledger_.reservation(m.device, m.name()).value_or(MemoryFigure{});
    refuse_if_never_fits(m, m.device, engine, t);
    // Its phases on the CPU (RequestCost::host_bytes): in host RAM beside what the engine keeps there.
    const bool host = t.host_bytes > 0 && m.device != "cpu" && ledger_.has_device("cpu");
    if (host) {
        engines::RequestCost on_host = t;
        on_host.bytes = t.host_bytes;
        on_host.why = t.host_why;
        refuse_if_never_fits(m, "cpu", ledger_.reservation("cpu", m.name()).value_or(MemoryFigure{}),
                             on_host);
    }
    if (t.bytes <= ledger_.free(m.device) && (!host || t.host_bytes <= ledger_.free("cpu"))) {
        *holder = fmt::format("{}#{}", m.name(), next_transient_++);
        ledger_.reserve(m.device, *holder, {t.bytes, Source::formula, t.why});
        ledger_.mark_loaded(m.device, *holder);
        if (host) {  // the same holder: released with the device's part when the request ends
            ledger_.reserve("cpu", *holder, {t.host_bytes, Source::formula, t.host_why});
            ledger_.mark_loaded("cpu", *holder);
        }
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
    if (host) n.host_bytes = t.host_bytes, n.host_why = t.host_why;
    in.needs = {n};
    const Decision d = decide(in, ledger_);
    if (d.kind == Decision::Kind::evict_then_start) {
        m.wait_reason =
            fmt::format("evicting {} for this request's {}: {}", fmt::join(d.victims, ", "), t.why, d.reason);
        note("admission", m, "request: " + d.reason,
             {{"decision", "evict_then_start"}, {"victims", d.victims}});
        evict(d.victims, m.name(), "evicted to make room for a request to '" + m.name() + "'");
    } else {
        m.wait_reason = "this request's " + t.why + ": " + d.reason;
        m.waits_for_room = true;
    }
    return Serve::wait;
}

Broker::Serve Broker::try_serve(Model& m, const RequestNeeds& needs, std::string* holder, bool aged) {
    if (shutting_down_) throw Error(ErrorKind::shutting_down, "loch is shutting down", {}, 5);
    const auto verdict = m.crashes.check(now());
    if (verdict.quarantined) throw quarantine_error(m, verdict);
    const config::Priority priority = priority_of(m, needs);
    m.waits_for_room = false;  // said again below while it still does (broker/turns.cpp reads it)
    // Batch work yields to people (yielding.cpp): where it would be granted or started now, it waits.
    const auto yield_to = priority == config::Priority::batch && !aged ? interactive_wants(m) : std::nullopt;
    const auto yielding = [&] {
        m.wait_reason = "batch work yields to interactive work: " + *yield_to +
                        " (it goes once that is done, or after waiting aging)";
        return Serve::wait;
    };
    switch (m.state) {
        case ModelState::ready: {
            auto cpu = m.active < m.slots() ? turn_wait(m, priority) : std::nullopt;
            if (m.active < m.slots() && exclusive_ok(m) && !cpu) {
                if (yield_to) return yielding();
                if (needs.transient && needs.transient->bytes > 0 &&
                    book_transient(m, *needs.transient, holder) != Serve::granted)
                    return Serve::wait;
                ++m.active;
                if (priority == config::Priority::interactive) {
                    ++m.active_interactive;
                    note_interactive_arrival();
                } else {
                    ++batch_active_;
                }
                if (exclusive(m)) each_device(m, [&](const std::string& d) { gpu_lock_[d] = m.name(); });
                return Serve::granted;
            }
            if (cpu) {
                m.wait_reason = std::move(*cpu);
            } else if (m.active < m.slots()) {
                const auto lock = gpu_lock_.find(m.device);
                m.wait_reason =
                    lock != gpu_lock_.end()
                        ? fmt::format("{} is held exclusively by '{}'", m.device, lock->second)
                        : fmt::format("exclusive: waiting for the other models' requests on {}", m.device);
            } else {
                m.wait_reason = fmt::format("all {} slot(s) busy", m.slots());
            }
            return Serve::wait;
        }
        case ModelState::loading:
            m.wait_reason = fmt::format(
                "loading on {} for {:.0f} s{}", m.device,
                std::chrono::duration<double>(now() - m.load_started).count(),
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
    if (auto none = no_build_reaches(m)) throw *none;
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
    if (policy_->one_model_at_a_time() && !one_model_at_a_time(m)) return Serve::wait;
    const AdmissionInput input = admission_input(m, priority, aged);
    const Decision d = decide(input, ledger_);
    if (yield_to && (d.kind == Decision::Kind::start || d.kind == Decision::Kind::evict_then_start)) {
        if (residue) ledger_.reserve(m.device, m.name(), *residue);
        read_ahead_for(m, d.device, "batch work yields to it");
        return yielding();
    }
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
            // Room taken from batch work is lent: once idle, this engine is the first to go for it.
            for (const auto& v : d.victims)
                if (auto it = models_.find(v);
                    it != models_.end() && rank(it->second->cfg->priority) < rank(m.cfg->priority))
                    m.borrowed_from_batch = true;
            evict(d.victims, m.name(), "evicted to make room for '" + m.name() + "'");
            read_ahead_for(m, d.device, "the engines evicted for it stop");
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
                                      {"footprint_source", to_string(m.footprint->source)},
                                      {"need_source", to_string(d.refusal.need_source)},
                                      {"need_detail", d.refusal.need_detail}};
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
            if (const auto* lim = ledger_.limits(d.refusal.device); lim && !lim->advice.empty()) {
                vulkan += "; " + lim->advice;
                details["would_help"].push_back(lim->advice);
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
            m.waits_for_room = true;
            // A wait names no device; the files a launch reads are the same on each allowed one.
            if (!input.needs.empty()) read_ahead_for(m, input.needs.front().device, "it waits for room");
            return Serve::wait;
    }
    return Serve::wait;
}

}  // namespace loch::broker
