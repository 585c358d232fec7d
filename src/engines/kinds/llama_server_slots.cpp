// engines/kinds/llama_server_slots — llama-server's slot files behind the Kind's slot-file hooks:
// conversations that survive a stop. From the pinned server (tools/server/server-context.cpp):
//   --slot-save-path DIR   enables POST /slots/{id}?action=save|restore {"filename": a bare name in DIR}
//                          (save → n_saved, n_written, timings.save_ms; restore → n_restored, n_read,
//                          timings.restore_ms). The file holds the slot's tokens and its KV cells
//                          (llama_state_seq_save_file); a busy slot defers the action until it is free.
//   GET /slots             per slot: id, is_processing, n_prompt_tokens (prompt and generated tokens),
//                          and with LLAMA_SERVER_SLOTS_DEBUG=1 in its environment "prompt" (the last
//                          task's prompt tokens, detokenized with special tokens).
//   "id_slot": n           in a completion request runs it in slot n (get_available_slot).
// A slot's text and a request's are compared as the engine renders them: the chat template applied
// (POST /apply-template) for chat, the prompt string for completions, with a leading BOS token's text
// (GET /props bos_token) and leading whitespace dropped from both (comparable()). Before any of that, a
// request is probed without the engine (prompt_probe: its first text must be in a saved slot's text), so
// that a model with saved slots costs a request nothing extra unless one may match. Off with a vision
// projector: a slot's images are not text.
#include "engines/kinds/llama_server.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace loch::engines {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

nlohmann::json reply_json(const EngineReply& r) {
    if (r.status != 200) return nlohmann::json();
    return nlohmann::json::parse(r.body, nullptr, false);
}

std::uint64_t unsigned_field(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() && it->get<std::int64_t>() > 0 ? it->get<std::uint64_t>()
                                                                                   : 0;
}

double ms_field(const nlohmann::json& j, const char* key) {
    const auto t = j.find("timings");
    if (t == j.end() || !t->is_object()) return 0;
    const auto it = t->find(key);
    return it != t->end() && it->is_number() ? it->get<double>() : 0;
}

bool blank(const std::string& text) {
    return text.find_first_not_of(" \n\t") == std::string::npos;
}

// A message's text: the string, or its first text part (OpenAI's and Anthropic's "text", the Responses
// API's "input_text" / "output_text").
std::string first_text(const nlohmann::json& content) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) return {};
    for (const auto& part : content) {
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) continue;
        const auto type = type_of(part);
        if (type == "text" || type == "input_text" || type == "output_text") return part["text"];
    }
    return {};
}

// The text without the BOS token's text and whitespace in front: a slot's detokenized prompt shows the
// BOS its tokenizer added (a template may or may not write one), and a SentencePiece tokenizer's space
// prefix as a leading space. After its first token, detokenized text is the text that was tokenized.
std::string comparable(std::string text, const std::string& bos) {
    std::size_t at = 0;
    for (bool more = true; more;) {
        more = false;
        while (at < text.size() && (text[at] == ' ' || text[at] == '\n')) ++at, more = true;
        if (!bos.empty() && text.compare(at, bos.size(), bos) == 0) at += bos.size(), more = true;
    }
    return text.substr(at);
}

asio::awaitable<std::string> bos_text(asio::any_io_executor ex, const EngineAddress& engine) {
    const auto j = reply_json(co_await engine_request(ex, engine, "GET", "/props", "", 5000ms));
    co_return j.is_object() && j.contains("bos_token") && j["bos_token"].is_string()
        ? j["bos_token"].get<std::string>()
        : std::string();
}

}  // namespace

bool LlamaServerKind::keeps_slot_files(const config::ModelConfig& model) const {
    return mmproj_path(model).empty();  // a slot with images cannot be matched by its text
}

void LlamaServerKind::launch_with_slot_files(const std::filesystem::path& folder, EngineSpec& spec) const {
    spec.argv.insert(spec.argv.end(), {"--slot-save-path", folder.string()});
    // GET /slots shows a slot's prompt text only with this set (server-context.cpp: slots_debug); it also
    // keeps a copy of the last generated text per slot, nothing more.
    spec.env["LLAMA_SERVER_SLOTS_DEBUG"] = "1";
}

asio::awaitable<std::vector<SavedSlot>> LlamaServerKind::save_slots(asio::any_io_executor ex,
                                                                    const EngineAddress& engine,
                                                                    std::string prefix,
                                                                    std::uint64_t min_tokens,
                                                                    std::chrono::seconds limit) const {
    std::vector<SavedSlot> saved;
    const auto slots = reply_json(co_await engine_request(ex, engine, "GET", "/slots", "", 10s));
    if (!slots.is_array()) co_return saved;
    std::optional<std::string> bos;  // asked once, when a slot is worth saving
    for (const auto& s : slots) {
        if (!s.is_object() || !s.contains("id") || !s["id"].is_number_integer()) continue;
        if (s.value("is_processing", true)) continue;  // never while a request runs in it (none should)
        const std::uint64_t held = unsigned_field(s, "n_prompt_tokens");
        if (held < min_tokens || !s.contains("prompt") || !s["prompt"].is_string()) continue;
        const int id = s["id"].get<int>();
        SavedSlot one;
        one.file = fmt::format("{}-{}.bin", prefix, id);
        const auto r = co_await engine_request(ex, engine, "POST", fmt::format("/slots/{}?action=save", id),
                                               nlohmann::json{{"filename", one.file}}.dump(), limit);
        const auto j = reply_json(r);
        if (!j.is_object() || unsigned_field(j, "n_saved") == 0) continue;
        if (!bos) bos = co_await bos_text(ex, engine);
        one.prompt = comparable(s["prompt"].get<std::string>(), *bos);
        one.tokens = unsigned_field(j, "n_saved");
        one.bytes = unsigned_field(j, "n_written");
        one.ms = ms_field(j, "save_ms");
        saved.push_back(std::move(one));
    }
    co_return saved;
}

