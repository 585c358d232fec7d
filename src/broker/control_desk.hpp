// broker/control_desk — what a person or a client asks of the engines directly, outside a request's own
// path: `loch load` / `loch unload` (and Ollama's empty prompt), cancelling a queued request (`loch cancel`,
// a client that hung up), and the second signal's kill. A facet of the Broker: each call is its own, on its
// thread; the state it changes (engines, the wait queue) stays the broker's.
#pragma once

#include <cstddef>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "broker/error.hpp"

namespace loch::broker {

class Broker;

class ControlDesk {
  public:
    // Start the model (as a request would) and wait until it is ready; its status. Throws what a request for
    // it would (broker::Error).
    boost::asio::awaitable<nlohmann::json> load(std::string model);
    // Stop it now, or when its running requests end; its status.
    boost::asio::awaitable<nlohmann::json> unload(std::string model);
    // Ends every queued request whose RequestNeeds::request_id is `request_id` with `why` (their acquire
    // throws it) and says how many it ended; a request already granted is the relay's to end.
    std::size_t cancel_waiting(const std::string& request_id, const Error& why);
    // SIGKILL to every engine's process group, now (a second signal while shutdown runs: the person wants
    // loch gone at once). Returns how many were signalled. Nothing is saved or waited for.
    std::size_t kill_engines_now();

  private:
    friend class Broker;
    explicit ControlDesk(Broker& broker) : broker_(broker) {}
    Broker& broker_;
};

}  // namespace loch::broker
