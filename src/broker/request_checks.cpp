// broker/request_checks — what is refused about a request before it waits or anything starts: a route its
// model's kind does not serve, max_tokens beyond the slot context, the kind's own refusal from the config,
// and a request whose own memory can never fit where its model runs or would run (with the numbers).
// Member functions of Broker (broker.hpp).
#include "broker/broker.hpp"
#include "broker/model_state.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/time_text.hpp"

namespace loch::broker {

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
    // The largest that could ever fit leaves one token for the prompt; the slot it would take holds the
    // whole max_tokens and a prompt of at least one.
    throw Error(ErrorKind::context_length_exceeded,
                fmt::format("max_tokens ({}) can never fit the slot context of model '{}' ({} tokens): send "
                            "max_tokens below {} (less the prompt), or {}",
                            *needs.max_tokens, m.name(), *slot_ctx, *slot_ctx,
                            m.kind->context_advice(*m.cfg, *needs.max_tokens + 1)),
                {{"model", m.name()},
                 {"max_tokens", *needs.max_tokens},
                 {"slot_ctx", *slot_ctx},
                 {"slot_ctx_source", source},
                 {"largest_max_tokens", *slot_ctx - 1},
                 {"needed_slot_ctx", *needs.max_tokens + 1}});
}

std::optional<engines::Refusal> BrokerView::check_before_start(const std::string& name,
                                                               const engines::RequestView& r) {
    Broker::Model* m = broker_.find(name);
    if (!m) return std::nullopt;
    engines::RequestView view = r;
    view.model = m->cfg;
    return m->kind->check_before_start(*m->cfg, view);
}

std::optional<engines::RequestCost> BrokerView::request_cost(const std::string& name,
                                                             const engines::RequestView& r) {
    Broker::Model* m = broker_.find(name);
    if (!m) return std::nullopt;
    // Costed for the device it runs on (the first it may use while cold): placement flags (clip_on_cpu …)
    // change what a GPU holds; on the CPU everything counts.
    engines::RequestView placed = r;
    if (const auto* where = broker_.devices_book_.probed_placement(broker_.device_for_request(*m)))
        placed.where = where;
    return m->kind->request_cost(*m->cfg, placed);
}

std::string Broker::device_for_request(const Model& m) const {
    if (!m.device.empty() && m.state != ModelState::stopped) return m.device;  // a running model's own
    const auto devices = allowed_devices(m);  // a cold one: the first it may use
    return devices.empty() ? "cpu" : devices.front();
}

void Broker::check_runnable(Model& m, const RequestNeeds& needs) {
    if (!needs.transient || needs.transient->bytes == 0) return;
    const auto& t = *needs.transient;
    const std::string device = device_for_request(m);
    const auto* lim = ledger_.limits(device);
    if (lim && lim->largest_allocation && t.largest_tensor > lim->largest_allocation->bytes) {
        // The Vulkan trap: one tensor larger than the driver lets one buffer be, whatever is free.
        const std::uint64_t most = lim->largest_allocation->bytes;
        auto help = t.under_allocation ? t.under_allocation(most) : std::vector<std::string>{};
        if (device.starts_with("amd:"))  // (a GPU only Vulkan reaches has no other build to name)
            help.insert(help.begin(),
                        fmt::format("the ROCm build of the engine (devices.{}.backend: rocm): HIP "
                                    "has no such per-buffer limit on this device",
                                    device));
        nlohmann::json d = t.details;
        d["model"] = m.name();
        d["device"] = device;
        d["largest_tensor_bytes"] = t.largest_tensor;
        d["largest_allocation_bytes"] = most;
        d["largest_allocation_source"] = lim->largest_allocation->detail;
        d["request_bytes"] = t.bytes;
        d["would_help"] = help;
        Error e(
            ErrorKind::insufficient_memory,
            fmt::format("model '{}': {} cannot run with the Vulkan build on {}: it needs one {} buffer ({}), "
                        "above the largest single allocation Vulkan gives there, {} ({}); would work: {}",
                        m.name(), t.why, device, human_bytes(t.largest_tensor), t.largest_tensor_why,
                        human_bytes(most), lim->largest_allocation->detail, fmt::join(help, "; ")),
            std::move(d));
        note("refused", m, e.what(), {{"request_bytes", t.bytes}, {"largest_tensor_bytes", t.largest_tensor}},
             true);
        throw e;
    }
    // A running engine's own booking decides in book_transient. A stopped one (never started, or evicted:
    // its last device is still in m.device) is checked here, on arrival, before anything is evicted or
    // loaded for a request that can never run.
    const bool running = m.state != ModelState::stopped && m.state != ModelState::stopping;
    if (running || !m.footprint) return;
    // A cold model: its weights as it would be booked, beside this request's compute, against the device.
    // (Weights that alone exceed the device are the model's refusal, made by admission with its own numbers.)
    for (const auto& n : m.footprint->needs)
        if (n.device == device) {
            const auto engine = need_on(m, n);
            if (engine.bytes <= ledger_.capacity(device))
                refuse_if_never_fits(m, device, MemoryFigure{engine.bytes, engine.source, engine.why}, t);
        }
}

