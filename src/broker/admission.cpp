#include "broker/admission.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace loch::broker {

double victim_score(const EngineView& e) {
    const double load = std::max(e.load_s, 0.001);
    const double weight = std::max(e.weight, 0.001);
    return e.idle_s / (load * weight);
}

std::vector<std::string> split_devices(const SplitNeed& split) {
    std::vector<std::string> out;
    for (const auto& p : split.parts) out.push_back(p.device);
    return out;
}

std::uint64_t bytes_on(const EngineView& e, const std::string& device) {
    if (e.device == device) return e.bytes;
    for (const auto& [d, b] : e.also_on)
        if (d == device) return b;
    return 0;
}

std::string_view to_string(Decision::Kind k) {
    switch (k) {
        case Decision::Kind::start:
            return "start";
        case Decision::Kind::evict_then_start:
            return "evict_then_start";
        case Decision::Kind::wait:
            return "wait";
        case Decision::Kind::refuse:
            return "refuse";
    }
    return "?";
}

void to_json(nlohmann::json& j, const Decision& d) {
    j = {{"decision", to_string(d.kind)}, {"reason", d.reason}};
    if (!d.device.empty()) j["device"] = d.device;
    if (d.devices.size() > 1) j["devices"] = d.devices;
    if (d.kind == Decision::Kind::evict_then_start) {
        j["victims"] = d.victims;
        j["freed_bytes"] = d.freed_bytes;
    }
    if (d.kind == Decision::Kind::refuse) {
        j["need_bytes"] = d.refusal.need;
        j["capacity_bytes"] = d.refusal.capacity;
        j["largest_free_bytes"] = d.refusal.largest_free;
        j["empty_capacity_bytes"] = d.refusal.empty_capacity;
        j["outside_bytes"] = d.refusal.outside;
        j["driver_reserved_bytes"] = d.refusal.driver_reserved;
        j["would_help"] = d.refusal.would_help;
        for (const auto& p : d.refusal.split)
            j["split"].push_back({{"device", p.device},
                                  {"need_bytes", p.need},
                                  {"capacity_bytes", p.capacity},
                                  {"free_bytes", p.free}});
    }
}

