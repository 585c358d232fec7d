// The Batch API's batches (issue 29, docs/batches.md): POST /v1/batches, GET /v1/batches[/{id}], POST
// /v1/batches/{id}/cancel in OpenAI's shapes, on batch/runner. The runner sends each item back to this server
// as a client would (loopback, the config's API key, X-Loch-Priority: batch), so every route, translation,
// limit, request log line and metric applies to items unchanged, and no second path into the broker exists.
#include <charconv>

#include <fmt/format.h>
#include <boost/beast/http.hpp>

#include "batch/runner.hpp"
#include "batch/streamed_answer.hpp"
#include "config/config.hpp"
#include "core/http_client.hpp"
#include "core/json_text.hpp"
#include "engines/kind.hpp"
#include "http/batch_api.hpp"
#include "http/errors.hpp"
#include "http/query.hpp"
#include "http/respond.hpp"
#include "http/routes.hpp"
#include "http/sse.hpp"
#include "http/translation.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using broker::Error;
using broker::ErrorKind;
using nlohmann::json;

namespace {

// The request body of POST /v1/batches, checked field by field.
batch::NewBatch new_batch(const std::string& text) {
    const auto j = json::parse(text, nullptr, false);
    if (!j.is_object()) throw Error(ErrorKind::invalid_request, "POST /v1/batches takes a JSON object");
    const auto text_field = [&](const char* k) -> std::string {
        if (!j.contains(k) || !j[k].is_string() || j[k].get<std::string>().empty())
            throw Error(ErrorKind::invalid_request,
                        fmt::format("POST /v1/batches needs \"{}\" (a string)", k), {{"param", k}});
        return j[k].get<std::string>();
    };
    batch::NewBatch b;
    b.input_file_id = text_field("input_file_id");
    b.endpoint = text_field("endpoint");
    if (const auto problem = batch_route_problem(b.endpoint))
        throw Error(ErrorKind::invalid_request, "endpoint " + *problem, {{"param", "endpoint"}});
    const std::string window = text_field("completion_window");
    std::string why;
    const auto s = config::parse_duration(window, &why);
    if (!s || s->count() <= 0)
        throw Error(
            ErrorKind::invalid_request,
            fmt::format("completion_window \"{}\" is not a duration (\"24h\", \"90m\"): {}", window, why),
            {{"param", "completion_window"}});
    b.window_s = s->count();
    if (j.contains("metadata") && !j["metadata"].is_null()) {
        const auto& m = j["metadata"];
        bool ok = m.is_object() && m.size() <= 16;
        if (ok)
            for (const auto& [k, v] : m.items())
                ok = ok && k.size() <= 64 && v.is_string() && v.get<std::string>().size() <= 512;
        if (!ok)
            throw Error(
                ErrorKind::invalid_request,
                "metadata is at most 16 string values (keys up to 64 characters, values up to 512), as "
                "OpenAI's",
                {{"param", "metadata"}});
        b.metadata_json = m.dump();
    }
    return b;
}

std::string error_type_of(const json& j) {
    if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("type") &&
        j["error"]["type"].is_string())
        return j["error"]["type"].get<std::string>();
    return {};
}

// A streamed item's answer (batch/streamed_answer): the chunks put together, or the error that ended the
// stream with the status its kind has (an engine's own error chunk carries its code). A stream cut short
// without either is no answer: the item did not finish and runs again.
batch::ItemAnswer streamed_item_answer(std::string_view url, std::string_view sse) {
    batch::StreamedAnswer assembled(url);
    SseFramer framer;
    for (const auto& event : framer.feed(sse))
        if (const auto j = sse_json(event)) assembled.add(*j);
    batch::ItemAnswer answer;
    if (const auto& e = assembled.error()) {
        answer.body = core::json_text(*e);
        answer.error_type = error_type_of(*e);
        const auto& err = (*e)["error"];
        const auto kind = broker::error_kind_named(answer.error_type);
        answer.status =
            err.contains("code") && err["code"].is_number_integer() && err["code"].get<int>() >= 400
                ? err["code"].get<int>()
                : static_cast<int>(status_of(kind.value_or(ErrorKind::engine_failed)));
        return answer;
    }
    if (!assembled.finished()) return answer;
    answer.status = 200;
    answer.body = core::json_text(assembled.answer());
    return answer;
}

}  // namespace

BatchApi::BatchApi(asio::any_io_executor ex, broker::Broker& broker, RequestJournal& journal,
                   const ServerOptions& options, ServerSide server)
    : ex_(std::move(ex)), broker_(broker), journal_(journal), options_(options), server_(std::move(server)) {}

BatchApi::~BatchApi() = default;

void BatchApi::stop() {
    if (runner_) runner_->stop();
}

