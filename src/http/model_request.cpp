// http/model_proxy — a model request of either API: an id and a RequestRecord, the proxy (an Ollama one
// translated first), and one line in the request log with its metrics.
#include "http/model_proxy.hpp"

#include <fmt/format.h>
#include <boost/beast/http.hpp>

#include "http/errors.hpp"
#include "http/ollama.hpp"
#include "http/ollama_api.hpp"
#include "http/respond.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using broker::Error;
using broker::ErrorKind;

asio::awaitable<bool> ModelProxy::model_request(boost::beast::tcp_stream& stream, Request& req,
                                                const Route& r, Connection& conn) {
    const auto started = std::chrono::steady_clock::now();
    observe::RequestRecord rec;
    rec.id = journal_.id_of(req);
    const std::string_view target = req.target();
    rec.route = std::string(target.substr(0, target.find('?')));
    bool keep = false;
    if (r.kind == Route::Kind::ollama_generation) {
        keep = co_await ollama_request(stream, req, r, rec, conn);
    } else {
        ProxyCall call;
        call.endpoint = r.endpoint;
        call.upstream_path = std::string(r.model_route->path);
        call.record = &rec;
        call.conn = &conn;
        keep = co_await proxy(stream, req, std::move(call));
    }
    journal_.finish(std::move(rec), started);
    co_return keep;
}

asio::awaitable<bool> ModelProxy::ollama_request(boost::beast::tcp_stream& stream, Request& req,
                                                 const Route& r, observe::RequestRecord& rec,
                                                 Connection& conn) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    std::optional<Error> err;
    try {
        OllamaCall call = translate_ollama(r.path, req.body());
        rec.model = call.model;
        rec.stream = call.stream;
        if (call.only != OllamaCall::Only::none) {
            // An empty prompt loads the model (or, with keep_alive 0, unloads it), as Ollama does.
            const bool unload = call.only == OllamaCall::Only::unload;
            if (!unload && call.keep_alive) {
                broker::RequestNeeds needs;
                needs.keep_alive = call.keep_alive;
                broker::Lease held = co_await broker_.acquire(call.model, needs);
                rec.decision = held.decision();
            } else {
                const auto st = unload ? co_await broker_.control().unload(call.model)
                                       : co_await broker_.control().load(call.model);
                (void)st;
            }
            rec.status = 200;
            co_await write_json(stream, v, keep, 200, ollama_load_answer(r.path, call.model, unload));
            co_return keep;
        }
        req.body() = std::move(call.body);
        ProxyCall pc;
        pc.endpoint = call.endpoint;
        pc.upstream_path = std::string(to_string(call.endpoint));
        pc.translation = call.translation.get();
        pc.keep_alive = call.keep_alive;
        pc.num_ctx = call.num_ctx;
        pc.record = &rec;
        pc.conn = &conn;
        co_return co_await proxy(stream, req, std::move(pc));
    } catch (const Error& e) {
        err = e;
    }
    rec.status = static_cast<unsigned>(status_of(err->kind()));
    rec.error_type = broker::to_string(err->kind());
    const nlohmann::json body =
        ollama_error_body(err->what(), broker::to_string(err->kind()), err->details());
    co_await write_json(stream, v, keep, rec.status, body, err->retry_after_s());
    co_return keep;
}

}  // namespace loch::http
