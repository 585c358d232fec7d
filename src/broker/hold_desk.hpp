// broker/hold_desk — the holds' API (broker/holds.hpp says what a hold is): what POST/GET/PATCH/DELETE
// /loch/holds, `loch run` and cancel call. A facet of the Broker: holds are admitted, queued and booked by
// the broker's own admission and ledger, so the desk asks it; their state lives in its HoldsBook.
#pragma once

#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "broker/holds.hpp"

namespace loch::broker {

class Broker;

class HoldDesk {
  public:
    // Books it now or queues it (its view says which); throws Error for bad input (invalid_request), a size
    // that can never fit (insufficient_memory, with the numbers and who holds the device) and a full queue.
    boost::asio::awaitable<nlohmann::json> create(HoldSpec spec);
    // The others answer nullopt for an unknown id; a read or an update is also the hold's heartbeat.
    std::optional<nlohmann::json> get(const std::string& id, bool heartbeat = true);
    // `pgid` ties a job's process group to it (loch run, after the spawn).
    std::optional<nlohmann::json> update(const std::string& id, std::optional<int> pgid);
    std::optional<nlohmann::json> release(const std::string& id, const std::string& why);
    // Released as `cancelled` (a `loch run` job stops its command when it sees that).
    std::optional<nlohmann::json> cancel(const std::string& id);
    nlohmann::json list() const;

  private:
    friend class Broker;
    explicit HoldDesk(Broker& broker) : broker_(broker) {}
    Broker& broker_;
};

}  // namespace loch::broker
