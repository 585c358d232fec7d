// The llama-server kind: a request body as the messages the pinned llama-server renders (chat_messages_of).
// Outside input, read as it comes (fuzz/fuzz_chat_messages.cpp): never a throw, only nullopt for what the
// conversion does not model.
#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "engines/kinds/llama_server.hpp"

namespace loch::engines {

std::string type_of(const nlohmann::json& part) {
    const auto t = part.is_object() ? part.find("type") : part.end();
    return part.is_object() && t != part.end() && t->is_string() ? t->get<std::string>() : std::string();
}

namespace {

// One message of text parts: a string, or parts whose types are all in `text_types` (as OpenAI "text" parts).
std::optional<nlohmann::json> text_content(const nlohmann::json& content,
                                           std::initializer_list<std::string_view> text_types) {
    if (content.is_string()) return content;
    if (!content.is_array()) return std::nullopt;
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& part : content) {
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) return std::nullopt;
        const auto type = type_of(part);
        if (std::find(text_types.begin(), text_types.end(), type) == text_types.end()) return std::nullopt;
        parts.push_back({{"type", "text"}, {"text", part["text"]}});
    }
    return parts;
}

std::optional<nlohmann::json> anthropic_messages(const nlohmann::json& b) {
    if (!b.contains("messages") || !b["messages"].is_array()) return std::nullopt;
    nlohmann::json out = nlohmann::json::array();
    if (b.contains("system") && !b["system"].is_null()) {
        // The engine joins the system blocks' texts into one string.
        std::string system;
        if (b["system"].is_string()) {
            system = b["system"].get<std::string>();
        } else if (b["system"].is_array()) {
            for (const auto& block : b["system"])
                if (block.is_object() && type_of(block) == "text" && block.contains("text") &&
                    block["text"].is_string())
                    system += block["text"].get<std::string>();
        } else {
            return std::nullopt;
        }
        out.push_back({{"role", "system"}, {"content", system}});
    }
    for (const auto& m : b["messages"]) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content"))
            return std::nullopt;
        auto content = text_content(m["content"], {"text"});
        if (!content) return std::nullopt;
        out.push_back({{"role", m["role"]}, {"content", std::move(*content)}});
    }
    return out;
}

std::optional<nlohmann::json> responses_messages(const nlohmann::json& b) {
    if (!b.contains("input")) return std::nullopt;
    nlohmann::json out = nlohmann::json::array();
    if (b.contains("instructions")) {
        if (!b["instructions"].is_string()) return std::nullopt;
        out.push_back({{"role", "system"}, {"content", b["instructions"]}});
    }
    const auto& in = b["input"];
    if (in.is_string()) {
        out.push_back({{"role", "user"}, {"content", in}});
        return out;
    }
    if (!in.is_array()) return std::nullopt;
    for (const auto& item : in) {
        if (!item.is_object() || !item.contains("role") || !item["role"].is_string() ||
            !item.contains("content"))
            return std::nullopt;
        const std::string role = item["role"];
        if (role != "user" && role != "system" && role != "developer" && role != "assistant")
            return std::nullopt;
        // The engine turns a string into one text part; consecutive assistant messages are merged.
        const auto& c = item["content"];
        auto content =
            text_content(c.is_string() ? nlohmann::json::array({{{"type", "input_text"}, {"text", c}}}) : c,
                         {"input_text", "output_text"});
        if (!content) return std::nullopt;
        if (role == "assistant" && !out.empty() && out.back()["role"] == "assistant") {
            for (auto& part : *content) out.back()["content"].push_back(std::move(part));
            continue;
        }
        out.push_back({{"role", role}, {"content", std::move(*content)}});
    }
    return out;
}

}  // namespace

std::optional<nlohmann::json> chat_messages_of(std::string_view route, const nlohmann::json& body) {
    if (!body.is_object()) return std::nullopt;
    if (route == "/v1/chat/completions")
        return body.contains("messages") && body["messages"].is_array() ? std::optional(body["messages"])
                                                                        : std::nullopt;
    if (route == "/v1/messages") return anthropic_messages(body);
    if (route == "/v1/responses") return responses_messages(body);
    return std::nullopt;
}

}  // namespace loch::engines
