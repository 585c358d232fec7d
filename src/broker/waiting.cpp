// broker/waiting — how long a waiter waits: the inputs of the ETA arithmetic (eta.hpp) from what the broker
// measured — each model's mean request duration and last load time, each job name's last run, how many wait
// ahead; and how a waiter stops waiting before its turn (cancel). Member functions of Broker (broker.hpp).
#include <cmath>

#include <fmt/format.h>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"

namespace loch::broker {

namespace {
std::optional<double> measured_mean(const auto& m) {
    return m.requests_done > 0 ? std::optional(m.avg_request_s) : std::nullopt;
}
}  // namespace

Eta Broker::eta_for_request(const Model& m, std::size_t ahead) const {
    switch (m.state) {
        case ModelState::ready:
        case ModelState::loading: {
            SlotWait w;
            w.loading = m.state == ModelState::loading;
            w.load_s = m.load_s;
            w.loading_elapsed_s = std::chrono::duration<double>(now() - m.load_started).count();
            w.slots = m.slots();
            w.active = m.active;
            w.ahead = ahead;
            w.avg_request_s = measured_mean(m);
            return slot_eta(w);
        }
        case ModelState::stopped:
        case ModelState::asleep: {
            // Waiting for memory to start (or wake) on the device it would use first.
            if (!m.footprint || m.footprint->needs.empty()) return {std::nullopt, "unknown: not planned yet"};
            const auto& n = m.footprint->needs.front();
            if (!ledger_.has_device(n.device)) return {std::nullopt, "unknown: its device is not known"};
            Eta e = memory_eta(need_on(m, n).bytes, ledger_.free(n.device), holder_ends(n.device));
            if (e.seconds && m.load_s) {
                *e.seconds += *m.load_s;
                e.basis += fmt::format(", then its load ({:.1f} s last time)", *m.load_s);
            }
            return e;
        }
        case ModelState::stopping:
            break;
    }
    return {std::nullopt, "unknown: it starts again once its engine has exited"};
}

Eta Broker::eta_for_hold(const Hold& h) const {
    // The device it can get soonest.
    std::optional<Eta> best;
    for (const auto& d : h.devices) {
        if (!ledger_.has_device(d)) continue;
        Eta e = memory_eta(h.bytes, ledger_.free(d), holder_ends(d));
        if (!best || (e.seconds && (!best->seconds || *e.seconds < *best->seconds))) best = std::move(e);
    }
    return best.value_or(Eta{std::nullopt, "unknown: none of its devices is known"});
}

std::vector<HolderEnd> Broker::holder_ends(const std::string& device) const {
    std::vector<HolderEnd> out;
    const auto now = this->now();
    std::map<const Model*, std::size_t> queued;
    for (const auto& [id, w] : waiters_) ++queued[w->model];
    for (const auto& [name, m] : models_) {
        const auto r = ledger_.reservation(device, name);
        if (!r || r->bytes == 0) continue;
        HolderEnd e{name, r->bytes, std::nullopt, ""};
        const auto mean = measured_mean(*m);
        if (m->cfg->pinned) {
            e.why = "pinned: never evicted";
        } else if (m->state == ModelState::ready && m->active == 0 && !queued.contains(m.get())) {
            e.ends_in_s = 0;
            e.why = "idle: evicted for it";
        } else if (m->state == ModelState::ready && mean) {
            // Idle once its running requests and those queued for it are done.
            const auto rounds = std::ceil(double(m->active + queued[m.get()]) / double(m->slots()));
            e.ends_in_s = rounds * *mean;
            e.why = fmt::format("{} request(s) at {:.1f} s each", m->active + queued[m.get()], *mean);
        } else {
            e.why = m->state == ModelState::ready ? "busy, no request of it timed yet"
                                                  : std::string(to_string(m->state));
        }
        out.push_back(std::move(e));
        for (const auto& [holder, bytes] : m->transients)  // running requests' own memory
            if (m->device == device)
                out.push_back(
                    {holder, bytes, mean,
                     mean ? fmt::format("a request, {:.1f} s each", *mean) : "a request, none timed yet"});
    }
    for (const auto& [id, h] : holds_.live()) {
        if (h->state != Hold::State::granted || h->device != device) continue;
        const auto held = std::chrono::duration<double>(now - h->granted_at).count();
        HolderEnd e{h->holder(), ledger_.reservation(device, h->holder()).value_or(MemoryFigure{}).bytes,
                    std::nullopt, ""};
        if (const auto last = holds_.last_run_s(h->spec.name)) {
            e.ends_in_s = std::max(0.0, *last - held);
            e.why = fmt::format("job '{}': {:.0f} s last run, {:.0f} s so far", h->spec.name, *last, held);
        } else {
            e.why = fmt::format("job '{}': no earlier run timed, {:.0f} s so far", h->spec.name, held);
        }
        out.push_back(std::move(e));
    }
    return out;
}

std::size_t Broker::cancel_waiting(const std::string& request_id, const Error& why) {
    std::size_t n = 0;
    for (auto& [id, w] : waiters_) {
        if (w->needs.request_id != request_id || w->granted || w->error) continue;
        w->error = why;
        queue_.remove(id);
        w->timer.cancel();
        note("cancelled", *w->model, fmt::format("request {} cancelled while queued", request_id),
             {{"request", request_id}}, false);
        ++n;
    }
    // Whoever waited behind it may go now (its place and its ETA share move up).
    if (n) pump();
    return n;
}

}  // namespace loch::broker