namespace {

bool loading_on(const AdmissionInput& in, const std::string& device) {
    return std::find(in.devices_loading.begin(), in.devices_loading.end(), device) !=
           in.devices_loading.end();
}

bool host_fits_now(const Need& n, const Ledger& ledger) {
    const auto h = host_part(n, ledger);
    return !h || h->bytes <= ledger.free(h->device);
}

bool host_fits_ever(const Need& n, const Ledger& ledger) {
    const auto h = host_part(n, ledger);
    return !h || h->bytes <= ledger.capacity(h->device);
}

struct EvictionPlan {
    std::vector<std::string> victims;
    std::uint64_t freed = 0;
    double cost = 0;                 // Σ 1/score: what the victims are worth keeping
    bool fits_empty_device = false;  // chosen by the empty-device rule, not by the free figure
};

// An idle model of this request's importance (or more) that people use at least kHotterBy times as much as
// the model asked for: a victim only after everything else (rule 2a).
bool kept_for_people(const AdmissionInput& in, const EngineView& e) {
    constexpr std::uint32_t kHotterBy = 2;
    return e.priority >= in.priority && e.recent_uses > 0 &&
           e.recent_uses >= kHotterBy * std::max<std::uint32_t>(in.recent_uses, 1);
}

// A more important engine that a lower-priority request may stop all the same (rule 2b): idle for at least
// twice its reload time. Batch work waits for a person's idle model only as long as that model's reload would
// cost the person (ski rental: waiting longer cannot be cheaper than a swap), the person's time counted
// double. Without it the batch waited `aging` each time — on the H100 two-people trace it ran 0.22× as many
// items as Ollama's policy, the device idle 60 % of the time while two people's idle models held it.
constexpr double kPeopleTimeWeight = 2;
bool idle_past_break_even(const AdmissionInput& in, const EngineView& e) {
    return e.priority > in.priority && e.idle_s >= kPeopleTimeWeight * e.load_s;
}

// Why an engine on the device stays, as the wait's reason says it.
std::string holder_state(const AdmissionInput& in, const EngineView& e) {
    if (!e.evictable) return e.held_as;
    if (e.priority <= in.priority) return "idle";
    return fmt::format("more important, idle {:.1f} s: it goes for this at {:.1f} s, twice its reload",
                       e.idle_s, kPeopleTimeWeight * e.load_s);
}

// The smallest prefix of the best victims (by score) that makes `need` fit on its device. `chosen`: victims
// already chosen for other parts of a split (what they free here counts; they are not chosen twice).
std::optional<EvictionPlan> plan_eviction(const AdmissionInput& in, const Ledger& ledger, const Need& need,
                                          const EvictionPlan& chosen = {}) {
    const auto is_chosen = [&](const EngineView& e) {
        return std::find(chosen.victims.begin(), chosen.victims.end(), e.name) != chosen.victims.end();
    };
    std::vector<const EngineView*> candidates;
    std::uint64_t freed_here = 0;  // by the victims already chosen
    for (const auto& e : in.engines) {
        if (bytes_on(e, need.device) == 0) continue;
        if (is_chosen(e))
            freed_here += bytes_on(e, need.device);
        else if (e.evictable && (e.priority <= in.priority || idle_past_break_even(in, e)))
            candidates.push_back(&e);
    }
    // In three classes, each by importance (batch work before a person's idle model), then the best victims:
    // first what nobody is using, then batch engines between items (idle for less than a reload: the batch
    // wants them back at once, and would take the room back from the engine started here — two swaps for
    // one), last the idle models people use most (kept_for_people: a chat model beside an occasional
    // picture).
    const auto victim_class = [&](const EngineView& e) {
        if (kept_for_people(in, e)) return 2;
        return e.priority < in.priority && e.idle_s < e.load_s ? 1 : 0;
    };
    std::stable_sort(candidates.begin(), candidates.end(), [&](const EngineView* a, const EngineView* b) {
        if (const int ca = victim_class(*a), cb = victim_class(*b); ca != cb) return ca < cb;
        if (a->priority != b->priority) return a->priority < b->priority;
        return victim_score(*a) > victim_score(*b);
    });
    EvictionPlan plan = chosen;
    const std::uint64_t free = ledger.free(need.device);
    for (const auto* e : candidates) {
        if (free + freed_here >= need.bytes) break;
        plan.victims.push_back(e->name);
        freed_here += bytes_on(*e, need.device);
        plan.freed += e->bytes;
        for (const auto& [d, b] : e->also_on) plan.freed += b;
        plan.cost += 1.0 / std::max(victim_score(*e), 1e-9);
    }
    if (free + freed_here >= need.bytes) return plan;
    // By the numbers even every candidate is not enough — yet the model fits the device with nothing of
    // loch's on it but what must stay. Then what the ledger calls "outside" is likely the candidates' own
    // memory beyond their reservations (a figure no probe attributed): stop them all, and admission runs
    // again on what the probe shows once they are gone (start, or refuse with the numbers — never a wait
    // until max_wait). (One device only: a split's parts are planned by the numbers.)
    if (candidates.empty() || !chosen.victims.empty()) return std::nullopt;
    std::uint64_t staying = 0;
    for (const auto& e : in.engines)
        if (std::find(plan.victims.begin(), plan.victims.end(), e.name) == plan.victims.end())
            staying += bytes_on(e, need.device);
    if (need.bytes + staying <= ledger.empty_capacity(need.device)) {
        plan.fits_empty_device = true;
        return plan;
    }
    return std::nullopt;
}

// Every part of the split fits after stopping idle engines (a victim on two of its devices counts on both).
std::optional<EvictionPlan> plan_split_eviction(const AdmissionInput& in, const Ledger& ledger,
                                                const SplitNeed& split) {
    EvictionPlan plan;
    for (const auto& part : split.parts) {
        if (!ledger.has_device(part.device) || part.bytes > ledger.empty_capacity(part.device) ||
            loading_on(in, part.device))
            return std::nullopt;
        auto more = plan_eviction(in, ledger, part, plan);
        if (!more) return std::nullopt;
        plan = std::move(*more);
    }
    return plan;
}

// "nvidia:0 needs 20.0 GiB (5.0 GiB free), nvidia:1 needs 18.0 GiB (17.0 GiB free)"
std::string parts_text(const SplitNeed& split, const Ledger& ledger) {
    std::vector<std::string> parts;
    for (const auto& p : split.parts)
        parts.push_back(
            fmt::format("{} needs {} ({} free)", p.device, human_bytes(p.bytes),
                        ledger.has_device(p.device) ? human_bytes(ledger.free(p.device)) : "unknown"));
    return fmt::format("{}", fmt::join(parts, ", "));
}

bool split_fits_now(const AdmissionInput& in, const Ledger& ledger, const SplitNeed& split, bool& busy) {
    if (split.parts.empty()) return false;
    for (const auto& p : split.parts)
        if (!ledger.has_device(p.device) || p.bytes > ledger.free(p.device)) return false;
    for (const auto& p : split.parts)
        if (loading_on(in, p.device)) {
            busy = true;
            return false;
        }
    return true;
}

bool split_could_ever_fit(const Ledger& ledger, const SplitNeed& split) {
    if (split.parts.empty()) return false;
    for (const auto& p : split.parts)
        if (!ledger.has_device(p.device) || p.bytes > ledger.capacity(p.device)) return false;
    return true;
}

// How far a split is from ever fitting: the sum of its parts' shortfalls against what can ever be free.
std::uint64_t split_short(const Ledger& ledger, const SplitNeed& split) {
    std::uint64_t short_by = 0;
    for (const auto& p : split.parts) {
        const auto cap = ledger.has_device(p.device) ? ledger.capacity(p.device) : 0;
        short_by += p.bytes > cap ? p.bytes - cap : 0;
    }
    return short_by;
}

// "waiting for 6.1 GiB on nvidia:0 (1.2 GiB free): held by chat (busy), code (pinned)" — on the allowed
// device that is closest to fitting, with who holds its memory and why they stay.
std::string wait_reason(const AdmissionInput& in, const Ledger& ledger) {
    const Need* best = nullptr;
    std::uint64_t best_short = 0;
    std::optional<Need> host;  // the need's host part, when that is what is short
    for (const auto& n : in.needs) {
        if (!ledger.has_device(n.device) || n.bytes > ledger.capacity(n.device)) continue;
        const auto free = ledger.free(n.device);
        std::uint64_t short_by = n.bytes > free ? n.bytes - free : 0;
        auto h = host_part(n, ledger);
        if (h && short_by == 0 && h->bytes > ledger.free(h->device))
            short_by = h->bytes - ledger.free(h->device);
        else
            h.reset();
        if (!best || short_by < best_short) best = &n, best_short = short_by, host = h;
    }
    if (best && host) best = &*host;
    if (!best) return "memory is held by engines that are busy or more important, or by other programs";
    std::vector<std::string> holders;
    for (const auto& e : in.engines)
        if (const auto held = bytes_on(e, best->device); held > 0)
            holders.push_back(fmt::format("{} {} ({})", e.name, human_bytes(held), holder_state(in, e)));
    if (ledger.outside(best->device) > 0)
        holders.push_back("other programs " + ledger.outside_text(best->device));
    return fmt::format(
        "waiting for {} on {} ({} free, needs {}): held by {}", human_bytes(best_short), best->device,
        human_bytes(ledger.free(best->device)), human_bytes(best->bytes),
        holders.empty() ? std::string("nobody loch knows of") : fmt::format("{}", fmt::join(holders, ", ")));
}

}  // namespace

