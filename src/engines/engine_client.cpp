#include "engines/engine_client.hpp"

namespace loch::engines {

boost::asio::awaitable<EngineReply> engine_request(boost::asio::any_io_executor ex, EngineAddress to,
                                                   std::string method, std::string target, std::string body,
                                                   std::chrono::milliseconds timeout) {
    core::HttpCall call;
    call.method = std::move(method);
    call.target = std::move(target);
    call.body = std::move(body);
    call.timeout = timeout;
    if (!to.api_key.empty()) call.headers.emplace_back("Authorization", "Bearer " + to.api_key);
    co_return co_await core::http_exchange(std::move(ex), {to.host, to.port}, std::move(call));
}

}  // namespace loch::engines
