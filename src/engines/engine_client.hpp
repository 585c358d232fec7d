// engines/engine_client — one small HTTP exchange with an engine on localhost (readiness, /props, /tokenize,
// /apply-template, slot calls), with a deadline: core/http_client with the engine's secret. The streaming
// proxy path does not use this: it relays incrementally (http/proxy.cpp over core/http_pool.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "core/http_client.hpp"

namespace loch::engines {

// status 0 when no HTTP answer came (refused, reset, timed out); `error` says why.
using EngineReply = core::HttpReply;

// Where an engine listens and the secret it wants (engines/spec.hpp: EngineSpec::api_key).
struct EngineAddress {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::string api_key;  // sent as `Authorization: Bearer <key>` when not empty
};

boost::asio::awaitable<EngineReply> engine_request(boost::asio::any_io_executor ex, EngineAddress to,
                                                   std::string method, std::string target, std::string body,
                                                   std::chrono::milliseconds timeout);

}  // namespace loch::engines