bool admitted_without(AdmissionInput in, const Ledger& ledger, const std::string& engine,
                      const std::vector<std::string>& soon_idle) {
    const std::string own_prefix = engine + "#";  // its running requests' holders (Broker::transients)
    for (auto& e : in.engines) {
        if (std::find(soon_idle.begin(), soon_idle.end(), e.name) != soon_idle.end()) e.evictable = true;
        if (e.name == engine || e.name.starts_with(own_prefix)) {
            e.evictable = false;
            e.batch_only = false;
        } else if (kept_for_people(in, e)) {
            e.evictable = false;
        }
    }
    const auto kind = decide(in, ledger).kind;
    return kind == Decision::Kind::start || kind == Decision::Kind::evict_then_start;
}

Decision decide(const AdmissionInput& in, const Ledger& ledger) {
    Decision d;
    if (in.needs.empty()) {
        d.kind = Decision::Kind::refuse;
        d.reason = "no allowed device is known to loch";
        return d;
    }
    // 1. Fits now.
    bool fits_but_busy = false;
    for (const auto& n : in.needs) {
        if (!ledger.has_device(n.device)) continue;
        if (n.bytes <= ledger.free(n.device) && host_fits_now(n, ledger)) {
            if (loading_on(in, n.device)) {
                fits_but_busy = true;
                continue;
            }
            d.kind = Decision::Kind::start;
            d.device = n.device;
            d.reason = fmt::format("fits on {}: needs {}, {} free", n.device, human_bytes(n.bytes),
                                   human_bytes(ledger.free(n.device)));
            if (const auto h = host_part(n, ledger))
                d.reason += fmt::format(", and {} in host RAM ({} free)", human_bytes(h->bytes),
                                        human_bytes(ledger.free(h->device)));
            return d;
        }
    }
    // Before 2, memory on its way: engines stopping on a device free enough there (with their host RAM) →
    // wait for them. The pass that evicted them runs again before a GPU engine has exited (~0.1–1 s), sees
    // the memory still held and would stop one more engine for room that is already coming.
    for (const auto& n : in.needs) {
        if (!ledger.has_device(n.device)) continue;
        std::uint64_t coming = 0, coming_host = 0;
        std::vector<std::string> stopping;
        for (const auto& e : in.engines) {
            if (!e.stopping || bytes_on(e, n.device) == 0) continue;
            coming += bytes_on(e, n.device);
            coming_host += n.device == "cpu" ? 0 : bytes_on(e, "cpu");
            stopping.push_back(e.name);
        }
        const auto h = host_part(n, ledger);
        if (stopping.empty() || ledger.free(n.device) + coming < n.bytes ||
            (h && ledger.free(h->device) + coming_host < h->bytes))
            continue;
        d.kind = Decision::Kind::wait;
        d.reason = fmt::format("waiting for {} stopping on {} to free {}: needs {}, {} free",
                               fmt::join(stopping, ", "), n.device, human_bytes(coming), human_bytes(n.bytes),
                               human_bytes(ledger.free(n.device)));
        return d;
    }
    // 2. Fits after evicting idle engines; of several devices, the one whose victims are cheapest to lose.
    std::optional<EvictionPlan> best;
    const Need* best_need = nullptr;
    for (const auto& n : in.needs) {
        if (!ledger.has_device(n.device) || n.bytes > ledger.empty_capacity(n.device)) continue;
        if (loading_on(in, n.device)) {
            // A load in flight holds its reservation; evicting for it now would race with it.
            continue;
        }
        if (!host_fits_ever(n, ledger)) continue;
        auto plan = plan_eviction(in, ledger, n);
        // Its host part too: victims chosen for the device free what they hold in RAM as well.
        if (const auto h = host_part(n, ledger); plan && h && !host_fits_now(n, ledger))
            plan = plan_eviction(in, ledger, *h, *plan);
        if (plan && (!best || plan->cost < best->cost)) {
            best = std::move(plan);
            best_need = &n;
        }
    }
    // Stop the plan's victims, then start on `devices` (one, or a split's).
    const auto evicting = [&](const EvictionPlan& plan, std::vector<std::string> devices) {
        d.kind = Decision::Kind::evict_then_start;
        d.device = devices.front();
        if (devices.size() > 1) d.devices = std::move(devices);
        d.victims = plan.victims;
        d.freed_bytes = plan.freed;
    };
    // 2a. People's work displaces batch work, not the idle engines people use most: when the plan would stop
    // an engine as important as this request that people use at least kHotterBy times as much as the model
    // asked for (a chat model beside an occasional picture), while engines on that device that are busy with
    // batch work only (which yields to this request now: broker/yielding.cpp), with the idle less important
    // ones, hold enough, it waits for them instead. Between models people use alike (two people, a chat
    // model each: issue 54's two-people trace) the idle one goes, as it would without batch work: waiting
    // for the batch to drain would add its items' time to this request and a reload to the batch, and the
    // other person's next request finds a cold model either way.
    if (best && !best->fits_empty_device && in.priority > 0) {
        const auto important_victim =
            std::any_of(best->victims.begin(), best->victims.end(), [&](const auto& v) {
                return std::any_of(in.engines.begin(), in.engines.end(), [&](const EngineView& e) {
                    return e.name == v && kept_for_people(in, e);
                });
            });
        std::uint64_t lower = 0;
        std::vector<std::string> yielding;
        for (const auto& e : in.engines)
            if (e.batch_only && bytes_on(e, best_need->device) > 0) {
                lower += bytes_on(e, best_need->device);
                yielding.push_back(e.name);
            }
        for (const auto& e : in.engines)
            if (e.priority < in.priority && e.evictable) lower += bytes_on(e, best_need->device);
        if (important_victim && !yielding.empty() &&
            ledger.free(best_need->device) + lower >= best_need->bytes) {
            d.kind = Decision::Kind::wait;
            d.reason = fmt::format(
                "waiting for the batch work of {} on {} to finish (it yields to this request) "
                "rather than stopping {}",
                fmt::join(yielding, ", "), best_need->device, fmt::join(best->victims, ", "));
            return d;
        }
    }
    if (best) {
        evicting(*best, {best_need->device});
        d.reason =
            best->fits_empty_device
                ? fmt::format(
                      "fits the empty {} ({} of {}): stopping every idle engine there ({}), "
                      "then deciding on what the probe shows",
                      d.device, human_bytes(best_need->bytes), human_bytes(ledger.empty_capacity(d.device)),
                      d.victims.size())
                : fmt::format("fits on {} after stopping {} idle engine(s) freeing {}: needs {}, {} free",
                              d.device, d.victims.size(), human_bytes(best->freed),
                              human_bytes(best_need->bytes), human_bytes(ledger.free(d.device)));
        return d;
    }
    // 3. No single device now, even after evictions: a split whose every device has room now, fewest devices
    // first; else one after evictions (a victim on two of its devices frees both), the cheapest victims. Not
    // while a single device would do but for a load in flight on it: that one is worth the wait.
    const bool single_after_load = std::any_of(in.needs.begin(), in.needs.end(), [&](const Need& n) {
        return ledger.has_device(n.device) && loading_on(in, n.device) &&
               n.bytes <= ledger.empty_capacity(n.device);
    });
    const std::vector<SplitNeed> none;
    const auto& splits = single_after_load ? none : in.splits;
    for (const auto& split : splits) {
        if (!split_fits_now(in, ledger, split, fits_but_busy)) continue;
        d.kind = Decision::Kind::start;
        d.devices = split_devices(split);
        d.device = d.devices.front();
        d.reason = fmt::format("fits on no single device now; split over {} ({}): {}",
                               fmt::join(d.devices, " + "), split.how, parts_text(split, ledger));
        return d;
    }
    const SplitNeed* best_split = nullptr;
    for (const auto& split : splits) {
        if (best_split && split.parts.size() > best_split->parts.size()) break;
        auto plan = plan_split_eviction(in, ledger, split);
        if (plan && (!best || plan->cost < best->cost)) {
            best = std::move(plan);
            best_split = &split;
        }
    }
    if (best) {
        evicting(*best, split_devices(*best_split));
        d.reason = fmt::format(
            "fits on no single device now; split over {} ({}) after stopping {} idle "
            "engine(s) freeing {}: {}",
            fmt::join(d.devices, " + "), best_split->how, d.victims.size(), human_bytes(best->freed),
            parts_text(*best_split, ledger));
        return d;
    }
    // 4. Never fits: larger than every allowed device (and every split) even with nothing of loch running.
    bool could_ever = false;
    const Need* closest = nullptr;
    std::uint64_t largest_free = 0;
    // A need whose device could hold it but whose host part never fits the host's RAM is judged by that
    // part (its numbers are the refusal's).
    std::vector<Need> limiting;
    for (const auto& n : in.needs) {
        const auto h = host_part(n, ledger);
        const bool device_ever = ledger.has_device(n.device) && n.bytes <= ledger.capacity(n.device);
        if (device_ever && h && !host_fits_ever(n, ledger)) {
            limiting.push_back(*h);
            limiting.back().why = "in host RAM beside " + n.device + ": " + n.host_why;
        } else {
            limiting.push_back(n);
        }
    }
    for (const auto& n : limiting) {
        if (!ledger.has_device(n.device)) continue;
        largest_free = std::max(largest_free, ledger.free(n.device));
        const auto cap = ledger.capacity(n.device);
        if (n.bytes <= cap) could_ever = true;
        if (!closest ||
            (n.bytes > cap ? n.bytes - cap : 0) < (closest->bytes > ledger.capacity(closest->device)
                                                       ? closest->bytes - ledger.capacity(closest->device)
                                                       : 0))
            closest = &n;
    }
    const SplitNeed* closest_split = nullptr;
    for (const auto& split : in.splits) {
        if (split_could_ever_fit(ledger, split)) could_ever = true;
        if (!closest_split || split_short(ledger, split) < split_short(ledger, *closest_split))
            closest_split = &split;
    }
    if (!could_ever) {
        d.kind = Decision::Kind::refuse;
        if (closest_split)
            for (const auto& p : closest_split->parts)
                d.refusal.split.push_back({p.device, p.bytes,
                                           ledger.has_device(p.device) ? ledger.capacity(p.device) : 0,
                                           ledger.has_device(p.device) ? ledger.free(p.device) : 0});
        if (!closest) {
            d.reason = "none of the model's allowed devices is known to loch";
            return d;
        }
        const auto cap = ledger.capacity(closest->device);
        const auto* lim = ledger.limits(closest->device);
        d.device = closest->device;
        d.refusal.need = closest->bytes;
        d.refusal.capacity = cap;
        d.refusal.largest_free = largest_free;
        d.refusal.device = closest->device;
        d.refusal.need_source = closest->source;
        d.refusal.need_detail = closest->why;
        d.refusal.would_help = what_would_help(*closest, cap);
        if (closest->device == "cpu" && !closest->why.empty() &&
            std::none_of(in.needs.begin(), in.needs.end(), [](const Need& n) { return n.device == "cpu"; }))
            d.refusal.would_help.push_back(fmt::format(
                "less of it in host RAM: {} stays there ({}); put more of it "
                "on the device (args.n_gpu_layers, the sd placement flags) or give the host more RAM",
                human_bytes(closest->bytes), closest->why));
        d.refusal.empty_capacity = ledger.empty_capacity(closest->device);
        d.refusal.outside = ledger.outside(closest->device);
        d.refusal.driver_reserved = lim ? lim->driver_reserved.bytes : 0;
        // A container's limit as the total is the surprise worth naming (cap_to_cgroup).
        const bool cgroup_total = lim && lim->total.detail.find("cgroup") != std::string::npos;
        d.reason = fmt::format(
            "needs {} on {} but at most {} can ever be free there (total {}{}, driver reserves {}, "
            "configured "
            "reserve {}, other programs hold {})",
            human_bytes(closest->bytes), closest->device, human_bytes(cap),
            human_bytes(lim ? lim->total.bytes : 0), cgroup_total ? ": " + lim->total.detail : "",
            human_bytes(d.refusal.driver_reserved), human_bytes(lim ? lim->reserve.bytes : 0),
            ledger.outside_text(closest->device));
        if (closest_split) {
            std::vector<std::string> parts;
            for (const auto& p : d.refusal.split)
                parts.push_back(fmt::format("{} needs {}, at most {} can be free", p.device,
                                            human_bytes(p.need), human_bytes(p.capacity)));
            d.reason += fmt::format("; split over {} ({}) it does not fit either: {}",
                                    fmt::join(split_devices(*closest_split), " + "), closest_split->how,
                                    fmt::join(parts, ", "));
        }
        return d;
    }
    // 5. Wait: memory is held by busy engines, higher-priority engines, a load in flight, or outside use.
    d.kind = Decision::Kind::wait;
    d.reason = fits_but_busy ? "another load is in flight on the device; loads are serialized per device"
                             : wait_reason(in, ledger);
    const bool one_device_may = std::any_of(in.needs.begin(), in.needs.end(), [&](const Need& n) {
        return ledger.has_device(n.device) && n.bytes <= ledger.capacity(n.device) &&
               host_fits_ever(n, ledger);
    });
    if (!fits_but_busy && !one_device_may && !in.splits.empty()) {
        const SplitNeed* nearest = nullptr;
        for (const auto& split : in.splits)
            if (split_could_ever_fit(ledger, split)) {
                nearest = &split;
                break;
            }
        if (nearest)
            d.reason = fmt::format("fits on no single device; waiting for room for a split over {}: {}",
                                   fmt::join(split_devices(*nearest), " + "), parts_text(*nearest, ledger));
    }
    return d;
}