asio::awaitable<std::optional<std::string>> LlamaServerKind::prompt_text(asio::any_io_executor ex,
                                                                         const EngineAddress& engine,
                                                                         const RequestView& r) const {
    if (r.body == nullptr || !r.images.empty()) co_return std::nullopt;
    std::optional<std::string> text;
    if (const auto chat = chat_messages_of(r.route, *r.body))
        text = co_await templated_prompt(ex, engine, {{"messages", *chat}});
    else if (r.route == "/v1/completions" && r.body->contains("prompt") && (*r.body)["prompt"].is_string())
        text = (*r.body)["prompt"].get<std::string>();
    if (!text) co_return std::nullopt;
    co_return comparable(std::move(*text), co_await bos_text(ex, engine));
}

asio::awaitable<std::optional<RestoredSlot>> LlamaServerKind::restore_slot(asio::any_io_executor ex,
                                                                           const EngineAddress& engine,
                                                                           std::string file) const {
    // The idle slot holding the fewest tokens: a fresh engine's are all empty.
    const auto slots = reply_json(co_await engine_request(ex, engine, "GET", "/slots", "", 10s));
    if (!slots.is_array()) co_return std::nullopt;
    std::optional<int> best;
    std::uint64_t best_held = 0;
    for (const auto& s : slots) {
        if (!s.is_object() || !s.contains("id") || !s["id"].is_number_integer()) continue;
        const int id = s["id"].get<int>();
        if (s.value("is_processing", true)) continue;
        const std::uint64_t held = unsigned_field(s, "n_prompt_tokens");
        if (!best || held < best_held) best = id, best_held = held;
    }
    if (!best) co_return std::nullopt;
    const auto r = co_await engine_request(ex, engine, "POST", fmt::format("/slots/{}?action=restore", *best),
                                           nlohmann::json{{"filename", file}}.dump(), 300s);
    const auto j = reply_json(r);
    if (!j.is_object() || unsigned_field(j, "n_restored") == 0) co_return std::nullopt;
    co_return RestoredSlot{*best, unsigned_field(j, "n_restored"), ms_field(j, "restore_ms")};
}

std::string LlamaServerKind::prompt_probe(const RequestView& r) const {
    // The first text the client sent, trimmed, at most 64 bytes: a template writes it verbatim. Each API
    // in the order the engine renders it: Anthropic's `system` and the Responses API's `instructions`
    // become the first (system) message.
    if (r.body == nullptr || !r.body->is_object()) return {};
    const nlohmann::json& b = *r.body;
    std::string first;
    if (r.route == "/v1/chat/completions" || r.route == "/v1/messages") {
        if (r.route == "/v1/messages" && b.contains("system")) first = first_text(b["system"]);
        if (blank(first) && b.contains("messages") && b["messages"].is_array())
            for (const auto& m : b["messages"]) {
                if (m.is_object() && m.contains("content")) first = first_text(m["content"]);
                if (!blank(first)) break;
            }
    } else if (r.route == "/v1/responses") {
        if (b.contains("instructions") && b["instructions"].is_string()) first = b["instructions"];
        if (blank(first) && b.contains("input")) {
            const auto& in = b["input"];
            if (in.is_string()) first = in.get<std::string>();
            if (in.is_array())
                for (const auto& item : in) {
                    if (item.is_object() && item.contains("content")) first = first_text(item["content"]);
                    if (!blank(first)) break;
                }
        }
    } else if (r.route == "/v1/completions" && b.contains("prompt") && b["prompt"].is_string()) {
        first = b["prompt"].get<std::string>();
    }
    const auto from = first.find_first_not_of(" \n\t");
    if (from == std::string::npos) return {};
    first = first.substr(from, 64);
    // Never cut a UTF-8 character in two (a template may not write a broken one as it came).
    while (!first.empty() && (static_cast<unsigned char>(first.back()) & 0xC0) == 0x80) first.pop_back();
    if (!first.empty() && (static_cast<unsigned char>(first.back()) & 0x80)) first.pop_back();
    const auto to = first.find_last_not_of(" \n\t");
    return to == std::string::npos ? std::string() : first.substr(0, to + 1);
}

void LlamaServerKind::pin_to_slot(std::string& body, int slot) const {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_object()) return;
    j["id_slot"] = slot;
    body = j.dump();
}

}  // namespace loch::engines
