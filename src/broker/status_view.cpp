// The broker's state as JSON (/loch/status, /v1/models, /loch/plan, log tails): read-only views; and the
// recent events they show.
#include <filesystem>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "core/time_text.hpp"

#include <spdlog/spdlog.h>

namespace loch::broker {

using namespace std::chrono_literals;

void Broker::note(std::string_view kind, const Model& m, std::string message, nlohmann::json extra,
                  bool warn) {
    // Marks on the dashboard's memory plot: where a model lost its room or was refused.
    // A model never started has no device: its mark is on every device's plot.
    if (kind == "evict" || kind == "refused" || kind == "queue_timeout" || kind == "oom_at_load")
        history_.mark(now(), std::string(kind), m.name(), m.device, message);
    events_.note(kind, {{"model", m.name()}}, std::move(message), std::move(extra), warn);
    sample_history();
}

void Broker::note_event(std::string_view kind, nlohmann::json subject, std::string message,
                        nlohmann::json extra, bool warn) {
    events_.note(kind, subject, std::move(message), std::move(extra), warn);
    sample_history();
}

void Broker::sample_history() {
    const auto t = now();
    for (const auto& device : ledger_.devices()) {
        std::vector<HistoryHolder> holders;
        if (const auto* rs = ledger_.reservations(device))
            for (const auto& r : *rs)
                holders.push_back({r.engine, r.figure.bytes, std::string(to_string(r.figure.source))});
        holders.push_back({"outside", ledger_.outside(device), "measured"});
        history_.memory(t, device, std::move(holders));
    }
    history_.queue(t, queue_.size());
}

asio::awaitable<nlohmann::json> Broker::history() {
    co_return co_await asio::co_spawn(
        ex_,
        [this]() -> asio::awaitable<nlohmann::json> {
            sample_history();
            co_return history_.to_json(now());
        },
        asio::use_awaitable);
}

nlohmann::json Broker::model_status(const Model& m) const {
    nlohmann::json j = {{"name", m.name()},
                        {"aliases", m.cfg->aliases},
                        {"state", to_string(m.state)},
                        {"priority", config::to_string(m.cfg->priority)},
                        {"pinned", m.cfg->pinned},
                        {"exclusive", m.cfg->exclusive},
                        {"active_requests", m.active},
                        {"slots", m.slots()},
                        {"runs", m.runs}};
    if (m.files)
        j["files"] = {{"bytes", m.files->bytes},
                      {"cached_bytes", m.files->cached},
                      {"source", "measured"},
                      {"detail", "the files its launch names, resident in the page cache (mincore)"},
                      {"age_s", std::chrono::duration<double>(now() - m.files->at).count()},
                      {"reading_ahead", m.reading_ahead}};
    // For an endpoint picker (/metrics' vllm:lora_requests_info, scraped every 50 ms): whether it would
    // start now on one of its devices as they are. Single devices only — a split's plan reads the model file,
    // which a status must not do each time (the agent's outlook weighs splits too).
    j["fits_now"] = fits_one_device_now(m);
    j["file"] = m.file();
    if (m.retired) j["removed_from_config"] = true;
    if (m.next_cfg) j["restarts_for_new_config"] = true;
    if (!m.device.empty()) j["device"] = m.device;
    if (m.where.split() && m.state != ModelState::stopped) {
        j["devices"] = devices_of(m);  // a split: every device it runs on, the main one first
        j["shares"] = m.where.shares;
    }
    if (const auto keep_alive = m.keep_alive()) j["keep_alive_s"] = keep_alive->count();
    if (m.state == ModelState::loading) {
        nlohmann::json l = {{"elapsed_s", std::chrono::duration<double>(now() - m.load_started).count()}};
        if (m.load_s) l["expected_s"] = *m.load_s;  // the last load's time
        j["loading"] = std::move(l);
    }
    if (m.unload_when_idle) j["unload_pending"] = true;
    if (const auto v = m.crashes.check(now()); v.quarantined)
        j["quarantined"] = {
            {"message", v.message},
            {"retry_in_s", std::chrono::duration_cast<std::chrono::seconds>(v.retry_in).count()}};
    if (!m.wait_reason.empty()) j["wait_reason"] = m.wait_reason;
    const auto restores = conversations_.restores(m.name());
    j["counters"] = {{"loads_ok", m.loads_ok},
                     {"loads_failed", m.loads_failed},
                     {"load_seconds_total", m.load_seconds_total},
                     {"evictions", m.evictions},
                     {"slot_restores_ok", restores.ok},
                     {"slot_restores_failed", restores.failed},
                     {"exits", m.exits}};
    j["idle_s"] = m.active > 0 ? 0.0 : std::chrono::duration<double>(now() - m.last_used).count();
    if (m.load_s) j["load_s"] = *m.load_s;
    if (!m.last_cold_start.is_null()) j["last_cold_start"] = m.last_cold_start;
    if (m.facts.slot_ctx) j["slot_ctx"] = *m.facts.slot_ctx;
    if (m.facts.image_tokens) j["image_tokens"] = *m.facts.image_tokens;
    if (m.footprint) {
        nlohmann::json needs = nlohmann::json::array();
        for (const auto& n : m.footprint->needs) {
            needs.push_back({{"device", n.device},
                             {"bytes", n.bytes},
                             {"weights_bytes", n.weights_bytes},
                             {"kv_bytes", n.kv_bytes},
                             {"source", to_string(n.source)},
                             {"why", n.why}});
            if (n.host_bytes > 0)  // booked on `cpu` beside it (docs/broker.md)
                needs.back()["host"] = {{"bytes", n.host_bytes}, {"why", n.host_why}};
        }
        j["footprint"] = {
            {"source", to_string(m.footprint->source)}, {"detail", m.footprint->detail}, {"needs", needs}};
    }
    if (m.state != ModelState::stopped) {
        if (auto r = ledger_.reservation(m.device, m.name())) j["reservation"] = *r;
        if (m.device != "cpu")
            if (auto r = ledger_.reservation("cpu", m.name())) j["host_reservation"] = *r;
    }
    if (m.measured) j["measured"] = *m.measured;
    if (m.engine) j["engine"] = m.engine->status_json();
    if (m.engine && m.active > 0 && m.kind->reports_progress())
        if (auto p = m.kind->request_progress(m.engine->log_tail(40))) j["progress"] = *p;
    if (m.last_exit) j["last_exit"] = *m.last_exit;
    if (!m.stop_reason.empty()) j["last_stop_reason"] = m.stop_reason;
    return j;
}

// When the model came to be, as OpenAI's `created` (Unix seconds): its file's modification time, else when
// this loch started (a command engine without a file).
std::int64_t Broker::created_of(const config::ModelConfig& mc) const {
    std::error_code ec;
    if (!mc.path.empty()) {
        const auto t = std::filesystem::last_write_time(mc.path, ec);
        if (!ec)
            return std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::file_clock::to_sys(t).time_since_epoch())
                .count();
    }
    return std::chrono::duration_cast<std::chrono::seconds>(started_at_.time_since_epoch()).count();
}