void BatchApi::start() {
    if (options_.batch_dir.empty() || runner_) return;
    batch::RunnerHooks hooks;
    hooks.send = [this](std::string url, std::string body, std::string id) {
        return send_item(std::move(url), std::move(body), std::move(id));
    };
    hooks.yields = [this](const std::string& model) { return broker_.view().yields_to_interactive(model); };
    hooks.preempt = [this](const std::string& id) { return server_.preempt(id); };
    hooks.cancel = [this](const std::string& id) {
        try {
            server_.cancel(id);
        } catch (const Error&) {
            // Not in flight any more, or running where it cannot stop: it ends by itself.
        }
    };
    hooks.concurrency = [this](const std::string& model) -> unsigned {
        if (options_.batch_concurrency > 0) return options_.batch_concurrency;
        // One slot kept for people where there are several: a person's request then starts at once beside
        // the batch rather than after a preempted item's engine task has stopped (llama-server notices a
        // closed non-streamed request only at its next poll, up to a second later).
        const auto* m = broker_.view().config().find_model(model);
        const unsigned slots = m ? std::max(1u, engines::kind_of(*m).slots(*m)) : 1u;
        return slots > 1 ? slots - 1 : 1u;
    };
    hooks.rules = [this] { return input_rules(); };
    batch::RunnerOptions o;
    o.dir = options_.batch_dir;
    runner_ = std::make_shared<batch::Runner>(ex_, work_, o, std::move(hooks));
    runner_->start();
    broker_.listeners().interactive_arrival = [weak = std::weak_ptr<batch::Runner>(runner_)] {
        if (auto r = weak.lock()) r->kick();
    };
}

json BatchApi::batches() const {
    return runner_ ? runner_->active() : json::array();
}

asio::awaitable<batch::ItemAnswer> BatchApi::send_item(std::string url, std::string body,
                                                       std::string request_id) {
    batch::ItemAnswer answer;
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(options_.listen, ec);
    if (ec || addr.is_unspecified())
        addr = addr.is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                            : asio::ip::address(asio::ip::address_v4::loopback());
    core::HttpCall call;
    call.method = "POST";
    call.target = url;
    call.body = std::move(body);
    call.headers = {{"X-Loch-Priority", "batch"}, {"X-Request-Id", request_id}};
    if (!options_.api_keys.empty())
        call.headers.emplace_back("Authorization", "Bearer " + options_.api_keys.front());
    call.timeout = std::chrono::hours(
        24);  // a backstop only: loch's own limits (max_wait, the watchdogs) end an item long before
    call.body_limit = std::uint64_t{1} << 30;  // images as base64 are large
    const auto res = co_await core::http_exchange(ex_, {addr.to_string(), server_.port()}, std::move(call));
    if (res.status == 0) co_return answer;
    answer.status = res.status;
    answer.body = res.body;
    if (answer.status < 300 && res.field("content-type").starts_with("text/event-stream"))
        co_return streamed_item_answer(url, answer.body);
    if (answer.status >= 300) {
        answer.error_type = error_type_of(json::parse(answer.body, nullptr, false));
        if (const auto ra = res.field("retry-after"); !ra.empty())
            answer.retry_after_s = std::atoi(ra.c_str());
    }
    co_return answer;
}

asio::awaitable<bool> BatchApi::batches_route(beast::tcp_stream& stream, const Request& req, const Route& r) {
    const unsigned v = req.version();
    const bool keep = req.keep_alive();
    auto& store = store_or_refuse();  // (throws not_found without a Batch API)
    const auto one = [&](const batch::BatchRecord& b) {
        return batch::batch_json(b, store.counts(b.id), runner_->progress(b.id));
    };
    if (r.engine.empty() && req.method() == bhttp::verb::post) {
        const auto nb = new_batch(req.body());
        try {
            const auto b = runner_->create(nb);
            co_await write_json(stream, v, keep, 200, one(b));
        } catch (const std::invalid_argument& e) {
            throw Error(ErrorKind::invalid_request, e.what(),
                        {{"param", "input_file_id"}, {"input_file_id", nb.input_file_id}});
        }
        co_return keep;
    }
    if (r.engine.empty()) {
        const std::string target(req.target());
        std::size_t limit = 20;
        if (const auto l = query_param(target, "limit")) {
            auto [p, ec] = std::from_chars(l->data(), l->data() + l->size(), limit);
            if (ec != std::errc() || p != l->data() + l->size() || limit < 1 || limit > 100)
                throw Error(ErrorKind::invalid_request,
                            fmt::format("limit \"{}\" is not a whole number from 1 to 100", *l),
                            {{"param", "limit"}});
        }
        const auto page = store.batches(query_param(target, "after").value_or(""), limit + 1);
        json data = json::array();
        for (std::size_t i = 0; i < page.size() && i < limit; ++i) data.push_back(one(page[i]));
        const json answer = {{"object", "list"},
                             {"data", data},
                             {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
                             {"last_id", data.empty() ? json(nullptr) : data.back()["id"]},
                             {"has_more", page.size() > limit}};
        co_await write_json(stream, v, keep, 200, answer);
        co_return keep;
    }
    std::optional<batch::BatchRecord> b;
    if (r.path.ends_with("/cancel")) {
        try {
            b = runner_->cancel(r.engine);
        } catch (const std::logic_error& e) {
            throw Error(ErrorKind::conflict, e.what(), {{"batch", r.engine}});
        }
    } else {
        b = store.batch(r.engine);
    }
    if (!b) throw Error(ErrorKind::not_found, "no batch '" + r.engine + "'", {{"batch", r.engine}});
    co_await write_json(stream, v, keep, 200, one(*b));
    co_return keep;
}

}  // namespace loch::http
