// broker/yielding — batch work yields to people (issue 29), only what their requests need (issue 54). A
// request runs at its model's priority unless it lowers it (X-Loch-Priority: batch); a batch request is not
// granted while
//   - an interactive request runs or waits on its own model (they share the engine's slots),
//   - an interactive request runs on another engine on the CPU (they share its cores: a GPU's compute is
//     time-sliced between engines, and there the batch goes on beside a person's request),
//   - an interactive request waits for room on a device its model uses (its own model has no engine yet:
//     an engine busy with batch items drains and, once idle, is evicted for it like any idle engine) —
//     not one that waits for its own engine's load or slot, which the batch's room would not hasten; and
//     not while the batch's engine has just loaded, served nothing yet (Model::unserved_load) and its
//     requests take no longer than the person's model takes to reload: the person waits for that reload
//     anyway, so serving one first at most doubles their wait (rule 2b's bound), where undoing the load
//     unserved can starve the batch outright (issue 54: the H100 image burst, 1 picture a minute). Where an
//     item takes longer than the reload (a caption on 2 CPU cores beside a 0.1 s chat model), the load is
//     undone for the person as before; nor while the person's admission finds the room without the batch's
//     engine (other idle engines; never the idle models people use most, rule 2a) — it takes it there.
// Member functions of Broker (broker.hpp).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <boost/asio/post.hpp>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"

namespace loch::broker {

namespace {

// Where a model runs, or would start: its devices while it has an engine, else its planned ones, else
// every device it may use.
template <class Model, class Each, class Allowed>
std::set<std::string> devices_wanted(const Model& m, Each each, Allowed allowed) {
    std::set<std::string> out;
    if (m.engine && !m.device.empty())
        each(m, [&](const std::string& d) { out.insert(d); });
    else if (m.footprint && !m.footprint->needs.empty())
        for (const auto& n : m.footprint->needs) out.insert(n.device);
    else
        for (auto& d : allowed(m)) out.insert(std::move(d));
    return out;
}

}  // namespace

config::Priority Broker::priority_of(const Model& m, const RequestNeeds& needs) const {
    if (!policy_->has_priorities()) return config::Priority::interactive;  // the anchors have none
    if (needs.priority == config::Priority::batch) return config::Priority::batch;
    return m.cfg->priority;
}

std::optional<std::string> Broker::interactive_wants(const Model& m) const {
    const auto each = [](const Model& x, auto&& f) { each_device(x, f); };
    const auto allowed = [this](const Model& x) { return allowed_devices(x); };
    const auto mine = devices_wanted(m, each, allowed);
    // The device both use, or "" when they share none.
    const auto shared = [&](const std::vector<std::string>& theirs) -> std::string {
        for (const auto& d : theirs)
            if (mine.contains(d)) return d;
        return {};
    };
    const auto of = [&](const Model& o) {
        const auto ds = devices_wanted(o, each, allowed);
        return &o == &m && !ds.empty() ? *ds.begin() : shared({ds.begin(), ds.end()});
    };
    for (const auto& [name, o] : models_)
        if (o->active_interactive > 0)
            if (const auto d = of(*o); !d.empty() && (o.get() == &m || d == "cpu"))
                return fmt::format("'{}' runs {} interactive request(s) on {}", name, o->active_interactive,
                                   d);
    // A request that waits for its own engine — loading, or ready with every slot taken — gains nothing from
    // the batch's room (an image's own compute memory aside: that is room).
    const auto waits_for_room = [](const Model& x, const RequestNeeds& needs) {
        return (x.state != ModelState::loading && x.state != ModelState::ready) ||
               needs.transient.has_value();
    };
    const auto serves_first = [&](const Model& person) {
        return m.unserved_load && m.state == ModelState::ready && &person != &m &&
               m.avg_request_s <= person.load_s.value_or(1.0);
    };
    // A person whose model has no engine yet and whose admission finds the room elsewhere — other idle
    // engines, or busy ones nobody else waits for whose requests end no later than this engine's would drain
    // (the person waits no longer), but not the idle models people use most — takes it there: the batch goes
    // on (Ollama's policy keeps a busy batch engine too; on issue 54's two-people trace stopping it idled the
    // GPU 41 %). Decided by admission itself (admitted_without), so that the person's own admission agrees;
    // the probe's own views of the engines do not probe again (yield_probe_).
    const auto room_elsewhere = [&](const Model& person, const RequestNeeds& needs) {
        if (yield_probe_ || &person == &m || person.state != ModelState::stopped || needs.transient)
            return false;
        std::vector<std::string> soon_idle;
        for (const auto& [name, o] : models_)
            if (o.get() != &m && o.get() != &person && o->state == ModelState::ready && o->active > 0 &&
                !o->cfg->pinned && o->avg_request_s <= m.avg_request_s &&
                std::none_of(waiters_.begin(), waiters_.end(),
                             [&](const auto& w) { return w.second->model == o.get(); }))
                soon_idle.push_back(name);
        const YieldProbe probing(yield_probe_);
        return admitted_without(admission_input(person, priority_of(person, needs)), ledger_, m.name(),
                                soon_idle);
    };
    for (const auto& [id, w] : waiters_)
        if (!w->granted && !w->error && priority_of(*w->model, w->needs) == config::Priority::interactive &&
            (w->model == &m || waits_for_room(*w->model, w->needs)) && !serves_first(*w->model) &&
            !room_elsewhere(*w->model, w->needs))
            if (const auto d = of(*w->model); !d.empty())
                return fmt::format("an interactive request for '{}' waits for {}", w->model->name(), d);
    for (const auto& [id, h] : holds_.live())
        if (h->state == Hold::State::waiting && h->spec.priority == config::Priority::interactive)
            if (const auto d = shared(h->devices); !d.empty())
                return fmt::format("job '{}' waits for {}", h->spec.name, d);
    return std::nullopt;
}

void Broker::note_interactive_arrival() {
    if (batch_active_ == 0 || !listeners_.interactive_arrival) return;
    asio::post(ex_, [f = listeners_.interactive_arrival, alive = std::weak_ptr<bool>(alive_)] {
        if (auto a = alive.lock(); a && *a) f();
    });
}

bool BrokerView::yields_to_interactive(const std::string& model) const {
    for (const auto& [name, m] : broker_.models_)
        if (name == model || std::ranges::find(m->cfg->aliases, model) != m->cfg->aliases.end())
            return broker_.interactive_wants(*m).has_value();
    return false;
}

}  // namespace loch::broker
