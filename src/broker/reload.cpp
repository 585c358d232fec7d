// Broker::reload — serving a new config without a restart (SIGHUP). What needs a new engine waits for the
// running one to finish its requests; nothing running is cut.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "engines/spec.hpp"

namespace loch::broker {

namespace {

// What the engine would be started with, minus what differs per run (port, secret): equal signatures mean
// the running engine is the one the new entry would start.
std::string launch_signature(const config::Config& cfg, const config::ModelConfig& m,
                             const engines::Placement& where) {
    nlohmann::json j = {{"engine", m.engine},
                        {"path", m.path.string()},
                        {"memory", m.memory},
                        {"concurrency", m.concurrency},
                        {"devices", m.devices}};
    try {
        auto spec = engines::make_engine_spec(cfg, m, where, 1);
        for (auto it = spec.env.begin(); it != spec.env.end();)
            it = !spec.api_key.empty() && it->second == spec.api_key ? spec.env.erase(it) : std::next(it);
        j["argv"] = spec.argv;
        j["env"] = spec.env;
        j["health"] = spec.health_path;
    } catch (const std::exception& e) {
        j["launch_error"] = e.what();
    }
    return j.dump();
}

}  // namespace

void Broker::apply_pending_config(Model& m) {
    if (!m.next_cfg || m.state != ModelState::stopped) return;
    m.cfg = std::exchange(m.next_cfg, nullptr);
    m.kind = &engines::kind_of(*m.cfg);
    m.footprint.reset();  // planned again for the new entry
    m.peak.clear();       // what the old one measured says nothing about the new one
    m.facts = {};
    m.crashes.clear();
}

asio::awaitable<nlohmann::json> Broker::reload(config::Config next) {
    co_return co_await asio::co_spawn(
        ex_,
        [this, next = std::move(next)]() mutable -> asio::awaitable<nlohmann::json> {
            configs_.push_back(std::make_shared<const config::Config>(std::move(next)));
            const config::Config& old = *cfg_;
            cfg_ = configs_.back().get();
            conversations_.configure(cfg_->slot_save);
            nlohmann::json out = {{"added", nlohmann::json::array()},
                                  {"removed", nlohmann::json::array()},
                                  {"restarting", nlohmann::json::array()},
                                  {"updated", nlohmann::json::array()},
                                  {"unchanged", nlohmann::json::array()}};
            for (const auto& mc : cfg_->models) {
                auto it = models_.find(mc.name);
                if (it == models_.end()) {
                    models_[mc.name] = std::make_unique<Model>(mc, cfg_->restart);
                    models_[mc.name]->last_used = now();
                    out["added"].push_back(mc.name);
                    continue;
                }
                Model& m = *it->second;
                const bool was_retired = std::exchange(m.retired, false);
                const auto where = placement_of(m.device.empty() ? "cpu" : m.device);
                const bool same = !was_retired &&
                                  launch_signature(old, *m.cfg, where) == launch_signature(*cfg_, mc, where);
                if (same || m.state == ModelState::stopped) {
                    const bool kind_same = &engines::kind_of(mc) == m.kind;
                    if (same && kind_same) {
                        m.cfg = &mc;  // settings of the broker's own (priority, keep_alive …) apply now
                        m.next_cfg = nullptr;
                    } else {
                        m.next_cfg = &mc;
                        apply_pending_config(m);
                    }
                    out[was_retired ? "added" : same ? "unchanged" : "updated"].push_back(mc.name);
                    continue;
                }
                // Its engine runs with the old launch: restart once its requests end.
                m.next_cfg = &mc;
                out["restarting"].push_back(mc.name);
                if (m.active == 0 && m.state == ModelState::ready)
                    begin_stop(m, "its config changed (reload)");
                else
                    m.unload_when_idle = true, m.idle_stop_reason = "its config changed (reload)";
            }
            for (auto& [name, m] : models_) {
                const std::string& n = name;  // (clang 14 cannot capture a structured binding)
                if (m->retired || std::any_of(cfg_->models.begin(), cfg_->models.end(),
                                              [&](const auto& mc) { return mc.name == n; }))
                    continue;
                m->retired = true;
                out["removed"].push_back(name);
                fail_waiters(*m, Error(ErrorKind::model_not_found,
                                       "model '" + name + "' was removed from the config (reload)",
                                       {{"model", name}}));
                if (m->state == ModelState::ready && m->active == 0)
                    begin_stop(*m, "removed from the config (reload)");
                else if (m->state != ModelState::stopped)
                    m->unload_when_idle = true, m->idle_stop_reason = "removed from the config (reload)";
            }
            // Devices: a new reserve or budget applies at once (the next decision reads it).
            for (const auto& id : ledger_.devices()) {
                const DeviceLimits* cur = ledger_.limits(id);
                if (!cur) continue;
                DeviceLimits l = *cur;
                const auto dc = cfg_->device(id);
                l.reserve = {dc.reserve, Source::configured, "devices." + id + ".reserve"};
                l.cap.reset();
                if (dc.budget)
                    l.cap = MemoryFigure{*dc.budget, Source::configured, "devices." + id + ".budget"};
                ledger_.set_device(std::move(l));
            }
            for (const auto& [kind, names] : out.items())
                if (!names.empty()) spdlog::info("reload: {} {}", kind, names.dump());
            warn_limits_that_never_fit();
            pump();
            co_return out;
        },
        asio::use_awaitable);
}

}  // namespace loch::broker
