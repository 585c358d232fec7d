// broker/placement — where a model may run and what it needs there: the devices its config allows, the
// admission input (each device's ledger and the model's needs on it), split candidates across devices, and
// the footprint (plan, dry run, remembered peaks) computed once per start off the loop. Member functions of
// Broker (broker.hpp).
#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "broker/never_fits.hpp"

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

// ---------------------------------------------------------------------------------------------------------
// Admission input

engines::Placement Broker::placement_of(const std::string& device) const {
    return devices_book_.placement_of(device);
}

void Broker::warn_limits_that_never_fit() {
    for (auto& [name, m] : models_) {
        std::vector<DeviceRoom> rooms;
        for (const auto& d : allowed_devices(*m)) rooms.push_back({placement_of(d), ledger_.capacity(d)});
        for (const auto& line : limits_that_never_fit(*m->kind, *cfg_, *m->cfg, rooms))
            note("config_warning", *m, "can never run as configured: " + line, {}, true);
    }
}

std::vector<std::string> Broker::allowed_devices(const Model& m) const {
    return broker::allowed_devices(*cfg_, *m.cfg, ledger_.devices(),
                                   [&](const std::string& d) { return placement_of(d).backend; });
}

std::optional<Error> Broker::no_build_reaches(const Model& m) const {
    if (!allowed_devices(m).empty()) return std::nullopt;
    std::vector<std::string> missing;
    std::string backend;  // the first such device's
    nlohmann::json builds = nlohmann::json::array();
    for (const auto& b : cfg_->builds_of(m.cfg->engine))
        builds.push_back({{"program", b.program.string()}, {"backend", b.backend}, {"from", b.from}});
    for (const auto& d : ledger_.devices()) {
        const auto b = placement_of(d).backend;
        if (d == "cpu" || cfg_->reaches(m.cfg->engine, b)) continue;
        missing.push_back(d + " (" + b + ")");
        if (backend.empty()) backend = b;
    }
    if (missing.empty()) return std::nullopt;
    return Error(
        ErrorKind::engine_missing,
        fmt::format("model '{}' cannot start: no {} build reaches {} — the builds found are for other "
                    "backends. Build one: bash scripts/setup.sh --backend {} (or set the model's "
                    "devices: [cpu] to run it on the CPU)",
                    m.name(), m.cfg->engine, fmt::join(missing, ", "), backend),
        {{"model", m.name()}, {"engine", m.cfg->engine}, {"devices", missing}, {"builds", builds}});
}

AdmissionInput Broker::admission_input(const Model& m, std::optional<config::Priority> priority,
                                       bool aged) const {
    AdmissionInput in;
    // A batch request that has waited `aging` is admitted as an interactive one: it may stop idle
    // interactive engines too (else an idle chat model resident for its keep_alive starves a batch). The
    // anchors' policies (Policy) know no priorities.
    in.priority =
        aged || !policy_->has_priorities()
            ? rank(config::Priority::interactive)
            : std::min(rank(m.cfg->priority), rank(priority.value_or(config::Priority::interactive)));
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
    in.engines = holder_views(&m, nullptr);
    in.recent_uses = m.recent_people_uses(now());
    in.devices_loading = devices_book_.loading();
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
    while (!m.footprint) {
        if (!m.planning) {
            co_await plan_footprint(m);
            continue;
        }
        const auto planned = m.planned;  // this planning's signal, even if the next one has begun
        co_await planned->async_wait(asio::as_tuple(asio::use_awaitable));
    }
}

asio::awaitable<void> Broker::plan_footprint(Model& m) {
    const config::ModelConfig* entry = m.cfg;
    m.planning = true;
    m.planned = std::make_shared<asio::steady_timer>(ex_, asio::steady_timer::time_point::max());
    auto alive = alive_;
    // The dry run allocates on the devices it sizes (~0.5 GiB on a GPU): it never runs beside a load there,
    // and holds a reservation while it runs. (Cached results return at once.)
    const auto devices = allowed_devices(m);
    core::Timer t(ex_, clock_);
    const auto busy = [&] {
        return std::any_of(devices.begin(), devices.end(),
                           [&](const auto& d) { return devices_book_.loading(d); });
    };
    while (busy()) {
        t.expires_after(20ms);
        co_await t.wait();
        if (!*alive) co_return;
    }
    const std::string holder = "estimate of " + m.name();
    const std::uint64_t holds = m.kind->estimate_gpu_bytes();
    std::vector<engines::Placement> placements;
    for (const auto& d : devices) {
        placements.push_back(placement_of(d));
        devices_book_.begin_loading(d);
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
    for (const auto& d : devices) devices_book_.end_loading(d);
    // A reload that gave it a new entry meanwhile: this plan was of the old one (ensure_footprint plans
    // again).
    if (m.cfg == entry) m.footprint = std::move(fp);
    m.planning = false;
    m.planned->cancel();
}

}  // namespace loch::broker
