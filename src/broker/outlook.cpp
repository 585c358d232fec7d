// Broker::outlook (broker/outlook.hpp): admission's own decision for a model that is not running, taken on
// a snapshot and never acted on; a model whose memory is not known yet gets its estimate started.
#include <algorithm>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"

namespace loch::broker {

namespace asio = boost::asio;

Outlook BrokerView::outlook(const std::string& model) {
    Broker::Model* m = broker_.find(model);
    if (!m) return {};
    Outlook o = broker_.outlook_of(*m);
    if (o.fit == Outlook::Fit::planning && !m->planning)
        asio::co_spawn(broker_.ex_, broker_.ensure_footprint(*m), asio::detached);
    return o;
}

Outlook Broker::outlook_of(const Model& m) const {
    Outlook o;
    o.slots = m.slots();
    o.active = m.active;
    const auto prio = m.cfg->priority;
    o.queued = queue_.size(prio);
    o.queue_limit = queue_.capacity(prio);
    if (m.state == ModelState::ready || m.state == ModelState::loading || m.state == ModelState::asleep) {
        o.fit = Outlook::Fit::resident;
        return o;
    }
    if (!m.footprint) {
        o.fit = Outlook::Fit::planning;
        return o;
    }
    const AdmissionInput in = admission_input(m);
    const Decision d = decide(in, ledger_);
    o.why = d.reason;
    switch (d.kind) {
        case Decision::Kind::refuse:
            o.fit = Outlook::Fit::never;
            return o;
        case Decision::Kind::wait:
            o.fit = Outlook::Fit::fits_later;
            return o;
        case Decision::Kind::start:
        case Decision::Kind::evict_then_start:
            o.fit = d.kind == Decision::Kind::start ? Outlook::Fit::fits_now : Outlook::Fit::fits_evicting;
            break;
    }
    const auto need =
        std::find_if(in.needs.begin(), in.needs.end(), [&](const Need& n) { return n.device == d.device; });
    const std::uint64_t capacity = ledger_.capacity(d.device);
    const std::uint64_t free = ledger_.free(d.device) + d.freed_bytes;
    const std::uint64_t needed = need == in.needs.end() ? 0 : need->bytes;
    if (capacity > 0 && free > needed) o.free_share_after = double(free - needed) / double(capacity);
    return o;
}

bool Broker::fits_one_device_now(const Model& m) const {
    if (m.state != ModelState::stopped || !m.footprint) return false;
    for (const auto& n : m.footprint->needs) {
        const Need need = need_on(m, n);
        if (ledger_.has_device(need.device) && !devices_book_.loading(need.device) &&
            need.bytes <= ledger_.free(need.device))
            return true;
    }
    return false;
}

}  // namespace loch::broker
