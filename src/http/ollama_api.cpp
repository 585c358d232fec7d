#include "http/ollama_api.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/json_text.hpp"
#include "core/time_text.hpp"
#include "http/json_body.hpp"
#include "http/ollama.hpp"

namespace loch::http {

using broker::Error;
using broker::ErrorKind;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// An engine error's "message" when it is a string, else `fallback` (an engine's odd answer is never a crash).
std::string message_or(const nlohmann::json& e, std::string fallback) {
    const auto it = e.find("message");
    return it != e.end() && it->is_string() ? it->get<std::string>() : fallback;
}

Error ollama_invalid(const std::string& msg) {
    return Error(ErrorKind::invalid_request, msg);
}

std::string now_text() {
    return iso8601_utc(std::chrono::system_clock::now());
}

// Sampling options Ollama and llama-server share by name; num_predict and num_ctx are handled apart.
constexpr const char* kPassedOptions[] = {"temperature",
                                          "top_p",
                                          "top_k",
                                          "min_p",
                                          "typical_p",
                                          "seed",
                                          "stop",
                                          "repeat_penalty",
                                          "repeat_last_n",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "mirostat",
                                          "mirostat_tau",
                                          "mirostat_eta",
                                          "num_keep"};

void map_options(const json& in, json& out, OllamaCall& call) {
    if (!in.contains("options") || in["options"].is_null()) return;
    const auto& o = in["options"];
    if (!o.is_object()) throw ollama_invalid("'options' must be an object");
    for (const char* k : kPassedOptions)
        if (o.contains(k)) out[k == std::string_view("num_keep") ? "n_keep" : k] = o[k];
    if (o.contains("num_predict")) {
        if (!o["num_predict"].is_number_integer())
            throw ollama_invalid("'options.num_predict' must be an integer");
        const auto n = o["num_predict"].get<long long>();
        if (n >= 0) out["max_tokens"] = n;  // -1 (and -2): until the context is full, the engine's default
    }
    if (o.contains("num_ctx")) {
        if (!o["num_ctx"].is_number_unsigned())
            throw ollama_invalid("'options.num_ctx' must be a positive integer");
        call.num_ctx = o["num_ctx"].get<std::uint64_t>();
    }
}

void map_format(const json& in, json& out) {
    if (!in.contains("format") || in["format"].is_null()) return;
    const auto& f = in["format"];
    if (f.is_string() && f.get<std::string>() == "json")
        out["response_format"] = {{"type", "json_object"}};
    else if (f.is_object())
        out["response_format"] = {{"type", "json_schema"},
                                  {"json_schema", {{"name", "response"}, {"schema", f}}}};
    else if (!(f.is_string() && f.get<std::string>().empty()))
        throw ollama_invalid("'format' must be \"json\" or a JSON schema object");
}

// Ollama message → OpenAI message: images become image parts, tool call arguments a JSON string.
json map_message(const json& m, std::size_t i) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        throw ollama_invalid(fmt::format("'messages[{}]' needs a string 'role'", i));
    json out = {{"role", m["role"]}};
    const std::string text =
        m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null())
        throw ollama_invalid(fmt::format("'messages[{}].content' must be a string", i));
    if (m.contains("images") && m["images"].is_array() && !m["images"].empty()) {
        json parts = json::array({{{"type", "text"}, {"text", text}}});
        for (const auto& img : m["images"]) {
            if (!img.is_string())
                throw ollama_invalid(fmt::format("'messages[{}].images' must hold base64 strings", i));
            parts.push_back({{"type", "image_url"},
                             {"image_url", {{"url", "data:image/png;base64," + img.get<std::string>()}}}});
        }
        out["content"] = std::move(parts);
    } else {
        out["content"] = text;
    }
    if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        json calls = json::array();
        std::size_t n = 0;
        for (const auto& c : m["tool_calls"]) {
            if (!c.is_object() || !c.contains("function")) continue;
            json fn = c["function"];
            if (fn.contains("arguments") && !fn["arguments"].is_string())
                fn["arguments"] = core::json_text(fn["arguments"]);
            calls.push_back({{"id", fmt::format("call_{}", n++)}, {"type", "function"}, {"function", fn}});
        }
        out["tool_calls"] = std::move(calls);
    }
    if (m.contains("tool_name")) out["name"] = m["tool_name"];
    return out;
}

