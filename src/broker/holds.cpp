// broker/holds — holds and jobs (holds.hpp): admission through the same rules as an engine start, the views,
// and what each tick does for them (measure a job's process group, release on exit or lost heartbeat). The
// request's parser is hold_spec.cpp. Member functions of Broker (broker.hpp).
#include "broker/holds.hpp"

#include <signal.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "engines/spec.hpp"

namespace loch::broker {

namespace {

Error bad_input(std::string message, nlohmann::json details = nlohmann::json::object()) {
    return Error(ErrorKind::invalid_request, std::move(message), std::move(details));
}

// Is the process group still there? kill(-pgid, 0): ESRCH once every member has exited (EPERM = it runs as
// another user: still there).
bool group_alive(int pgid) {
    return ::kill(-pgid, 0) == 0 || errno == EPERM;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Creating, reading, releasing

std::optional<FootprintKey> Broker::job_key(const std::string& name, const std::string& device) const {
    FootprintKey k;
    k.model = "job:" + name;
    k.device = device;
    k.kind = "job";
    k.driver = devices_book_.driver_of(device);
    return k;
}

asio::awaitable<nlohmann::json> Broker::create_hold(HoldSpec spec) {
    if (shutting_down_) throw Error(ErrorKind::shutting_down, "loch is shutting down", {}, 5);
    auto h = holds_.make(now());
    h->spec = std::move(spec);
    // Where it may go: one named device, or every GPU (the CPU when there is none), like an engine.
    const auto known = ledger_.devices();
    if (h->spec.device != "auto") {
        if (!ledger_.has_device(h->spec.device))
            throw bad_input(fmt::format("unknown device '{}' (this machine has: {})", h->spec.device,
                                        fmt::join(known, ", ")),
                            {{"device", h->spec.device}, {"devices", known}});
        h->devices = {h->spec.device};
    } else {
        for (const auto& d : known)
            if (d != "cpu") h->devices.push_back(d);
        if (h->devices.empty()) h->devices = {"cpu"};
    }
    // Its size: asked, a model's footprint, or what this job name used at most before.
    std::map<std::string, std::uint64_t> bytes_on;
    if (h->spec.bytes) {
        h->bytes = *h->spec.bytes;
        h->source = Source::configured;
        h->size_why = "asked for by the job";
    } else if (!h->spec.like.empty()) {
        Model* m = find(h->spec.like);
        if (!m)
            throw bad_input(fmt::format("like: no model named '{}'", h->spec.like), {{"like", h->spec.like}});
        co_await ensure_footprint(*m);
        if (!m->footprint || m->footprint->needs.empty())
            throw bad_input(fmt::format("like: model '{}' has no memory plan ({})", m->name(),
                                        m->footprint ? m->footprint->detail : "not planned"));
        for (const auto& n : m->footprint->needs) bytes_on[n.device] = need_on(*m, n).bytes;
        std::erase_if(h->devices, [&](const auto& d) { return !bytes_on.contains(d); });
        if (h->devices.empty())
            throw bad_input(fmt::format("like: model '{}' is not planned for that device", m->name()));
        h->bytes = bytes_on[h->devices.front()];
        h->source = m->footprint->source;
        h->size_why = fmt::format("the footprint of model '{}'", m->name());
    } else {
        for (const auto& d : h->devices)
            if (auto k = job_key(h->spec.name, d))
                if (auto f = remembered_.get(*k)) bytes_on[d] = f->bytes;
        std::erase_if(h->devices, [&](const auto& d) { return !bytes_on.contains(d); });
        if (h->devices.empty())
            throw bad_input(
                fmt::format("no size for job '{}': give memory (loch run --memory 12GiB) or like a model; "
                            "a size is remembered per job name after its first run",
                            h->spec.name),
                {{"name", h->spec.name}});
        h->bytes = bytes_on[h->devices.front()];
        h->source = Source::measured_earlier;
        h->size_why = fmt::format("the peak job '{}' used on an earlier run", h->spec.name);
    }
    Hold& hold = holds_.add(std::move(h));
    note_request();
    if (hold.spec.running) {
        // Already running (loch restarted under it): its memory is in use whatever loch decides.
        book(hold, hold.devices.front());
        note_event("hold", {{"hold", hold.id}, {"job", hold.spec.name}},
                   fmt::format("re-registered a running job on {}: {}", hold.device, human_bytes(hold.bytes)),
                   {}, false);
        relieve_overcommit(hold.device, hold.holder());
        co_return hold_json(hold);
    }
    refresh_devices();
    try {
        if (try_grant(hold) == Serve::granted) co_return hold_json(hold);
    } catch (const Error&) {
        holds_.discard(hold.id);
        throw;
    }
    const auto qid = next_waiter_++;
    if (!queue_.push(qid, hold.spec.priority, now())) {
        const auto p = hold.spec.priority;
        Error e(ErrorKind::queue_full,
                fmt::format("the {} queue is full: {} requests are already waiting (limit {})",
                            config::to_string(p), queue_.size(p), queue_.capacity(p)),
                {{"hold", hold.id}, {"queued", queue_.size(p)}, {"queue_limit", queue_.capacity(p)}}, 5);
        holds_.discard(hold.id);
        throw e;
    }
    holds_.queue(qid, hold);
    co_return hold_json(hold);
}

std::optional<nlohmann::json> Broker::hold(const std::string& id, bool heartbeat) {
    if (Hold* h = holds_.find(id)) {
        if (heartbeat) h->heartbeat = now();
        return hold_json(*h);
    }
    if (const Hold* h = holds_.find_ended(id)) return hold_json(*h);
    return std::nullopt;
}

std::optional<nlohmann::json> Broker::update_hold(const std::string& id, std::optional<int> pgid) {
    Hold* found = holds_.find(id);
    if (!found) return hold(id, false);
    Hold& h = *found;
    h.heartbeat = now();
    if (pgid && h.spec.pgid != pgid) {
        h.spec.pgid = pgid;
        note_event("hold", {{"hold", h.id}, {"job", h.spec.name}},
                   fmt::format("job '{}' runs as process group {}", h.spec.name, *pgid), {{"pgid", *pgid}},
                   false);
    }
    return hold_json(h);
}

std::optional<nlohmann::json> Broker::release_hold(const std::string& id, const std::string& why) {
    Hold* h = holds_.find(id);
    if (!h) return hold(id, false);
    end_hold(*h, why);
    return hold(id, false);
}

std::optional<nlohmann::json> Broker::cancel_hold(const std::string& id) {
    Hold* found = holds_.find(id);
    if (!found) return std::nullopt;
    Hold& h = *found;
    h.cancelled = true;
    end_hold(h, h.state == Hold::State::waiting ? "cancelled while waiting (loch cancel)"
                                                : "cancelled (loch cancel): its job is asked to stop");
    return hold(id, false);
}

nlohmann::json Broker::holds_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [id, h] : holds_.live()) out.push_back(hold_json(*h));
    return out;
}

void Broker::end_hold(Hold& h, std::string why, nlohmann::json error) {
    for (const auto qid : holds_.dequeue_all(h)) queue_.remove(qid);
    const bool was_granted = h.state == Hold::State::granted;
    if (was_granted) {
        holds_.record_run(h.spec.name, std::chrono::duration<double>(now() - h.granted_at).count());
        if (h.spec.pgid) {
            // A job's processes may still hold the memory for a moment after it is released (a GPU gives it
            // back only once the process is gone): the booking stays until the device shows none of them,
            // else the memory would count as other programs' and a model would be refused for it.
            holds_.drain(
                {h.holder(), h.device, devices_->group_members(*h.spec.pgid), now() + options_.free_wait});
        } else {
            ledger_.release(h.holder());
        }
    }
    h.state = error.is_null() ? Hold::State::released : Hold::State::refused;
    h.error = std::move(error);
    h.end_reason = why;
    note_event(h.state == Hold::State::refused ? "refused" : "released",
               {{"hold", h.id}, {"job", h.spec.name}},
               fmt::format("hold '{}' ({}): {}", h.id, h.spec.name, why),
               {{"bytes", h.bytes}, {"peak_bytes", h.peak}}, h.state == Hold::State::refused);
    holds_.retire(h);
    if (was_granted) pump();  // its memory is free for whoever waits
}

// ---------------------------------------------------------------------------------------------------------
// Admission

std::vector<EngineView> Broker::holder_views(const Model* except_model, const Hold* except_hold) const {
    std::vector<EngineView> out;
    const auto now = this->now();
    // The requester's turn has come (broker/turns.cpp): the queued requests of others do not keep their idle
    // engines — they wait for it, and admission evicts for it like any idle engine.
    const bool its_turn = except_model && has_memory_turn(*except_model);
    for (const auto& [name, o] : models_) {
        if (o.get() == except_model || o->state == ModelState::stopped) continue;
        const Model* op = o.get();  // (clang 14 cannot capture a structured binding)
        // Wanted by a queued request — unless all that want it are batch requests yielding to interactive
        // work (then it is idle between batch items, and evicted for that work like any idle engine).
        const bool wanted =
            !its_turn && (std::any_of(waiters_.begin(), waiters_.end(),
                                      [&](const auto& w) {
                                          return w.second->model == op && priority_of(*op, w.second->needs) ==
                                                                              config::Priority::interactive;
                                      }) ||
                          (std::any_of(waiters_.begin(), waiters_.end(),
                                       [&](const auto& w) { return w.second->model == op; }) &&
                           !interactive_wants(*op).has_value()));
        EngineView v;
        v.name = name;
        v.device = o->device;
        v.bytes = ledger_.reservation(o->device, name).value_or(MemoryFigure{}).bytes;
        for (const auto& d : devices_of(*o))
            if (d != o->device)
                v.also_on.emplace_back(d, ledger_.reservation(d, name).value_or(MemoryFigure{}).bytes);
        if (o->device != "cpu")  // what it keeps in host RAM (Need::host_bytes): stopping it frees that too
            if (const auto host = ledger_.reservation("cpu", name))
                v.also_on.emplace_back("cpu", host->bytes);
        v.priority = rank(!policy_->has_priorities()                 ? config::Priority::interactive
                          : o->borrowed_from_batch && o->active == 0 ? config::Priority::batch
                                                                     : o->cfg->priority);
        v.evictable = (o->state == ModelState::ready || o->state == ModelState::asleep) && o->active == 0 &&
                      !o->cfg->pinned && !wanted;
        v.batch_only = o->state == ModelState::ready && o->active > 0 && o->active_interactive == 0 &&
                       policy_->has_priorities();
        // Its memory is on its way within stop_grace (then SIGKILL) — unless it saves a long conversation
        // first (up to minutes on a slow disk): past that, admission may stop another engine instead.
        v.stopping = o->state == ModelState::stopping &&
                     now - o->stop_started < cfg_->stop_grace + std::chrono::seconds(2);
        v.held_as = o->state != ModelState::ready ? std::string(to_string(o->state))
                    : o->active > 0               ? "busy"
                    : o->cfg->pinned              ? "pinned"
                    : wanted                      ? "wanted by a queued request"
                                                  : "idle";
        v.idle_s = std::chrono::duration<double>(now - o->last_used).count();
        v.load_s = o->load_s.value_or(1.0);
        v.recent_uses = o->recent_people_uses(now);
        out.push_back(std::move(v));
        // Its running requests' own memory (an image's compute): theirs until they end.
        for (const auto& [holder, bytes] : o->transients) {
            EngineView r;
            r.name = holder;
            r.device = o->device;
            r.bytes = bytes;
            if (o->device != "cpu")
                if (const auto host = ledger_.reservation("cpu", holder))
                    r.also_on.emplace_back("cpu", host->bytes);
            r.priority = v.priority;
            r.held_as = "a running request";
            out.push_back(std::move(r));
        }
    }
    for (const auto& [id, h] : holds_.live()) {
        if (h.get() == except_hold || h->state != Hold::State::granted) continue;
        EngineView v;
        v.name = h->holder();
        v.device = h->device;
        v.bytes = ledger_.reservation(h->device, h->holder()).value_or(MemoryFigure{}).bytes;
        v.priority = rank(h->spec.priority);
        v.held_as = h->spec.command.empty()
                        ? fmt::format("a hold{}", h->spec.owner.empty() ? "" : " by " + h->spec.owner)
                        : fmt::format("a job: `{}`{}{}", h->spec.command,
                                      h->spec.pgid ? fmt::format(" (pid {})", *h->spec.pgid) : "",
                                      h->spec.owner.empty() ? "" : ", " + h->spec.owner);
        out.push_back(std::move(v));
    }
    return out;
}

void Broker::book(Hold& h, const std::string& device) {
    h.device = device;
    h.state = Hold::State::granted;
    h.granted_at = now();
    h.wait_reason.clear();
    h.error = nullptr;
    ledger_.reserve(device, h.holder(), {h.bytes, h.source, h.size_why});
    ledger_.mark_loaded(device, h.holder());  // a job allocates as it goes: count its use as its own at once
}

Broker::Serve Broker::try_grant(Hold& h) {
    AdmissionInput in;
    in.priority = rank(h.spec.priority);
    for (const auto& d : h.devices) {
        Need n;
        n.device = d;
        n.bytes = h.bytes;
        n.source = h.source;
        n.why = h.size_why;
        in.needs.push_back(std::move(n));
    }
    in.engines = holder_views(nullptr, &h);
    in.devices_loading = devices_book_.loading();
    const Decision d = decide(in, ledger_);
    switch (d.kind) {
        case Decision::Kind::start:
            book(h, d.device);
            note_event("hold", {{"hold", h.id}, {"job", h.spec.name}},
                       fmt::format("granted {} on {} to '{}': {}", human_bytes(h.bytes), d.device,
                                   h.spec.name, d.reason),
                       {{"device", d.device}, {"bytes", h.bytes}}, false);
            return Serve::granted;
        case Decision::Kind::evict_then_start:
            h.wait_reason = fmt::format("evicting {}: {}", fmt::join(d.victims, ", "), d.reason);
            evict(d.victims, "job '" + h.spec.name + "'",
                  "evicted to make room for job '" + h.spec.name + "'");
            return Serve::wait;
        case Decision::Kind::wait:
            h.wait_reason = d.reason;
            return Serve::wait;
        case Decision::Kind::refuse:
            break;
    }
    const auto& r = d.refusal;
    std::vector<std::string> holders;
    for (const auto& v : in.engines)
        if (const auto b = bytes_on(v, r.device); b > 0)
            holders.push_back(fmt::format("{} {} ({})", v.name, human_bytes(b), v.held_as));
    if (r.outside > 0) holders.push_back("other programs " + ledger_.outside_text(r.device));
    nlohmann::json details = {{"hold", h.id},
                              {"job", h.spec.name},
                              {"device", r.device},
                              {"need_bytes", h.bytes},
                              {"need_source", to_string(h.source)},
                              {"capacity_bytes", r.capacity},
                              {"empty_capacity_bytes", r.empty_capacity},
                              {"outside_bytes", r.outside},
                              {"held_by", holders}};
    throw Error(
        ErrorKind::insufficient_memory,
        fmt::format("job '{}' asks {} ({}); the most {} can ever give is {} ({} with nothing else on it){}",
                    h.spec.name, human_bytes(h.bytes), h.size_why, r.device.empty() ? "a device" : r.device,
                    human_bytes(r.capacity), human_bytes(r.empty_capacity),
                    holders.empty() ? "" : fmt::format("; held now by {}", fmt::join(holders, ", "))),
        std::move(details));
}

std::size_t Broker::queue_position(std::uint64_t queue_id) const {
    const auto order = queue_.order(now());
    const auto it = std::find(order.begin(), order.end(), queue_id);
    return it == order.end() ? 0 : static_cast<std::size_t>(it - order.begin()) + 1;
}

nlohmann::json Broker::hold_json(const Hold& h) const {
    static constexpr const char* names[] = {"waiting", "granted", "refused", "released"};
    const auto now = this->now();
    nlohmann::json j = {{"id", h.id},
                        {"name", h.spec.name},
                        {"state", names[static_cast<int>(h.state)]},
                        {"priority", config::to_string(h.spec.priority)},
                        {"bytes", h.bytes},
                        {"source", to_string(h.source)},
                        {"why", h.size_why},
                        {"devices", h.devices},
                        {"ttl_s", h.spec.ttl.count()},
                        {"age_s", std::chrono::duration<double>(now - h.since).count()}};
    if (h.spec.pgid) j["pgid"] = *h.spec.pgid;
    if (h.cancelled) j["cancelled"] = true;
    if (!h.spec.command.empty()) j["command"] = h.spec.command;
    if (!h.spec.owner.empty()) j["owner"] = h.spec.owner;
    switch (h.state) {
        case Hold::State::waiting:
            j["reason"] = h.wait_reason;
            for (const auto& [qid, hp] : holds_.waiting())
                if (hp == &h) j["position"] = queue_position(qid);
            j.update(nlohmann::json(eta_for_hold(h)));
            break;
        case Hold::State::granted: {
            j["device"] = h.device;
            j["held_s"] = std::chrono::duration<double>(now - h.granted_at).count();
            j["env"] = engines::device_environment(placement_of(h.device), true);
            if (h.measured) j["measured"] = *h.measured;
            if (h.peak) j["peak_bytes"] = h.peak;
            if (const auto r = ledger_.reservation(h.device, h.holder())) j["booked_bytes"] = r->bytes;
            break;
        }
        case Hold::State::refused:
            j["error"] = h.error;
            j["reason"] = h.end_reason;
            break;
        case Hold::State::released:
            j["reason"] = h.end_reason;
            if (h.peak) j["peak_bytes"] = h.peak;
            break;
    }
    return j;
}

// ---------------------------------------------------------------------------------------------------------
// Each tick

void Broker::observe_holds(const std::vector<DeviceSnapshot>& snap) {
    // Released jobs whose processes held memory: the booking goes once the device shows none of them.
    const bool any_drained = holds_.drop_drained([&](const HoldsBook::Draining& d) {
        const bool present = group_use(d.members, d.device, snap, "the job's").has_value();
        if (present && now() < d.until) return false;
        ledger_.release(d.holder);
        return true;
    });
    if (any_drained) pump();
    for (const auto& [id, hp] : holds_.live()) {
        Hold& h = *hp;
        if (h.state != Hold::State::granted || !h.spec.pgid) continue;
        const auto use = group_use(devices_->group_members(*h.spec.pgid), h.device, snap, "the job's");
        if (!use) continue;
        const MemoryFigure& seen = *use;
        h.measured = seen;
        if (seen.bytes > h.peak) {
            h.peak = seen.bytes;
            if (auto k = job_key(h.spec.name, h.device)) remembered_.raise(*k, seen);
        }
        const auto before = ledger_.reservation(h.device, h.holder());
        if (!before || !ledger_.raise_to_measured(h.device, h.holder(), seen)) continue;
        h.bytes = seen.bytes;
        note_event("grew", {{"hold", h.id}, {"job", h.spec.name}},
                   fmt::format("job '{}' (pid {}) uses {} on {}, {} more than its hold of {}; the ledger now "
                               "books the measured figure",
                               h.spec.name, *h.spec.pgid, human_bytes(seen.bytes), h.device,
                               human_bytes(seen.bytes - before->bytes), human_bytes(before->bytes)),
                   {{"device", h.device},
                    {"reserved_bytes", before->bytes},
                    {"measured_bytes", seen.bytes},
                    {"over_by_bytes", seen.bytes - before->bytes}},
                   true);
        relieve_overcommit(h.device, h.holder());
    }
}

void Broker::expire_holds() {
    const auto now = this->now();
    std::vector<Hold*> gone;
    for (const auto& [id, hp] : holds_.live()) {
        Hold& h = *hp;
        if (h.state == Hold::State::granted && h.spec.pgid && !group_alive(*h.spec.pgid)) {
            h.end_reason = fmt::format("its process group {} has exited", *h.spec.pgid);
            gone.push_back(&h);
            continue;
        }
        if (now - h.heartbeat <= h.spec.ttl) continue;
        if (h.state == Hold::State::granted && h.spec.pgid) {
            // Its client stopped calling, but the job's processes run and hold their memory: kept until
            // they exit, which the check above sees.
            if (!h.heartbeat_lost_noted)
                note_event(
                    "hold", {{"hold", h.id}, {"job", h.spec.name}},
                    fmt::format("job '{}' sends no heartbeat for {} s; its process group {} still runs, so "
                                "its hold stays until the group exits",
                                h.spec.name, h.spec.ttl.count(), *h.spec.pgid),
                    {}, true);
            h.heartbeat_lost_noted = true;
            continue;
        }
        h.end_reason = fmt::format(
            "no heartbeat for {} s (ttl_s {})",
            std::chrono::duration_cast<std::chrono::seconds>(now - h.heartbeat).count(), h.spec.ttl.count());
        gone.push_back(&h);
    }
    for (Hold* h : gone) end_hold(*h, h->end_reason);
}

}  // namespace loch::broker
