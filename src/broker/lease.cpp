// Lease: one request's hold on a slot; releasing it hands the slot back on the broker's thread (now, or on
// the broker's next pass when the lease is just dropped).
#include <boost/asio/post.hpp>

#include "broker/broker.hpp"
#include "broker/model_state.hpp"

namespace loch::broker {

using namespace std::chrono_literals;

Lease& Lease::operator=(Lease&& o) noexcept {
    if (this != &o) {
        release_later();
        broker_ = std::exchange(o.broker_, nullptr);
        alive_ = std::move(o.alive_);
        granted_at_ = o.granted_at_;
        model_ = std::move(o.model_);
        address_ = std::move(o.address_);
        facts_ = std::move(o.facts_);
        kind_ = o.kind_;
        model_cfg_ = o.model_cfg_;
        watchdog_ = o.watchdog_;
        engine_ = std::move(o.engine_);
        queue_wait_ = o.queue_wait_;
        decision_ = std::move(o.decision_);
        priority_ = std::move(o.priority_);
        interactive_ = o.interactive_;
        transient_ = std::move(o.transient_);
    }
    return *this;
}

void Lease::release() {
    if (!broker_) return;
    Broker* b = std::exchange(broker_, nullptr);
    if (auto alive = alive_.lock(); alive && *alive)
        b->release(model_, b->now() - granted_at_, transient_, interactive_);
}

void Lease::release_later() {
    if (!broker_) return;
    Broker* b = std::exchange(broker_, nullptr);
    auto alive = alive_.lock();
    if (!alive || !*alive) return;
    const auto held = b->now() - granted_at_;
    asio::post(b->ex_, [b, weak = alive_, model = model_, held, transient = std::move(transient_),
                        interactive = interactive_] {
        if (auto a = weak.lock(); a && *a) b->release(model, held, transient, interactive);
    });
}

}  // namespace loch::broker