// Nanoseconds, as Ollama reports durations.
std::int64_t ns(Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// The answer of /api/chat (`message`) or /api/generate (`response`), streamed or whole.
class OllamaGeneration : public Translation {
  public:
    OllamaGeneration(std::string model, bool chat) : model_(std::move(model)), chat_(chat) {}
    std::string stream_content_type() const override { return "application/x-ndjson"; }

    std::string answer(std::string_view engine_body, unsigned status) override {
        auto j = json::parse(engine_body, nullptr, false);
        if (status >= 400 || j.is_discarded() || !j.is_object()) return engine_failure(j, engine_body);
        std::string text, reason = "stop";
        json tool_calls;
        if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
            const auto& c = j["choices"][0];
            if (c.contains("finish_reason") && c["finish_reason"].is_string()) reason = c["finish_reason"];
            if (c.contains("message") && c["message"].is_object()) {
                const auto& m = c["message"];
                if (m.contains("content") && m["content"].is_string()) text = m["content"];
                if (m.contains("tool_calls") && m["tool_calls"].is_array()) tool_calls = m["tool_calls"];
            } else if (c.contains("text") && c["text"].is_string()) {
                text = c["text"];
            }
        }
        take_usage(j);
        json out = piece(text, tool_calls);
        finish(out, reason);
        return core::json_text(out);
    }

    std::string event(std::string_view sse_event) override {
        auto j = sse_json(sse_event);
        if (!j || !j->is_object()) return {};
        take_usage(*j);
        if (j->contains("error")) {
            failed_ = true;
            const auto& e = (*j)["error"];
            return core::json_text(
                       {{"error", e.is_object() ? message_or(e, core::json_text(e)) : core::json_text(e)}}) +
                   "\n";
        }
        if (!j->contains("choices") || !(*j)["choices"].is_array() || (*j)["choices"].empty()) return {};
        const auto& c = (*j)["choices"][0];
        if (c.contains("finish_reason") && c["finish_reason"].is_string()) reason_ = c["finish_reason"];
        std::string text;
        if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
            c["delta"]["content"].is_string())
            text = c["delta"]["content"];
        else if (c.contains("text") && c["text"].is_string())
            text = c["text"];
        if (text.empty()) return {};
        json out = piece(text, nullptr);
        out["done"] = false;
        return core::json_text(out) + "\n";
    }

    std::string end() override {
        if (failed_) return {};
        json out = piece("", nullptr);
        finish(out, reason_);
        return core::json_text(out) + "\n";
    }

    std::string stream_error(const Error& e) const override {
        return core::json_text({{"error", e.what()}}) + "\n";
    }
    json error_body(const Error& e) const override {
        return {{"error", e.what()}, {"type", broker::to_string(e.kind())}, {"details", e.details()}};
    }

  private:
    json piece(const std::string& text, const json& tool_calls) const {
        json out = {{"model", model_}, {"created_at", now_text()}};
        if (chat_) {
            json m = {{"role", "assistant"}, {"content", text}};
            if (tool_calls.is_array() && !tool_calls.empty()) {
                json calls = json::array();
                for (const auto& c : tool_calls) {
                    if (!c.is_object() || !c.contains("function")) continue;
                    json fn = c["function"];
                    if (fn.contains("arguments") && fn["arguments"].is_string()) {
                        auto args = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
                        fn["arguments"] = args.is_discarded() ? json::object() : args;
                    }
                    calls.push_back({{"function", fn}});
                }
                m["tool_calls"] = std::move(calls);
            }
            out["message"] = std::move(m);
        } else {
            out["response"] = text;
        }
        return out;
    }
    // A figure from the engine's answer, or `fallback` when it is missing or not a number (an engine's odd
    // answer is never a crash).
    template <class T>
    static T number_or(const json& o, const char* key, T fallback) {
        const auto it = o.find(key);
        return it != o.end() && it->is_number() ? it->template get<T>() : fallback;
    }
    void take_usage(const json& j) {
        if (j.contains("usage") && j["usage"].is_object()) {
            prompt_ = number_or(j["usage"], "prompt_tokens", prompt_);
            eval_ = number_or(j["usage"], "completion_tokens", eval_);
        }
        if (j.contains("timings") && j["timings"].is_object()) {
            const auto& t = j["timings"];
            prompt_ms_ = number_or(t, "prompt_ms", prompt_ms_);
            eval_ms_ = number_or(t, "predicted_ms", eval_ms_);
            prompt_ = number_or(t, "prompt_n", prompt_);
            eval_ = number_or(t, "predicted_n", eval_);
        }
    }
    void finish(json& out, const std::string& reason) const {
        out["done"] = true;
        out["done_reason"] = reason == "length" ? "length" : reason == "tool_calls" ? "stop" : reason;
        out["total_duration"] = ns(Clock::now() - started_);
        out["load_duration"] = 0;
        out["prompt_eval_count"] = prompt_;
        out["prompt_eval_duration"] = static_cast<std::int64_t>(prompt_ms_ * 1e6);
        out["eval_count"] = eval_;
        out["eval_duration"] = static_cast<std::int64_t>(eval_ms_ * 1e6);
    }
    std::string engine_failure(const json& j, std::string_view raw) const {
        std::string msg(raw);
        if (!j.is_discarded() && j.is_object() && j.contains("error"))
            msg = j["error"].is_object() ? message_or(j["error"], core::json_text(j["error"]))
                                         : core::json_text(j["error"]);
        return core::json_text({{"error", msg}});
    }

    std::string model_;
    bool chat_;
    Clock::time_point started_ = Clock::now();
    std::string reason_ = "stop";
    std::uint64_t prompt_ = 0, eval_ = 0;
    double prompt_ms_ = 0, eval_ms_ = 0;
    bool failed_ = false;
};