std::vector<const config::ModelConfig*> BrokerView::models_serving(std::string_view route) const {
    std::vector<const config::ModelConfig*> out;
    for (const auto& mc : broker_.cfg_->models)
        if (const auto it = broker_.models_.find(mc.name);
            it != broker_.models_.end() && it->second->kind->serves(mc, route))
            out.push_back(&mc);
    return out;
}

asio::awaitable<nlohmann::json> Broker::models() {
    co_return co_await asio::co_spawn(
        ex_,
        [this]() -> asio::awaitable<nlohmann::json> {
            nlohmann::json data = nlohmann::json::array();
            for (const auto& mc : cfg_->models) {
                const auto& m = *models_.at(mc.name);
                data.push_back({{"id", mc.name},
                                {"object", "model"},
                                {"created", created_of(mc)},
                                {"owned_by", "loch"},
                                {"loch", {{"state", to_string(m.state)}, {"aliases", mc.aliases}}}});
            }
            co_return nlohmann::json{{"object", "list"}, {"data", data}};
        },
        asio::use_awaitable);
}

asio::awaitable<nlohmann::json> Broker::status() {
    co_return co_await asio::co_spawn(
        ex_,
        [this]() -> asio::awaitable<nlohmann::json> {
            nlohmann::json engines = nlohmann::json::array();
            for (const auto& [n, m] : models_)
                if (!m->retired || m->state != ModelState::stopped) engines.push_back(model_status(*m));
            nlohmann::json waiting = nlohmann::json::array();
            const auto now = this->now();
            std::map<const Model*, std::size_t> ahead;  // waiters of the same model before this one
            std::size_t position = 0;
            for (auto id : queue_.order(now)) {
                ++position;
                if (const Hold* h = holds_.queued(id)) {
                    const Hold& hold = *h;
                    nlohmann::json entry = {
                        {"hold", hold.id},
                        {"job", hold.spec.name},
                        {"priority", config::to_string(hold.spec.priority)},
                        {"waited_s", std::chrono::duration<double>(now - hold.since).count()},
                        {"reason", hold.wait_reason},
                        {"position", position}};
                    entry.update(nlohmann::json(eta_for_hold(hold)));
                    waiting.push_back(std::move(entry));
                    continue;
                }
                auto it = waiters_.find(id);
                if (it == waiters_.end()) continue;
                const auto& w = *it->second;
                nlohmann::json entry = {{"model", w.model->name()},
                                        {"priority", config::to_string(w.model->cfg->priority)},
                                        {"waited_s", std::chrono::duration<double>(now - w.since).count()},
                                        {"reason", w.model->wait_reason},
                                        {"queued_because", w.decision},
                                        {"position", position}};
                if (!w.needs.request_id.empty()) entry["request"] = w.needs.request_id;
                entry.update(nlohmann::json(eta_for_request(*w.model, ahead[w.model]++)));
                waiting.push_back(std::move(entry));
            }
            nlohmann::json locks = nlohmann::json::object();
            for (const auto& [d, m] : devices_book_.locks()) locks[d] = m;
            co_return nlohmann::json{
                {"devices", ledger_.to_json()},
                {"engines", engines},
                {"queue",
                 {{"interactive", queue_.size(config::Priority::interactive)},
                  {"batch", queue_.size(config::Priority::batch)},
                  {"limits", {{"interactive", cfg_->queue.interactive}, {"batch", cfg_->queue.batch}}},
                  {"aging_s", std::chrono::duration_cast<std::chrono::seconds>(queue_.aging()).count()},
                  {"waiting", waiting}}},
                {"gpu_locks", locks},
                {"holds", holds_json()},
                {"saved_slots", conversations_.status()},
                {"page_cache", page_cache_view()},
                {"cpu_threads", cpu_threads_view()},
                {"events", events_.recent()},
                {"loading_devices", devices_book_.loading()},
                {"shutting_down", shutting_down_}};
        },
        asio::use_awaitable);
}

