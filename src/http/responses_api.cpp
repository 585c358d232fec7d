#include "http/responses_api.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include "batch/store.hpp"
#include "broker/error.hpp"
#include "core/json_text.hpp"
#include "core/time_text.hpp"
#include "http/query.hpp"
#include "responses/store.hpp"

namespace loch::http {

using broker::Error;
using broker::ErrorKind;
using nlohmann::json;

namespace {

// `param`: the request's field that named it, when one did (previous_response_id).
Error not_kept(const std::string& id, const std::string& param = {}) {
    nlohmann::json details = {{"id", id}};
    if (!param.empty()) details["param"] = param;
    return Error(ErrorKind::not_found,
                 fmt::format("{}no stored response '{}': it was sent with store: false, deleted, or is older "
                             "than loch keeps them (responses.max_age, responses.max_bytes in loch.yaml)",
                             param.empty() ? "" : param + ": ", id),
                 std::move(details));
}

// The input items as listed: each with an id (the client's, else one derived from the response's).
json listed_items(const json& items, const std::string& response_id) {
    json out = json::array();
    const std::string stem = response_id.starts_with("resp_") ? response_id.substr(5) : response_id;
    for (std::size_t i = 0; i < items.size(); ++i) {
        json item = items[i];
        if (item.is_object() && !item.contains("id")) item["id"] = fmt::format("msg_{}_{}", stem, i);
        out.push_back(std::move(item));
    }
    return out;
}

}  // namespace

ResponsesApi::ResponsesApi(const ServerOptions& options) : options_(options) {}
ResponsesApi::~ResponsesApi() = default;

responses::Store* ResponsesApi::store() {
    if (store_ || store_failed_ || options_.batch_dir.empty()) return store_.get();
    try {
        std::filesystem::create_directories(options_.batch_dir);
        store_ = std::make_unique<responses::Store>(
            options_.batch_dir / "batches.sqlite3",
            responses::Retention{options_.responses_max_age.count(), options_.responses_max_bytes});
    } catch (const std::exception& e) {
        store_failed_ = true;  // said once; the answers go on without being kept
        spdlog::error("responses are not kept: {}", e.what());
    }
    return store_.get();
}

json ResponsesApi::answer(const Request& req, const Route& r) {
    auto* s = store();
    const auto kept = s ? s->get(r.engine) : std::nullopt;
    if (req.method() == boost::beast::http::verb::delete_) {
        if (!kept || !s->remove(r.engine)) throw not_kept(r.engine);
        return {{"id", r.engine}, {"object", "response"}, {"deleted", true}};
    }
    if (!kept) throw not_kept(r.engine);
    if (r.path != "input_items") return json::parse(kept->response);
    // OpenAI's list: newest first unless ?order=asc; `after` an item id; `limit` 1–100 (20).
    json items = listed_items(json::parse(kept->input), kept->id);
    const std::string_view target(req.target().data(), req.target().size());
    if (query_param(target, "order") != "asc") std::reverse(items.begin(), items.end());
    std::size_t from = 0;
    if (const auto after = query_param(target, "after"))
        for (std::size_t i = 0; i < items.size(); ++i)
            if (items[i].value("id", "") == *after) from = i + 1;
    std::size_t limit = 20;
    if (const auto l = query_param(target, "limit")) {
        try {
            limit = std::clamp<std::size_t>(std::stoul(std::string(*l)), 1, 100);
        } catch (const std::exception&) {
            throw Error(ErrorKind::invalid_request, "limit is a number from 1 to 100", {{"limit", *l}});
        }
    }
    json page = json::array();
    for (std::size_t i = from; i < items.size() && page.size() < limit; ++i) page.push_back(items[i]);
    return {{"object", "list"},
            {"data", page},
            {"first_id", page.empty() ? json(nullptr) : page.front()["id"]},
            {"last_id", page.empty() ? json(nullptr) : page.back()["id"]},
            {"has_more", from + page.size() < items.size()}};
}

std::optional<ResponseTurn> ResponsesApi::prepare(std::string& body) {
    auto j = json::parse(body, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    ResponseTurn t;
    t.input = responses::input_items(j.value("input", json()));
    t.store = !(j.contains("store") && j["store"].is_boolean() && !j["store"].get<bool>());
    json context = json::array();
    if (const auto p = j.find("previous_response_id"); p != j.end() && !p->is_null()) {
        if (!p->is_string() || p->get_ref<const std::string&>().empty())
            throw Error(ErrorKind::invalid_request, "previous_response_id is the id of an earlier response",
                        {{"param", "previous_response_id"}});
        t.previous = p->get<std::string>();
        auto* s = store();
        const auto kept = s ? s->get(t.previous) : std::nullopt;
        if (!kept) throw not_kept(t.previous, "previous_response_id");
        context = responses::next_context(json::parse(kept->context), json::parse(kept->response));
        j.erase("previous_response_id");
    }
    t.context = context;
    for (const auto& item : t.input) t.context.push_back(item);
    if (!t.previous.empty()) {
        j["input"] = t.context;  // the engine sees the whole conversation
        body = core::json_text(j);
    }
    j.erase("input");
    t.request = std::move(j);
    return t;
}

void ResponsesApi::keep(const ResponseTurn& turn, const json& response) {
    if (!turn.store) return;
    auto* s = store();
    if (!s || !response.contains("id") || !response["id"].is_string()) return;
    try {
        responses::StoredResponse r;
        r.id = response["id"];
        r.created_at = response.value("created_at", unix_now());
        r.model = response.value("model", "");
        r.response = core::json_text(response);
        r.input = core::json_text(turn.input);
        r.context = core::json_text(turn.context);
        if (const auto gone = s->put(r, unix_now()); gone > 0)
            spdlog::info("responses: {} older stored response(s) removed (responses.max_age, max_bytes)",
                         gone);
        checkpoint_now_and_then(r.response.size() + r.input.size() + r.context.size());
    } catch (const std::exception& e) {
        spdlog::error("response {} not kept: {}", response.value("id", ""), e.what());
    }
}

void ResponsesApi::checkpoint_now_and_then(std::uint64_t bytes_kept) {
    unchecked_bytes_ += bytes_kept;
    if (unchecked_bytes_ < (4u << 20) || checkpointing_->exchange(true)) return;
    unchecked_bytes_ = 0;
    boost::asio::post(work_, [db = options_.batch_dir / "batches.sqlite3", flag = checkpointing_] {
        try {
            batch::Store::checkpoint(db);
        } catch (const std::exception& e) {
            spdlog::warn("responses: {} (tried again after the next 4 MiB kept)", e.what());
        }
        flag->store(false);
    });
}

void ResponsesShape::name_model(const std::string& model) {
    echoed_ = responses::echoed_fields(turn_.request, model, turn_.previous);
    shaper_.emplace(echoed_, unix_now());
}

std::string ResponsesShape::answer(std::string_view engine_body, unsigned status) {
    if (status >= 300 || !shaper_) return std::string(engine_body);
    auto j = json::parse(engine_body, nullptr, false);
    if (!j.is_object()) return std::string(engine_body);
    const json r = responses::complete_response(std::move(j), echoed_, unix_now());
    api_.keep(turn_, r);
    kept_ = true;
    return core::json_text(r);
}

std::string ResponsesShape::event(std::string_view sse_event) {
    auto j = shaper_ ? sse_json(sse_event) : std::nullopt;
    if (!j || !j->is_object()) return std::string(sse_event);
    const json shaped = shaper_->shape(std::move(*j));
    return "event: " + shaped.value("type", std::string("message")) + "\ndata: " + core::json_text(shaped) +
           "\n\n";
}

std::string ResponsesShape::end() {
    if (!kept_ && shaper_ && shaper_->completed()) {
        api_.keep(turn_, *shaper_->completed());
        kept_ = true;
    }
    return {};
}

}  // namespace loch::http