// /api/embed (`embeddings`, one per input) or the older /api/embeddings (`embedding`, one prompt).
class OllamaEmbedding : public Translation {
  public:
    OllamaEmbedding(std::string model, bool legacy) : model_(std::move(model)), legacy_(legacy) {}
    std::string answer(std::string_view engine_body, unsigned status) override {
        auto j = json::parse(engine_body, nullptr, false);
        if (status >= 400 || j.is_discarded() || !j.is_object() || !j.contains("data") ||
            !j["data"].is_array()) {
            std::string msg(engine_body);
            if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object())
                msg = message_or(j["error"], msg);
            return core::json_text({{"error", msg}});
        }
        json vectors = json::array();
        for (const auto& d : j["data"])  // (an array: checked above)
            if (d.is_object() && d.contains("embedding")) vectors.push_back(d["embedding"]);
        if (legacy_) return core::json_text({{"embedding", vectors.empty() ? json::array() : vectors[0]}});
        json out = {{"model", model_},
                    {"embeddings", std::move(vectors)},
                    {"total_duration", ns(Clock::now() - started_)},
                    {"load_duration", 0}};
        if (j.contains("usage") && j["usage"].is_object())
            if (const auto& u = j["usage"]; u.contains("prompt_tokens") && u["prompt_tokens"].is_number())
                out["prompt_eval_count"] = u["prompt_tokens"];
        return core::json_text(out);
    }
    std::string event(std::string_view) override { return {}; }
    json error_body(const Error& e) const override {
        return {{"error", e.what()}, {"type", broker::to_string(e.kind())}, {"details", e.details()}};
    }

  private:
    std::string model_;
    bool legacy_;
    Clock::time_point started_ = Clock::now();
};

}  // namespace

namespace {
// Seconds as a keep_alive: a negative one, or one longer than anybody waits (a century: also past what a
// count of seconds holds, "1e30s", "inf"), keeps the model loaded for good, as Ollama's negative one does.
KeepAlive keep_alive_of(double seconds) {
    constexpr double kForever = 100.0 * 365 * 24 * 3600;
    if (std::isnan(seconds)) throw ollama_invalid("'keep_alive' is not a number of seconds");
    if (seconds < 0 || seconds >= kForever) return std::optional<std::chrono::seconds>{};
    return std::optional<std::chrono::seconds>{
        std::chrono::seconds(static_cast<long long>(std::ceil(seconds)))};
}
}  // namespace

KeepAlive parse_keep_alive(const json& v) {
    if (v.is_null()) return std::nullopt;
    if (v.is_number()) return keep_alive_of(v.get<double>());
    if (!v.is_string())
        throw ollama_invalid("'keep_alive' must be a duration (\"5m\") or a number of seconds");
    const std::string s = v.get<std::string>();
    if (s.empty()) return std::nullopt;
    if (s.starts_with('-')) return std::optional<std::chrono::seconds>{};
    // Go durations: "1h30m", "10m", "45s", "300ms"; a bare number means seconds.
    double total = 0;
    const char* p = s.data();
    const char* endp = s.data() + s.size();
    while (p < endp) {
        double x = 0;
        auto [q, ec] = std::from_chars(p, endp, x);
        if (ec != std::errc())
            throw ollama_invalid("'keep_alive' \"" + s +
                                 "\" is not a duration (e.g. \"5m\", \"1h\", \"30s\")");
        p = q;
        std::string unit;
        while (p < endp && std::isalpha(static_cast<unsigned char>(*p))) unit += *p++;
        const double mult = unit.empty() || unit == "s" ? 1
                            : unit == "m"               ? 60
                            : unit == "h"               ? 3600
                            : unit == "ms"              ? 1e-3
                                                        : -1;
        if (mult < 0)
            throw ollama_invalid("'keep_alive' \"" + s + "\": unknown unit '" + unit +
                                 "' (use h, m, s or ms)");
        total += x * mult;
    }
    return keep_alive_of(total);
}