void Broker::refuse_if_never_fits(Model& m, const std::string& device, const MemoryFigure& engine,
                                  const engines::RequestCost& t) {
    auto e = never_fits_error(m, device, engine, t);
    if (!e) return;
    note("refused", m, e->what(), {{"request_bytes", t.bytes}}, true);
    throw *e;
}

std::optional<Error> Broker::never_fits_error(const Model& m, const std::string& device,
                                              const MemoryFigure& engine,
                                              const engines::RequestCost& t) const {
    const std::uint64_t cap = ledger_.capacity(device);
    if (engine.bytes + t.bytes <= cap) return std::nullopt;
    // Never: the weights and this request's compute together exceed what the device can ever give.
    const std::uint64_t budget = cap > engine.bytes ? cap - engine.bytes : 0;
    auto help = t.would_help ? t.would_help(budget) : std::vector<std::string>{};
    const auto* lim = ledger_.limits(device);
    if (lim && lim->backend_bound) {
        // The Vulkan trap: the heap bounds it, the GTT pool would not.
        const auto gtt = ledger_.capacity_without_backend_bound(device);
        help.push_back(fmt::format(
            "the ROCm build of the engine (devices.{}.backend: rocm): it allocates from GTT, {} here{}, "
            "not from the {} Vulkan heap",
            device, human_bytes(gtt), engine.bytes + t.bytes <= gtt ? " — enough for this request" : "",
            human_bytes(lim->backend_bound->bytes)));
    }
    if (lim && !lim->advice.empty()) help.push_back(lim->advice);
    if (lim && lim->total.detail.find("cgroup") != std::string::npos)  // a container's limit is the total
        help.push_back(
            fmt::format("a memory limit of at least {} for loch's container or unit: its engines are its "
                        "children and are charged to it (docs/deploy.md)",
                        human_bytes(lim->total.bytes + (engine.bytes + t.bytes - cap))));
    nlohmann::json d = t.details;
    d["model"] = m.name();
    d["device"] = device;
    d["engine_bytes"] = engine.bytes;
    d["engine_source"] = to_string(engine.source);
    d["request_bytes"] = t.bytes;
    d["capacity_bytes"] = cap;
    d["capacity_source"] = ledger_.capacity_detail(device);
    d["would_help"] = help;
    Error e(
        ErrorKind::insufficient_memory,
        fmt::format("model '{}': {} does not fit beside its weights on {}: {} ({}) + {} = {} > the {} the "
                    "device can ever give ({}){}",
                    m.name(), t.why, device, human_bytes(engine.bytes), to_string(engine.source),
                    human_bytes(t.bytes), human_bytes(engine.bytes + t.bytes), human_bytes(cap),
                    ledger_.capacity_detail(device),
                    help.empty() ? "" : fmt::format("; would fit: {}", fmt::join(help, "; "))),
        std::move(d));
    return e;
}

}  // namespace loch::broker
