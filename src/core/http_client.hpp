// core/http_client — one HTTP/1.1 exchange over TCP with a deadline, on Beast: how every part of loch talks
// to a server on this machine — an engine's readiness, /props, /tokenize and slot calls (engines), loch's own
// port for the CLI and for the Batch API's items (its loop-back). The streamed relay to an engine keeps its
// connections and reads incrementally: core/http_pool, on the same Beast types.
//
// Never throws for the network: a refused, reset or timed-out exchange is status 0 with `error` saying what
// happened; the deadline covers connect, write and read together.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

namespace loch::core {

struct HttpTarget {
    std::string host = "127.0.0.1";  // an address (not a name: nothing here resolves)
    std::uint16_t port = 0;
};

struct HttpCall {
    std::string method = "GET";
    std::string target = "/";
    std::string body;  // sent as application/json unless a Content-Type header says otherwise
    std::vector<std::pair<std::string, std::string>> headers;
    std::chrono::milliseconds timeout{10000};
    std::uint64_t body_limit = std::uint64_t{64} << 20;  // the largest answer read
    // Only connect: a server that accepts the connection answers 200 (an engine without a health route).
    bool connect_only = false;
};

struct HttpReply {
    int status = 0;  // 0 when no HTTP answer came (refused, reset, timed out)
    std::string body;
    std::string error;                          // what went wrong, when status == 0
    std::map<std::string, std::string> fields;  // the answer's header fields, names in lower case
    std::string field(const std::string& lower_name) const {
        const auto it = fields.find(lower_name);
        return it == fields.end() ? std::string() : it->second;
    }
};

boost::asio::awaitable<HttpReply> http_exchange(boost::asio::any_io_executor ex, HttpTarget to,
                                                HttpCall call);

// The same, for an answer that goes on (an event stream): a successful answer's body (status < 400) is handed
// to `on_data` piece by piece as it arrives, until the server ends it (`body` stays empty); an error answer
// is read whole into `body`. The deadline covers the exchange up to the answer's header.
boost::asio::awaitable<HttpReply> http_stream(boost::asio::any_io_executor ex, HttpTarget to, HttpCall call,
                                              std::function<void(std::string_view)> on_data);

}  // namespace loch::core