OllamaCall translate_ollama(std::string_view path, std::string_view body) {
    const json in = parse_json_body(body);
    if (!in.is_object()) throw ollama_invalid("the request body must be a JSON object");
    if (!in.contains("model") || !in["model"].is_string() || in["model"].get<std::string>().empty())
        throw ollama_invalid("'model' (a model name) is required");
    OllamaCall call;
    call.model = in["model"];
    if (in.contains("keep_alive")) call.keep_alive = parse_keep_alive(in["keep_alive"]);
    if (in.contains("stream") && !in["stream"].is_null()) {
        if (!in["stream"].is_boolean()) throw ollama_invalid("'stream' must be true or false");
        call.stream = in["stream"];
    }
    const bool unload = call.keep_alive && *call.keep_alive && (*call.keep_alive)->count() == 0;
    json out = {{"model", call.model}};

    if (path == "/api/embed" || path == "/api/embeddings") {
        const bool legacy = path == "/api/embeddings";
        const char* field = legacy ? "prompt" : "input";
        if (!in.contains(field) || !(in[field].is_string() || in[field].is_array()))
            throw ollama_invalid(
                fmt::format("'{}' must be a string{}", field, legacy ? "" : " or a list of strings"));
        call.endpoint = Endpoint::embeddings;
        call.stream = false;
        out["input"] = in[field];
        if (in.contains("dimensions")) out["dimensions"] = in["dimensions"];
        map_options(in, out, call);
        out.erase("max_tokens");
        call.translation = std::make_unique<OllamaEmbedding>(call.model, legacy);
        call.body = core::json_text(out);
        return call;
    }

    const bool chat = path == "/api/chat";
    if (chat) {
        if (in.contains("messages") && !in["messages"].is_array() && !in["messages"].is_null())
            throw ollama_invalid("'messages' must be a list");
        json messages = json::array();
        if (in.contains("messages") && in["messages"].is_array())
            for (std::size_t i = 0; i < in["messages"].size(); ++i)
                messages.push_back(map_message(in["messages"][i], i));
        if (messages.empty()) call.only = unload ? OllamaCall::Only::unload : OllamaCall::Only::load;
        out["messages"] = std::move(messages);
        if (in.contains("tools") && in["tools"].is_array() && !in["tools"].empty())
            out["tools"] = in["tools"];
        call.endpoint = Endpoint::chat_completions;
    } else {
        if (in.contains("prompt") && !in["prompt"].is_string() && !in["prompt"].is_null())
            throw ollama_invalid("'prompt' must be a string");
        const std::string prompt =
            in.contains("prompt") && in["prompt"].is_string() ? in["prompt"].get<std::string>() : "";
        const bool has_images = in.contains("images") && in["images"].is_array() && !in["images"].empty();
        if (prompt.empty() && !has_images)
            call.only = unload ? OllamaCall::Only::unload : OllamaCall::Only::load;
        bool raw = false;
        if (in.contains("raw") && !in["raw"].is_null()) {
            if (!in["raw"].is_boolean()) throw ollama_invalid("'raw' must be true or false");
            raw = in["raw"].get<bool>();
        }
        if (raw) {
            call.endpoint = Endpoint::completions;
            out["prompt"] = prompt;
        } else {
            call.endpoint = Endpoint::chat_completions;
            json messages = json::array();
            if (in.contains("system") && in["system"].is_string())
                messages.push_back({{"role", "system"}, {"content", in["system"]}});
            json user = {{"role", "user"}, {"content", prompt}};
            if (has_images) user["images"] = in["images"];
            messages.push_back(map_message(user, messages.size()));
            out["messages"] = std::move(messages);
        }
    }
    map_options(in, out, call);
    map_format(in, out);
    out["stream"] = call.stream;
    if (call.stream) out["stream_options"] = {{"include_usage", true}};
    call.translation = std::make_unique<OllamaGeneration>(call.model, chat);
    call.body = core::json_text(out);
    return call;
}

json ollama_load_answer(std::string_view path, const std::string& model, bool unloaded) {
    json out = {{"model", model},
                {"created_at", now_text()},
                {"done", true},
                {"done_reason", unloaded ? "unload" : "load"}};
    if (path == "/api/chat")
        out["message"] = {{"role", "assistant"}, {"content", ""}};
    else
        out["response"] = "";
    return out;
}

std::optional<json> ollama_show(const json& status, const std::string& model) {
    for (const auto& e : status.value("engines", json::array())) {
        const auto aliases = e.value("aliases", json::array());
        if (e.value("name", "") != model && std::find(aliases.begin(), aliases.end(), model) == aliases.end())
            continue;
        json info = ollama_model_info(e);
        if (e.contains("slot_ctx")) info["loch.slot_context_length"] = e["slot_ctx"];
        return json{{"modelfile", ""},
                    {"parameters", ""},
                    {"template", ""},
                    {"modified_at", now_text()},
                    {"details", ollama_details(e)},
                    {"model_info", info},
                    {"capabilities", ollama_capabilities(e)},
                    {"loch", e}};
    }
    return std::nullopt;
}

}  // namespace loch::http
