// broker/serve — one request's way to a slot, now: the facts and the answers the serve decision asks for
// (broker/serve_decision.hpp: the rules), and the one executor that carries out the effects it returns —
// a grant, its own memory booked, a start, a wake, evictions, a read-ahead, a wait's reason, a refusal.
// Member functions of Broker (broker.hpp).
#include "broker/broker.hpp"
#include "broker/model_state.hpp"
#include "broker/serve_decision.hpp"

#include <algorithm>
#include <variant>

#include <fmt/format.h>

#include "core/time_text.hpp"

namespace loch::broker {

namespace {
// A request's phases on the CPU (RequestCost::host_bytes) are booked in host RAM, beside what its engine
// keeps there, when the engine runs on another device and the ledger knows the CPU.
bool books_on_host(const Ledger& ledger, const std::string& device, const engines::RequestCost& t) {
    return t.host_bytes > 0 && device != "cpu" && ledger.has_device("cpu");
}
}  // namespace

// The broker's answers about one model and one request.
class Broker::ServeAnswers final : public ServeQuestions {
  public:
    ServeAnswers(Broker& b, Model& m, const RequestNeeds& needs, config::Priority priority, bool aged)
        : b_(b), m_(m), needs_(needs), priority_(priority), aged_(aged) {}

    std::optional<std::string> turn_wait() override { return b_.turn_wait(m_, priority_); }
    bool exclusive_ok() override { return b_.exclusive_ok(m_); }
    std::optional<std::string> exclusive_holder() override { return b_.devices_book_.holder(m_.device); }
    std::optional<Error> request_memory_never_fits() override {
        const auto& t = *needs_.transient;
        const auto engine = b_.ledger_.reservation(m_.device, m_.name()).value_or(MemoryFigure{});
        if (auto e = b_.never_fits_error(m_, m_.device, engine, t)) return e;
        if (!on_host()) return std::nullopt;
        return b_.never_fits_error(
            m_, "cpu", b_.ledger_.reservation("cpu", m_.name()).value_or(MemoryFigure{}), host_part());
    }
    bool request_memory_fits_now() override {
        const auto& t = *needs_.transient;
        return t.bytes <= b_.ledger_.free(m_.device) &&
               (!on_host() || t.host_bytes <= b_.ledger_.free("cpu"));
    }
    Decision admit_request_memory() override {
        const auto& t = *needs_.transient;
        AdmissionInput in = b_.admission_input(m_);
        Need n;
        n.device = m_.device;
        n.bytes = t.bytes;
        n.source = Source::formula;
        n.why = t.why;
        if (on_host()) n.host_bytes = t.host_bytes, n.host_why = t.host_why;
        in.needs = {n};
        return decide(in, b_.ledger_);
    }
    std::optional<Error> no_build_reaches() override { return b_.no_build_reaches(m_); }
    OtherEngines other_engines() override {
        OtherEngines out;
        for (const auto& [n, o] : b_.models_) {
            if (o.get() == &m_ || o->state == ModelState::stopped) continue;
            (o->state == ModelState::ready && o->active == 0 ? out.idle : out.busy).push_back(n);
        }
        return out;
    }
    Admitted admit() override {
        // An asleep engine's own small reservation is not in the way of its waking: decided without it.
        std::optional<MemoryFigure> residue;
        if (m_.state == ModelState::asleep) {
            residue = b_.ledger_.reservation(m_.device, m_.name());
            b_.ledger_.release(m_.name());
        }
        Admitted a{b_.admission_input(m_, priority_, aged_), {}};
        a.decision = decide(a.input, b_.ledger_);
        if (residue) b_.ledger_.reserve(m_.device, m_.name(), *residue);  // a wake books its whole figure
        return a;
    }
    bool evicts_batch_work(const std::vector<std::string>& victims) override {
        return std::any_of(victims.begin(), victims.end(), [&](const std::string& v) {
            const auto it = b_.models_.find(v);
            return it != b_.models_.end() && rank(it->second->cfg->priority) < rank(m_.cfg->priority);
        });
    }
    DeviceAdvice device_advice(const std::string& device) override {
        DeviceAdvice a;
        if (const auto* lim = b_.ledger_.limits(device)) {
            if (lim->backend_bound) {
                a.vulkan_heap = lim->backend_bound->bytes;
                a.without_vulkan_heap = b_.ledger_.capacity_without_backend_bound(device);
            }
            a.advice = lim->advice;
        }
        return a;
    }

  private:
    bool on_host() const { return books_on_host(b_.ledger_, m_.device, *needs_.transient); }
    engines::RequestCost host_part() const {
        engines::RequestCost on_host = *needs_.transient;
        on_host.bytes = on_host.host_bytes;
        on_host.why = on_host.host_why;
        return on_host;
    }

