// http/relays — the model requests loch is relaying now, each under its X-Request-Id: what GET /loch/requests
// lists, what a cancel (DELETE /loch/requests/{id}, `loch cancel`) and a batch item's preemption find, and
// what a drain ends. The model proxy and the followed log register theirs (RAII: never left behind).
//
// A queued request is cancelled by taking it out of the broker's queue; a running one has its engine
// connection closed, which is how llama-server and whisper-server are told to stop a task (and free its
// slot). sd-server cannot stop a generation it has started: a cancel of one is refused with the reason rather
// than pretended (the slot and its memory would stay in use while loch showed them free).
#pragma once

#include <chrono>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <nlohmann/json.hpp>

#include "broker/broker.hpp"

namespace loch::http {

// One relay's state, shared with the client watch, with a drain and with cancel.
struct RelayState {
    // What GET /loch/requests lists and DELETE /loch/requests/{id} finds.
    std::string id, model, route;
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    bool granted = false;     // it holds a slot: the engine has (or is about to get) the request
    bool cancellable = true;  // granted: its engine stops a request whose connection closes
    bool done = false;
    bool client_gone = false;
    bool silent = false;  // a stream's watchdog fired: the engine sent nothing for the model's `watchdog`
    std::optional<broker::Error> abort;  // a drain or a cancel: end the relay with this error
    std::shared_ptr<boost::beast::tcp_stream> upstream;
    boost::asio::ip::tcp::socket* watched = nullptr;  // the client socket while a readiness wait watches it
    void close_upstream();
    void finish();  // done: close the upstream socket now, stop watching the client
};

// An entry of a list for as long as it lives (RAII): a relay or a session can never be left registered.
template <class T>
struct Registration {
    std::list<T>* list = nullptr;
    typename std::list<T>::iterator it;
    Registration() = default;
    Registration(std::list<T>& l, T value) : list(&l), it(l.insert(l.end(), std::move(value))) {}
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration() {
        if (list) list->erase(it);
    }
};

class Relays {
  public:
    explicit Relays(broker::Broker& broker) : broker_(broker) {}

    Registration<std::weak_ptr<RelayState>> add(const std::shared_ptr<RelayState>& st) { return {list_, st}; }
    bool empty() const { return list_.empty(); }
    std::size_t size() const { return list_.size(); }

    // The model requests in flight (GET /loch/requests, /loch/status "in_flight"): id, model, route, queued
    // or running, for how long, whether a cancel can stop it.
    nlohmann::json in_flight() const;
    // Ends every request in flight with that id — a queued one leaves the queue, a running one's engine
    // connection is closed — with a `cancelled` error to its client; else a hold with that id is cancelled.
    // Throws not_found (nothing in flight by that id) and not_cancellable (only requests whose engine
    // cannot stop what it started: a running sd-server generation).
    nlohmann::json cancel(const std::string& id);
    // Ends a running request whose engine can stop it, for an interactive request (the runner requeues it).
    bool preempt(const std::string& id);
    // A drain's end: every relay still running ends with `why`.
    void abort_all(const broker::Error& why);

  private:
    broker::Broker& broker_;
    std::list<std::weak_ptr<RelayState>> list_;
};

}  // namespace loch::http
