// broker/serve_decision — the rules of serve_decision.hpp, as effects.
#include "broker/serve_decision.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/time_text.hpp"

namespace loch::broker {

namespace {

effect::Wait yielding(const ServeFacts& f) {
    return {"batch work yields to interactive work: " + *f.yields_to +
            " (it goes once that is done, or after waiting aging)"};
}

// Its own memory on the ready engine's device: booked now, room made for it, or a wait.
ServeEffects request_memory(const ServeFacts& f, ServeQuestions& ask) {
    if (auto never = ask.request_memory_never_fits()) {
        nlohmann::json extra = {
            {"request_bytes", never->details().value("request_bytes", f.request_memory->bytes)}};
        return {effect::Note{"refused", never->what(), std::move(extra), true},
                effect::Refuse{std::move(*never)}};
    }
    if (ask.request_memory_fits_now()) return {effect::BookRequestMemory{}, effect::Grant{}};
    const Decision d = ask.admit_request_memory();
    const auto& why = f.request_memory->why;
    if (d.kind == Decision::Kind::evict_then_start)
        return {effect::Wait{fmt::format("evicting {} for this request's {}: {}", fmt::join(d.victims, ", "),
                                         why, d.reason)},
                effect::Note{"admission",
                             "request: " + d.reason,
                             {{"decision", "evict_then_start"}, {"victims", d.victims}}},
                effect::Evict{d.victims, fmt::format("evicted to make room for a request to '{}'", f.model)}};
    return {effect::Wait{"this request's " + why + ": " + d.reason, true}};
}

ServeEffects ready(const ServeFacts& f, ServeQuestions& ask) {
    const bool free_slot = f.active < f.slots;
    auto turn = free_slot ? ask.turn_wait() : std::nullopt;
    if (free_slot && ask.exclusive_ok() && !turn) {
        if (f.yields_to) return {yielding(f)};
        if (f.request_memory && f.request_memory->bytes > 0) return request_memory(f, ask);
        return {effect::Grant{}};
    }
    if (turn) return {effect::Wait{std::move(*turn)}};
    if (free_slot) {
        const auto holder = ask.exclusive_holder();
        return {effect::Wait{
            holder ? fmt::format("{} is held exclusively by '{}'", f.device, *holder)
                   : fmt::format("exclusive: waiting for the other models' requests on {}", f.device)}};
    }
    return {effect::Wait{fmt::format("all {} slot(s) busy", f.slots)}};
}

Error no_room(const ServeFacts& f, const Decision& d, ServeQuestions& ask) {
    const auto& r = d.refusal;
    nlohmann::json details = {{"model", std::string(f.model)},
                              {"device", r.device},
                              {"need_bytes", r.need},
                              {"capacity_bytes", r.capacity},
                              {"largest_free_bytes", r.largest_free},
                              {"would_help", r.would_help},
                              {"empty_capacity_bytes", r.empty_capacity},
                              {"outside_bytes", r.outside},
                              {"driver_reserved_bytes", r.driver_reserved},
                              {"footprint_source", std::string(f.footprint_source)},
                              {"need_source", to_string(r.need_source)},
                              {"need_detail", r.need_detail}};
    std::string more;
    const auto advice = ask.device_advice(r.device);
    if (advice.vulkan_heap) {
        const auto rocm = fmt::format(
            "the Vulkan heap ({}) bounds it: the ROCm build (devices.{}.backend: rocm) allocates from GTT, "
            "{} "
            "here",
            human_bytes(*advice.vulkan_heap), r.device, human_bytes(advice.without_vulkan_heap));
        more += "; " + rocm;
        details["would_help"].push_back(rocm);
    }
    if (!advice.advice.empty()) {
        more += "; " + advice.advice;
        details["would_help"].push_back(advice.advice);
    }
    for (const auto& p : r.split)
        details["split"].push_back({{"device", p.device},
                                    {"need_bytes", p.need},
                                    {"capacity_bytes", p.capacity},
                                    {"free_bytes", p.free}});
    return Error(ErrorKind::insufficient_memory,
                 fmt::format("model '{}' does not fit: {} (largest free now {}){}", f.model, d.reason,
                             human_bytes(r.largest_free), more),
                 std::move(details));
}

ServeEffects start(const ServeFacts& f, const Admitted& a) {
    const Decision& d = a.decision;
    if (f.state == ModelState::asleep) {
        effect::Wait wait{fmt::format("waking on {}: {}", f.device, d.reason)};
        if (d.device == f.device) return {std::move(wait), effect::Wake{}};
        return {std::move(wait), effect::Restart{"fits on " + d.device + " instead: restarted there"}};
    }
    if (d.devices.size() > 1)
        for (const auto& split : a.input.splits)
            if (split_devices(split) == d.devices)
                return {effect::Wait{fmt::format("cold start split over {}: {}", fmt::join(d.devices, " + "),
                                                 d.reason)},
                        effect::StartSplit{split}};
    return {effect::Wait{"cold start on " + d.device + ": " + d.reason}, effect::Start{d.device}};
}

// Stopped or asleep: admission decides.
ServeEffects cold(const ServeFacts& f, ServeQuestions& ask) {
    if (f.backoff > std::chrono::steady_clock::duration::zero())
        return {effect::Wait{fmt::format("restart backoff after a failure: starts in {} s",
                                         std::chrono::ceil<std::chrono::seconds>(f.backoff).count())}};
    if (auto none = ask.no_build_reaches()) return {effect::Refuse{std::move(*none)}};
    if (!f.planned) return {effect::Wait{"planning its memory footprint"}};
    if (f.one_model_at_a_time) {
        const auto others = ask.other_engines();
        if (!others.idle.empty() || !others.busy.empty()) {
            ServeEffects out{
                effect::Wait{fmt::format("one model at a time: waiting for {} to stop",
                                         fmt::join(others.idle.empty() ? others.busy : others.idle, ", "))}};
            if (!others.idle.empty())
                out.push_back(effect::Evict{others.idle, "one model at a time (the fifo_lock policy)"});
            return out;
        }
    }
    const Admitted a = ask.admit();
    const Decision& d = a.decision;
    const bool starts = d.kind == Decision::Kind::start || d.kind == Decision::Kind::evict_then_start;
    if (f.yields_to && starts) return {effect::ReadAhead{d.device, "batch work yields to it"}, yielding(f)};
    switch (d.kind) {
        case Decision::Kind::start:
            return start(f, a);
        case Decision::Kind::evict_then_start:
            return {effect::Wait{fmt::format("evicting {} to start on {}: {}", fmt::join(d.victims, ", "),
                                             d.device, d.reason)},
                    effect::Note{
                        "admission", d.reason, {{"decision", "evict_then_start"}, {"victims", d.victims}}},
                    effect::Evict{d.victims, fmt::format("evicted to make room for '{}'", f.model),
                                  ask.evicts_batch_work(d.victims)},
                    effect::ReadAhead{d.device, "the engines evicted for it stop"}};
        case Decision::Kind::refuse: {
            Error refusal = no_room(f, d, ask);
            return {effect::Note{"refused",
                                 refusal.what(),
                                 {{"need_bytes", d.refusal.need}, {"device", d.refusal.device}},
                                 true},
                    effect::Refuse{std::move(refusal)}};
        }
        case Decision::Kind::wait:
            break;
    }
    ServeEffects out{effect::Wait{d.reason, true}};
    // A wait names no device; the files a launch reads are the same on each allowed one.
    if (!a.input.needs.empty())
        out.push_back(effect::ReadAhead{a.input.needs.front().device, "it waits for room"});
    return out;
}

}  // namespace

ServeEffects decide_serve(const ServeFacts& f, ServeQuestions& ask) {
    if (f.shutting_down)
        return {effect::Refuse{Error(ErrorKind::shutting_down, "loch is shutting down", {}, 5)}};
    if (f.quarantined) return {effect::Refuse{*f.quarantined}};
    switch (f.state) {
        case ModelState::ready:
            return ready(f, ask);
        case ModelState::loading:
            return {effect::Wait{
                fmt::format("loading on {} for {:.0f} s{}", f.device, f.loading_for.count(),
                            f.last_load_s ? fmt::format(" (the last load took {:.1f} s)", *f.last_load_s)
                                          : std::string())}};
        case ModelState::stopping:
            return {
                effect::Wait{fmt::format("stopping ({}); starts again once it has exited", f.stop_reason)}};
        case ModelState::stopped:
        case ModelState::asleep:  // admitted like a start; woken instead of launched
            break;
    }
    return cold(f, ask);
}

}  // namespace loch::broker