std::optional<Need> host_part(const Need& n, const Ledger& ledger) {
    if (n.host_bytes == 0 || n.device == "cpu" || !ledger.has_device("cpu")) return std::nullopt;
    Need h;
    h.device = "cpu";
    h.bytes = n.host_bytes;
    h.why = n.host_why;
    return h;
}

std::vector<std::string> what_would_help(const Need& n, std::uint64_t capacity) {
    std::vector<std::string> out;
    if (n.bytes <= capacity) return out;
    const std::uint64_t over = n.bytes - capacity;
    const std::uint64_t fixed = n.bytes - std::min(n.bytes, n.kv_bytes);
    // Context: KV scales linearly with the total context.
    if (n.kv_bytes > 0 && n.ctx > 0 && fixed < capacity) {
        const double per_token = double(n.kv_bytes) / double(n.ctx);
        const auto ctx_fit = static_cast<std::uint64_t>(double(capacity - fixed) / per_token);
        if (ctx_fit >= 256) {
            out.push_back(
                fmt::format("a smaller context: at most {} tokens in total (now {}; KV cache {} per token)",
                            ctx_fit, n.ctx, human_bytes(static_cast<std::uint64_t>(per_token))));
            if (n.slots > 1)
                out.push_back(
                    fmt::format("fewer slots: {} slots share {} tokens; with 1 slot of {} tokens it fits",
                                n.slots, n.ctx, ctx_fit));
        }
    }
    // Quantization: weights shrink roughly with bits per weight.
    if (n.weights_bytes > over) {
        const double keep = double(n.weights_bytes - over) / double(n.weights_bytes);
        out.push_back(
            fmt::format("a smaller quantization: the weights ({}) must shrink to {:.0f}% of their size (e.g. "
                        "Q8_0→Q4_K_M ≈ 56%)",
                        human_bytes(n.weights_bytes), keep * 100.0));
    }
    // CPU layers: keep part of the layers in system memory.
    if (n.layers > 0 && n.weights_bytes > 0 && n.device != "cpu") {
        const double per_layer = double(n.weights_bytes) / double(n.layers);
        const auto layers_off = static_cast<std::uint64_t>(double(over) / per_layer) + 1;
        out.push_back(
            fmt::format("CPU layers: keep about {} of {} layers on the CPU (allow cpu fallback, "
                        "--n-gpu-layers {})",
                        layers_off, n.layers, n.layers > layers_off ? n.layers - layers_off : 0));
    }
    if (out.empty())
        out.push_back(fmt::format("a device with at least {} usable (this one has {})", human_bytes(n.bytes),
                                  human_bytes(capacity)));
    return out;
}

}  // namespace loch::broker