    Broker& b_;
    Model& m_;
    const RequestNeeds& needs_;
    config::Priority priority_;
    bool aged_;
};

// The one executor: each effect carried out against the ledger, the engines and the request's model.
struct Broker::ServeExecutor {
    Broker& b;
    Model& m;
    const RequestNeeds& needs;
    config::Priority priority;
    std::string* holder;  // the request's own memory's ledger holder, once booked
    bool granted = false;

    void operator()(const effect::Grant&) {
        ++m.active;
        m.unserved_load = false;
        if (priority == config::Priority::interactive) {
            ++m.active_interactive;
            m.note_person_use(b.now());
            b.note_interactive_arrival();
        } else {
            ++b.batch_active_;
        }
        if (b.exclusive(m))
            b.each_device(m, [&](const std::string& d) { b.devices_book_.lock(d, m.name()); });
        granted = true;
    }
    void operator()(const effect::BookRequestMemory&) {
        const auto& t = *needs.transient;
        *holder = fmt::format("{}#{}", m.name(), b.next_transient_++);
        b.ledger_.reserve(m.device, *holder, {t.bytes, Source::formula, t.why});
        b.ledger_.mark_loaded(m.device, *holder);
        // Its phases on the CPU: the same holder, released with the device's part when the request ends.
        if (books_on_host(b.ledger_, m.device, t)) {
            b.ledger_.reserve("cpu", *holder, {t.host_bytes, Source::formula, t.host_why});
            b.ledger_.mark_loaded("cpu", *holder);
        }
        m.transients[*holder] = t.bytes;
        if (t.retained_bytes > 0) m.transient_retained[*holder] = t.retained_bytes;
    }
    void operator()(const effect::Wait& w) {
        m.wait_reason = w.reason;
        if (w.for_room) m.waits_for_room = true;
    }
    void operator()(const effect::Start& s) { b.begin_load(m, s.device); }
    void operator()(const effect::StartSplit& s) {
        const auto devices = split_devices(s.split);
        engines::Placement where = b.placement_of(devices.front());
        for (std::size_t i = 1; i < devices.size(); ++i) where.others.push_back(b.placement_of(devices[i]));
        where.shares = s.split.shares;
        b.begin_load(m, where, s.split.parts);
    }
    void operator()(const effect::Wake&) { b.begin_wake(m); }
    void operator()(const effect::Restart& r) { b.begin_stop(m, r.why); }
    void operator()(const effect::Evict& e) {
        // Room taken from batch work is lent: once idle, this engine is the first to go for it.
        if (e.borrowed_from_batch) m.borrowed_from_batch = true;
        b.evict(e.victims, m.name(), e.why);
    }
    void operator()(const effect::ReadAhead& r) { b.read_ahead_for(m, r.device, r.why); }
    void operator()(const effect::Note& n) { b.note(n.kind, m, n.message, n.extra, n.warn); }
    [[noreturn]] void operator()(const effect::Refuse& r) { throw r.error; }
};

Broker::Serve Broker::try_serve(Model& m, const RequestNeeds& needs, std::string* holder, bool aged) {
    const config::Priority priority = priority_of(m, needs);
    ServeFacts f;
    f.shutting_down = shutting_down_;
    const auto verdict = m.crashes.check(now());
    if (verdict.quarantined) f.quarantined = quarantine_error(m, verdict);
    f.model = m.name();
    f.state = m.state;
    f.device = m.device;
    f.slots = m.slots();
    f.active = m.active;
    f.priority = priority;
    // Batch work yields to people (yielding.cpp): where it would be granted or started now, it waits.
    if (priority == config::Priority::batch && !aged) f.yields_to = interactive_wants(m);
    if (needs.transient) f.request_memory = &*needs.transient;
    f.loading_for = now() - m.load_started;
    f.last_load_s = m.load_s;
    f.stop_reason = m.stop_reason;
    f.backoff = verdict.wait;
    f.planned = m.footprint.has_value();
    if (m.footprint) f.footprint_source = to_string(m.footprint->source);
    f.one_model_at_a_time = policy_->one_model_at_a_time();
    ServeAnswers answers(*this, m, needs, priority, aged);
    const ServeEffects effects = decide_serve(f, answers);
    ServeExecutor run{*this, m, needs, priority, holder};
    m.waits_for_room = false;  // said again by a Wait while it still does (broker/turns.cpp reads it)
    for (const auto& e : effects) std::visit(run, e);
    return run.granted ? Serve::granted : Serve::wait;
}

}  // namespace loch::broker
