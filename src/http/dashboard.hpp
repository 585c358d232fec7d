// http/dashboard — the dashboard's handler: its page (src/http/ui/index.html, built into the binary; it polls
// /loch/status every second and follows an engine's log) and the log follow stream it reads
// (GET /loch/engines/{name}/log?follow=1).
#pragma once

#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "broker/broker_view.hpp"
#include "http/relays.hpp"
#include "http/router.hpp"

namespace loch::http {

class Dashboard {
  public:
    using Request = boost::beast::http::request<boost::beast::http::string_body>;

    // `shutting_down`: the server's; a followed log ends when it turns true, or at a drain (`relays`).
    Dashboard(boost::asio::any_io_executor ex, broker::BrokerView& view, Relays& relays,
              const bool& shutting_down)
        : ex_(ex), view_(view), relays_(relays), shutting_down_(shutting_down) {}

    boost::asio::awaitable<bool> page(boost::beast::tcp_stream& stream, const Request& req);
    static std::string_view page_html();  // what page() sends (HEAD / answers its length)
    // The last `lines` lines, then each new one as it is written, as SSE `data:` events holding a JSON
    // string; a comment every 15 s keeps proxies from closing it. Ends when the client leaves or loch shuts
    // down. (Polls the engine's log tail twice a second: a log is not a hot path.)
    boost::asio::awaitable<bool> follow_log(boost::beast::tcp_stream& stream, const Request& req,
                                            const Route& r);

  private:
    boost::asio::any_io_executor ex_;
    broker::BrokerView& view_;
    Relays& relays_;
    const bool& shutting_down_;
};

}  // namespace loch::http