asio::awaitable<nlohmann::json> Broker::plan(std::string model) {
    co_return co_await asio::co_spawn(
        ex_,
        [this, model]() -> asio::awaitable<nlohmann::json> {
            Model* m = find(model);
            if (!m)
                throw Error(ErrorKind::model_not_found, "no model named '" + model + "'", {{"model", model}});
            co_await ensure_footprint(*m);
            nlohmann::json j = model_status(*m);
            nlohmann::json out = {{"model", m->name()}, {"state", to_string(m->state)}, {"status", j}};
            if (m->state == ModelState::stopped) {
                const Decision d = decide(admission_input(*m), ledger_);
                nlohmann::json dj = d;
                out["admission"] = dj;
                out["would_admit_now"] =
                    d.kind == Decision::Kind::start || d.kind == Decision::Kind::evict_then_start;
            } else {
                out["admission"] = {
                    {"decision", "running"},
                    {"reason", fmt::format("already {} on {}", to_string(m->state), m->device)}};
                out["would_admit_now"] = m->state == ModelState::ready && m->active < m->slots();
            }
            out["devices"] = ledger_.to_json();
            co_return out;
        },
        asio::use_awaitable);
}

asio::awaitable<std::optional<std::vector<std::string>>> BrokerView::log_tail(std::string model,
                                                                              std::size_t n) {
    Broker& b = broker_;
    co_return co_await asio::co_spawn(
        b.ex_,
        [&b, model, n]() -> asio::awaitable<std::optional<std::vector<std::string>>> {
            Broker::Model* m = b.find(model);
            if (!m) co_return std::nullopt;
            if (m->engine) co_return m->engine->log_tail(n);
            if (m->last_engine) co_return m->last_engine->log_tail(n);
            co_return std::vector<std::string>{};
        },
        asio::use_awaitable);
}

asio::awaitable<std::optional<engines::ExitReport>> BrokerView::exit_report(
    std::shared_ptr<engines::EngineRun> e, std::chrono::milliseconds wait) {
    if (!e) co_return std::nullopt;
    Broker& b = broker_;
    co_return co_await asio::co_spawn(
        b.ex_,
        [&b, e, wait]() -> asio::awaitable<std::optional<engines::ExitReport>> {
            core::Timer t(b.ex_, b.clock_);
            const auto until = b.now() + wait;
            while (!e->exit_report() && b.now() < until) {
                t.expires_after(25ms);
                co_await t.wait();
            }
            co_return e->exit_report();
        },
        asio::use_awaitable);
}

}  // namespace loch::broker
