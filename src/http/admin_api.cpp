// The routes that answer from what loch knows (admin_api.hpp).
#include "http/admin_api.hpp"

#include <algorithm>

#include "http/ollama.hpp"
#include "http/ollama_api.hpp"
#include "http/routes.hpp"
#include "http/sdapi.hpp"

namespace loch::http {

using broker::Error;
using broker::ErrorKind;
using K = Route::Kind;

AdminApi::AdminApi(broker::Broker& broker, observe::Metrics& metrics, ServerSide server)
    : broker_(broker), metrics_(metrics), server_(std::move(server)) {}

bool AdminApi::answers(const Route& r) {
    switch (r.kind) {
        case K::openai:
        case K::ollama_generation:
        case K::files:
        case K::batches:
        case K::dashboard:
        case K::method_not_allowed:
        case K::not_found:
            return false;
        case K::engine_log:
            return !r.follow;
        default:
            return true;
    }
}

namespace {

Reply json_reply(nlohmann::json body, unsigned status = 200) {
    Reply r;
    r.status = status;
    r.body = std::move(body);
    return r;
}

Error no_model(const std::string& name) {
    return Error(ErrorKind::model_not_found, "no model named '" + name + "'", {{"model", name}});
}

}  // namespace

boost::asio::awaitable<Reply> AdminApi::answer(const Request& req, const Route& r) {
    auto& view = broker_.view();
    switch (r.kind) {
        case K::health:
            co_return json_reply(nlohmann::json::object({{"status", "ok"}}));
        case K::models:
            co_return json_reply(co_await view.models());
        case K::model: {
            const nlohmann::json list = co_await view.models();
            for (const auto& m : list["data"]) {
                const auto& aliases = m["loch"]["aliases"];
                if (m["id"] == r.engine ||
                    std::find(aliases.begin(), aliases.end(), r.engine) != aliases.end())
                    co_return json_reply(m);
            }
            throw no_model(r.engine);
        }
        case K::ollama_version:
            // The Ollama API version loch's routes follow (clients may gate features on it), and loch's own.
            co_return json_reply({{"version", "0.12.0"}, {"server", "loch 0.1.0"}});
        case K::ollama_tags:
        case K::ollama_ps:
            co_return json_reply(ollama_models(co_await view.status(), r.kind == K::ollama_ps));
        case K::ollama_pull:
            throw Error(ErrorKind::invalid_request,
                        "loch does not download models: put the model file in the models folder "
                        "(--models-dir) or name it in loch.yaml, then ask for it by name");
        case K::ollama_show: {
            const auto body = nlohmann::json::parse(req.body(), nullptr, false);
            // The client's JSON: a name that is not a string is no name.
            const auto text = [&](const char* k) {
                const auto it = body.is_object() ? body.find(k) : body.end();
                return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
            };
            const std::string name = text("model").empty() ? text("name") : text("model");
            if (name.empty())
                throw Error(ErrorKind::invalid_request,
                            "POST /api/show needs a JSON body {\"model\": \"<name>\"}");
            // "<name>:latest" is <name> (config::Config::find_model).
            const auto* known = view.config().find_model(name);
            auto shown = ollama_show(co_await view.status(), known ? known->name : name);
            if (!shown) throw no_model(name);
            co_return json_reply(std::move(*shown));
        }
        case K::status: {
            nlohmann::json body = co_await view.status();
            body["requests"] = metrics_.summary();
            body["in_flight"] = server_.in_flight();
            body["batches"] = server_.batches();
            body["event_loop"] = server_.event_loop();
            body["connections"] = server_.connections();
            body["upstream_connections"] = server_.upstream();
            co_return json_reply(std::move(body));
        }
        case K::history: {
            nlohmann::json body = co_await view.history();
            body["ttft"] = metrics_.ttft_history();
            co_return json_reply(std::move(body));
        }
        case K::metrics: {
            auto status = co_await view.status();
            status["event_loop"] = server_.event_loop();
            status["connections"] = server_.connections();
            status["batches"] = server_.batches();
            Reply reply;
            reply.text = metrics_.exposition(status);
            reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
            co_return reply;
        }
        case K::plan: {
            auto body = nlohmann::json::parse(req.body(), nullptr, false);
            if (body.is_discarded() || !body.is_object() || !body.contains("model") ||
                !body["model"].is_string())
                throw Error(ErrorKind::invalid_request,
                            "POST /loch/plan needs a JSON body {\"model\": \"<name>\"}");
            co_return json_reply(co_await view.plan(body["model"].get<std::string>()));
        }
        case K::engine_log: {
            auto lines = co_await view.log_tail(r.engine, r.lines);
            if (!lines) throw no_model(r.engine);
            nlohmann::json answer = nlohmann::json::object();
            answer["model"] = r.engine;
            answer["lines"] = std::move(*lines);
            co_return json_reply(std::move(answer));
        }
        case K::sdapi_models:
            co_return json_reply(sd_models(view.models_serving(to_string(Endpoint::sdapi_txt2img))));
        case K::model_load:
            co_return json_reply(co_await broker_.control().load(r.engine));
        case K::model_unload:
            co_return json_reply(co_await broker_.control().unload(r.engine));
        case K::requests_list:
            co_return json_reply({{"requests", server_.in_flight()}});
        case K::request_cancel:
            co_return json_reply(server_.cancel(r.engine));
        case K::holds_list:
        case K::hold_create:
        case K::hold_get:
        case K::hold_update:
        case K::hold_release:
            co_return co_await hold_route(req, r);
        default:
            throw Error(ErrorKind::internal, "the admin API was handed a route that is not its own");
    }
}

boost::asio::awaitable<Reply> AdminApi::hold_route(const Request& req, const Route& r) {
    auto& holds = broker_.holds();
    if (r.kind == K::holds_list) co_return json_reply({{"holds", holds.list()}});
    if (r.kind == K::hold_create) {
        const auto body = nlohmann::json::parse(req.body(), nullptr, false);
        if (body.is_discarded())
            throw Error(ErrorKind::invalid_request,
                        "POST /loch/holds needs a JSON body: {\"memory\": \"12GiB\"}");
        nlohmann::json answer = co_await holds.create(broker::hold_spec_from_json(body));
        const unsigned status = answer["state"] == "granted" ? 201 : 202;
        co_return json_reply(std::move(answer), status);
    }
    std::optional<nlohmann::json> answer;
    if (r.kind == K::hold_get) {
        answer = holds.get(r.engine);
    } else if (r.kind == K::hold_release) {
        answer = holds.release(r.engine, "released by its client (DELETE)");
    } else {
        const auto body =
            req.body().empty() ? nlohmann::json::object() : nlohmann::json::parse(req.body(), nullptr, false);
        if (!body.is_object() || (body.contains("pgid") && !body["pgid"].is_number_integer()))
            throw Error(ErrorKind::invalid_request,
                        "POST /loch/holds/{id} takes {} or {\"pgid\": <process group id>}");
        answer = holds.update(
            r.engine, body.contains("pgid") ? std::optional<int>(body["pgid"].get<int>()) : std::nullopt);
    }
    if (!answer)
        throw Error(ErrorKind::not_found, "no hold '" + r.engine + "' (it ended long ago, or never was)",
                    {{"hold", r.engine}});
    co_return json_reply(std::move(*answer));
}

}  // namespace loch::http
