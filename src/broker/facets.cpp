// The Broker's facets (hold_desk.hpp, broker_view.hpp, control_desk.hpp): each call is the broker's own, on
// its thread.
#include "broker/broker.hpp"

namespace loch::broker {

boost::asio::awaitable<nlohmann::json> HoldDesk::create(HoldSpec spec) {
    return broker_.create_hold(std::move(spec));
}
std::optional<nlohmann::json> HoldDesk::get(const std::string& id, bool heartbeat) {
    return broker_.hold(id, heartbeat);
}
std::optional<nlohmann::json> HoldDesk::update(const std::string& id, std::optional<int> pgid) {
    return broker_.update_hold(id, pgid);
}
std::optional<nlohmann::json> HoldDesk::release(const std::string& id, const std::string& why) {
    return broker_.release_hold(id, why);
}
std::optional<nlohmann::json> HoldDesk::cancel(const std::string& id) {
    return broker_.cancel_hold(id);
}
nlohmann::json HoldDesk::list() const {
    return broker_.holds_json();
}

boost::asio::awaitable<nlohmann::json> ControlDesk::load(std::string model) {
    return broker_.preload(std::move(model));
}
boost::asio::awaitable<nlohmann::json> ControlDesk::unload(std::string model) {
    return broker_.unload(std::move(model));
}
std::size_t ControlDesk::cancel_waiting(const std::string& request_id, const Error& why) {
    return broker_.cancel_waiting(request_id, why);
}
std::size_t ControlDesk::kill_engines_now() {
    return broker_.kill_engines_now();
}

const config::Config& BrokerView::config() const {
    return *broker_.cfg_;
}
boost::asio::awaitable<nlohmann::json> BrokerView::models() {
    return broker_.models();
}
boost::asio::awaitable<nlohmann::json> BrokerView::status() {
    return broker_.status();
}

boost::asio::awaitable<nlohmann::json> BrokerView::history() {
    return broker_.history();
}
boost::asio::awaitable<nlohmann::json> BrokerView::plan(std::string model) {
    return broker_.plan(std::move(model));
}

}  // namespace loch::broker
