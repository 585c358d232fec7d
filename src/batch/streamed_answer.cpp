#include "batch/streamed_answer.hpp"

namespace loch::batch {

using nlohmann::json;

namespace {

const std::string* text_of(const json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

std::size_t index_of(const json& j) {
    const auto it = j.find("index");
    if (it == j.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) return 0;
    return it->get<std::size_t>();
}

}  // namespace

bool streams_item(std::string_view url) {
    return url == "/v1/chat/completions" || url == "/v1/completions";
}

void ask_streamed(json& body) {
    body["stream"] = true;
    if (!body.contains("stream_options") || !body["stream_options"].is_object())
        body["stream_options"] = json::object();
    body["stream_options"]["include_usage"] = true;
}

StreamedAnswer::StreamedAnswer(std::string_view url) : chat_(url == "/v1/chat/completions") {}

void StreamedAnswer::add(const json& chunk) {
    if (!chunk.is_object() || error_) return;
    if (const auto e = chunk.find("error"); e != chunk.end()) {
        error_ = json{{"error", e->is_object() ? *e : json{{"message", e->dump()}}}};
        return;
    }
    for (const char* key : {"id", "created", "model", "system_fingerprint", "usage", "timings"})
        if (const auto it = chunk.find(key); it != chunk.end() && !it->is_null()) top_[key] = *it;
    const auto cs = chunk.find("choices");
    if (cs == chunk.end() || !cs->is_array()) return;
    for (const auto& c : *cs) {
        if (!c.is_object()) continue;
        Choice& choice = choices_[index_of(c)];
        if (const auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) choice.finish_reason = *f;
        if (const auto lp = c.find("logprobs"); lp != c.end() && lp->is_object())
            if (const auto lc = lp->find("content"); lc != lp->end() && lc->is_array())
                for (const auto& t : *lc) choice.logprobs.push_back(t);
        if (!chat_) {
            if (const auto* t = text_of(c, "text")) choice.content += *t;
            continue;
        }
        const auto d = c.find("delta");
        if (d == c.end() || !d->is_object()) continue;
        if (const auto* t = text_of(*d, "content")) choice.content += *t;
        if (const auto* t = text_of(*d, "reasoning_content")) choice.reasoning += *t;
        const auto tcs = d->find("tool_calls");
        if (tcs == d->end() || !tcs->is_array()) continue;
        for (const auto& tc : *tcs) {
            if (!tc.is_object()) continue;
            ToolCall& call = choice.tool_calls[index_of(tc)];
            if (const auto* id = text_of(tc, "id")) call.id += *id;
            const auto fn = tc.find("function");
            if (fn == tc.end() || !fn->is_object()) continue;
            if (const auto* n = text_of(*fn, "name")) call.name += *n;
            if (const auto* a = text_of(*fn, "arguments")) call.arguments += *a;
        }
    }
}

bool StreamedAnswer::finished() const {
    if (choices_.empty()) return false;
    for (const auto& [i, c] : choices_)
        if (c.finish_reason.is_null()) return false;
    return true;
}

json StreamedAnswer::answer() const {
    json choices = json::array();
    for (const auto& [index, c] : choices_) {
        json choice = {{"index", index}, {"finish_reason", c.finish_reason}};
        if (!chat_) {
            choice["text"] = c.content;
            choice["logprobs"] = c.logprobs.empty() ? json(nullptr) : json{{"content", c.logprobs}};
            choices.push_back(std::move(choice));
            continue;
        }
        json message = {{"role", "assistant"}, {"content", c.content}};
        if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
        if (!c.tool_calls.empty()) {
            json calls = json::array();
            for (const auto& [i, tc] : c.tool_calls) {
                json call = {{"type", "function"},
                             {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}};
                if (!tc.id.empty()) call["id"] = tc.id;
                calls.push_back(std::move(call));
            }
            message["tool_calls"] = std::move(calls);
        }
        choice["message"] = std::move(message);
        if (!c.logprobs.empty()) choice["logprobs"] = {{"content", c.logprobs}};
        choices.push_back(std::move(choice));
    }
    json a = top_;
    a["object"] = chat_ ? "chat.completion" : "text_completion";
    a["choices"] = std::move(choices);
    return a;
}

}  // namespace loch::batch
