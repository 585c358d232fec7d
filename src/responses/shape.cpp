#include "responses/shape.hpp"

namespace loch::responses {

using nlohmann::json;

namespace {

json value_or(const json& request, const char* key, json fallback) {
    const auto it = request.find(key);
    return it == request.end() || it->is_null() ? std::move(fallback) : *it;
}

// A part's text as a later turn's input reads it (type and text: the engine's annotations and logprobs
// are not input).
json text_part(const json& part) {
    json p = {{"type", part.value("type", "output_text")}};
    if (part.contains("text")) p["text"] = part["text"];
    if (part.contains("refusal")) p["refusal"] = part["refusal"];
    return p;
}

}  // namespace

json input_items(const json& input) {
    json items = json::array();
    if (input.is_string()) {
        items.push_back({{"type", "message"},
                         {"role", "user"},
                         {"content", json::array({{{"type", "input_text"}, {"text", input}}})}});
        return items;
    }
    if (!input.is_array()) return items;
    for (json item : input) {
        if (item.is_object() && !item.contains("type") && item.contains("role")) item["type"] = "message";
        if (item.is_object() && item.value("type", "") == "message" && item.contains("content") &&
            item["content"].is_string()) {
            const bool assistant = item.value("role", "") == "assistant";
            item["content"] = json::array(
                {{{"type", assistant ? "output_text" : "input_text"}, {"text", item["content"]}}});
        }
        items.push_back(std::move(item));
    }
    return items;
}

json next_context(const json& context, const json& response) {
    json items = context.is_array() ? context : json::array();
    const auto output = response.find("output");
    if (output == response.end() || !output->is_array()) return items;
    for (const auto& out : *output) {
        if (!out.is_object()) continue;
        const std::string type = out.value("type", "");
        if (type == "message") {
            json content = json::array();
            if (out.contains("content") && out["content"].is_array())
                for (const auto& part : out["content"])
                    if (part.is_object()) content.push_back(text_part(part));
            items.push_back(
                {{"type", "message"}, {"role", out.value("role", "assistant")}, {"content", content}});
        } else if (type == "function_call") {
            json call = {{"type", "function_call"}};
            for (const char* key : {"call_id", "name", "arguments"})
                if (out.contains(key)) call[key] = out[key];
            items.push_back(std::move(call));
        } else if (type == "reasoning" && out.contains("content") && out["content"].is_array() &&
                   !out["content"].empty() && out["content"][0].is_object() &&
                   out["content"][0].contains("text") && out["content"][0]["text"].is_string()) {
            items.push_back({{"type", "reasoning"},
                             {"summary", json::array()},
                             {"content", json::array({{{"type", "reasoning_text"},
                                                       {"text", out["content"][0]["text"]}}})}});
        }
    }
    return items;
}

json echoed_fields(const json& request, const std::string& model, const std::string& previous) {
    const json none;
    return {
        {"object", "response"},
        {"model", model},
        {"error", nullptr},
        {"incomplete_details", nullptr},
        {"instructions", value_or(request, "instructions", none)},
        {"max_output_tokens", value_or(request, "max_output_tokens", none)},
        {"metadata", value_or(request, "metadata", json::object())},
        {"parallel_tool_calls", value_or(request, "parallel_tool_calls", true)},
        {"previous_response_id", previous.empty() ? none : json(previous)},
        {"reasoning", value_or(request, "reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
        {"store", value_or(request, "store", true)},
        {"temperature", value_or(request, "temperature", 1.0)},
        {"text", value_or(request, "text", {{"format", {{"type", "text"}}}})},
        {"tool_choice", value_or(request, "tool_choice", "auto")},
        {"tools", value_or(request, "tools", json::array())},
        {"top_p", value_or(request, "top_p", 1.0)},
        {"truncation", value_or(request, "truncation", "disabled")},
        {"user", value_or(request, "user", none)},
    };
}

json complete_response(json engine_response, const json& echoed, std::int64_t now) {
    json r = echoed;
    if (engine_response.is_object())
        for (auto& [key, value] : engine_response.items())
            if (key != "model" && key != "object") r[key] = std::move(value);
    if (!r.contains("status")) r["status"] = "completed";
    if (!r.contains("created_at")) r["created_at"] = now;
    if (!r.contains("completed_at") && r["status"] == "completed") r["completed_at"] = now;
    if (!r.contains("output") || !r["output"].is_array()) r["output"] = json::array();
    if (r.contains("usage") && r["usage"].is_object() && !r["usage"].contains("output_tokens_details"))
        r["usage"]["output_tokens_details"] = {{"reasoning_tokens", 0}};
    return r;
}

int EventShaper::index_of(const std::string& item_id) {
    const auto [it, added] = output_index_.try_emplace(item_id, static_cast<int>(output_index_.size()));
    (void)added;
    return it->second;
}

json EventShaper::response_so_far(const json& engine_response, const char* status) const {
    json r = echoed_;
    r["id"] = engine_response.is_object() ? engine_response.value("id", "") : "";
    r["created_at"] = created_at_;
    r["status"] = status;
    r["output"] = output_;
    r["usage"] = nullptr;
    return r;
}

json EventShaper::shape(json event) {
    if (!event.is_object()) return event;
    const std::string type = event.value("type", "");
    event["sequence_number"] = sequence_++;
    const auto item_id = [&]() -> std::string {
        if (event.contains("item_id") && event["item_id"].is_string()) return event["item_id"];
        if (event.contains("item") && event["item"].is_object() && event["item"].contains("id") &&
            event["item"]["id"].is_string())
            return event["item"]["id"];
        return {};
    };
    if (type == "response.created" || type == "response.in_progress") {
        event["response"] = response_so_far(event.value("response", json::object()), "in_progress");
    } else if (type == "response.completed") {
        json r = complete_response(event.value("response", json::object()), echoed_, created_at_);
        r["created_at"] = created_at_;
        completed_ = r;
        event["response"] = std::move(r);
    } else if (type == "response.output_item.added" || type == "response.output_item.done") {
        const int index = index_of(item_id());
        event["output_index"] = index;
        if (type == "response.output_item.added") {
            if (static_cast<int>(output_.size()) <= index)
                output_.push_back(event.value("item", json::object()));
        } else if (index < static_cast<int>(output_.size())) {
            output_[static_cast<std::size_t>(index)] = event.value("item", json::object());
        }
    } else if (type.starts_with("response.") && event.contains("item_id")) {
        // Every event of an item's content: which item (output_index), which part of it (one per item).
        event["output_index"] = index_of(item_id());
        const bool of_content =
            type.starts_with("response.content_part.") || type.starts_with("response.output_text.") ||
            type.starts_with("response.reasoning_text.") || type.starts_with("response.refusal.");
        if (of_content && !event.contains("content_index")) event["content_index"] = 0;
        if (type.starts_with("response.output_text.") && !event.contains("logprobs"))
            event["logprobs"] = json::array();
    }
    return event;
}

}  // namespace loch::responses
