#include "http/openai_request.hpp"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "broker/error.hpp"
#include "http/audio_length.hpp"
#include "http/data_url.hpp"
#include "http/image_size.hpp"
#include "http/json_body.hpp"
#include "http/multipart.hpp"

namespace loch::http {

using broker::Error;
using broker::ErrorKind;

std::string_view to_string(Endpoint e) {
    switch (e) {
        case Endpoint::chat_completions:
            return "/v1/chat/completions";
        case Endpoint::completions:
            return "/v1/completions";
        case Endpoint::embeddings:
            return "/v1/embeddings";
        case Endpoint::image_generations:
            return "/v1/images/generations";
        case Endpoint::image_edits:
            return "/v1/images/edits";
        case Endpoint::sdapi_txt2img:
            return "/sdapi/v1/txt2img";
        case Endpoint::audio_transcriptions:
            return "/v1/audio/transcriptions";
        case Endpoint::audio_translations:
            return "/v1/audio/translations";
        case Endpoint::audio_speech:
            return "/v1/audio/speech";
        case Endpoint::responses:
            return "/v1/responses";
        case Endpoint::anthropic_messages:
            return "/v1/messages";
        case Endpoint::rerank:
            return "/v1/rerank";
        case Endpoint::anthropic_count_tokens:
            return "/v1/messages/count_tokens";
        case Endpoint::responses_input_tokens:
            return "/v1/responses/input_tokens";
    }
    return "?";
}

namespace {

[[noreturn]] void bad(std::string message, nlohmann::json details = nlohmann::json::object()) {
    throw Error(ErrorKind::invalid_request, std::move(message), std::move(details));
}

// A prompt is what llama-server accepts: a string; an array of strings and/or token ids (mixed); or an array
// of such arrays (several prompts). Token ids are non-negative integers. Anything else — a bare number, an
// object, an empty array, a float, a negative id — is refused here, before any engine starts.
void count_prompt_item(const nlohmann::json& p, OpenAIRequest& r, const char* field) {
    if (p.is_string()) {
        r.prompt_bytes += p.get_ref<const std::string&>().size();
    } else if (p.is_number_unsigned() || (p.is_number_integer() && p.get<std::int64_t>() >= 0)) {
        r.prompt_token_ids += 1;
    } else {
        bad(std::string("'") + field + "' items must be strings or token ids (non-negative integers), got " +
            p.type_name());
    }
}

void count_prompt(const nlohmann::json& p, OpenAIRequest& r, const char* field) {
    // (Built only when refused: this runs for every request.)
    const auto shape = [field] {
        return std::string("'") + field +
               "' must be a string, an array of strings or token ids, or an array of such arrays";
    };
    if (p.is_string()) {
        r.prompt_bytes += p.get_ref<const std::string&>().size();
        return;
    }
    if (!p.is_array() || p.empty()) bad(shape());
    for (const auto& x : p) {
        if (!x.is_array()) {
            count_prompt_item(x, r, field);
            continue;
        }
        if (x.empty()) bad(shape());
        for (const auto& y : x) {
            if (y.is_array()) bad(std::string("'") + field + "' is nested too deeply");
            count_prompt_item(y, r, field);
        }
    }
}

// The inline image a content part carries, as a data URL, in each API's own shape — chat completions'
// {"type": "image_url", "image_url": {"url"}}, the Responses API's {"type": "input_image", "image_url"} and
// Anthropic's {"type": "image", "source": {"type": "base64", "media_type", "data"} or {"type": "url", "url"}}
// — with where it sits for an error; nullopt for a part that is no image. Throws (400) for an image part that
// names no image loch can read.
struct ImagePart {
    const std::string* in_body = nullptr;  // the URL as the body holds it (no copy: it is the whole image)
    std::string built;                     // or built from Anthropic's base64 source
    std::string where;
    std::string_view url() const { return in_body ? std::string_view(*in_body) : std::string_view(built); }
};
std::optional<ImagePart> image_of(const nlohmann::json& part, std::string_view type, const std::string& at) {
    if (type == "image_url" || type == "input_image") {
        const std::string where = at + ".image_url";
        const auto u = part.find("image_url");
        const nlohmann::json* url = u == part.end()                        ? nullptr
                                    : u->is_object() && u->contains("url") ? &(*u)["url"]
                                                                           : &*u;
        if (url && url->is_string()) return ImagePart{&url->get_ref<const std::string&>(), {}, where};
        if (type == "input_image" && part.contains("file_id"))
            bad(at + ": an image by file_id is not served here; send it inline (image_url "
                     "\"data:image/…;base64,…\")",
                {{"param", at}});
        bad(where + " must be " +
                (type == "image_url" ? "{\"url\": \"data:image/…;base64,…\"}" : "\"data:image/…;base64,…\""),
            {{"param", where}});
    }
    if (type == "image") {
        const std::string where = at + ".source";
        const auto src = part.find("source");
        // (Pointers, not copies: `data` is the whole image in base64.)
        const auto field = [&](const char* k) -> const std::string* {
            if (src == part.end() || !src->is_object()) return nullptr;
            const auto f = src->find(k);
            return f != src->end() && f->is_string() && !f->get_ref<const std::string&>().empty()
                       ? &f->get_ref<const std::string&>()
                       : nullptr;
        };
        const std::string* kind = field("type");
        if (kind && *kind == "url" && field("url")) return ImagePart{field("url"), {}, where};
        const std::string *media = field("media_type"), *data = field("data");
        if (!kind || *kind != "base64" || !media || !data)
            bad(where + " must be {\"type\": \"base64\", \"media_type\": \"image/png\", \"data\": \"…\"}",
                {{"param", where}});
        return ImagePart{nullptr, "data:" + *media + ";base64," + *data, where};
    }
    return std::nullopt;
}

// `where` names the content for an error ("messages[2].content"). Image parts (image_of) are read here, on
// every route that takes them: a vision request is costed by its images, and one sent to a model without a
// projector is refused by loch's checks, not failed by the engine.
void count_message_content(const nlohmann::json& content, OpenAIRequest& r,
                           const std::string& where = "content") {
    if (content.is_null()) return;  // assistant messages with tool calls
    if (content.is_string()) {
        r.prompt_bytes += content.get_ref<const std::string&>().size();
        return;
    }
    if (!content.is_array()) bad("a message 'content' must be a string or an array of content parts");
    for (std::size_t i = 0; i < content.size(); ++i) {
        const auto& part = content[i];
        if (!part.is_object()) bad("a content part must be an object");
        auto t = part.find("text");
        if (t != part.end() && t->is_string()) r.prompt_bytes += t->get_ref<const std::string&>().size();
        const auto type = part.find("type");
        if (type != part.end() && !type->is_string()) bad("a content part's 'type' must be a string");
        if (type == part.end()) continue;
        const auto image =
            image_of(part, type->get_ref<const std::string&>(), fmt::format("{}[{}]", where, i));
        if (!image) continue;
        const auto img = read_image_url(image->url(), image->where);
        r.images.push_back({img.bytes, img.width, img.height});
    }
}

}  // namespace

namespace {

// What a file is, by its first bytes: the audio formats whisper-server reads and the image formats sd-server
// reads; "" when none of them.
std::string file_format(std::string_view b) {
    if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WAVE") return "wav";
    if (b.starts_with("fLaC")) return "flac";
    if (b.starts_with("OggS")) return "ogg";
    if (b.starts_with("ID3") || (b.size() >= 2 && static_cast<unsigned char>(b[0]) == 0xFF &&
                                 (static_cast<unsigned char>(b[1]) & 0xE0) == 0xE0))
        return "mp3";
    if (b.starts_with("\x89PNG")) return "png";
    if (b.starts_with("\xFF\xD8\xFF")) return "jpeg";
    if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return "webp";
    return "";
}

}  // namespace

// A form's fields as a JSON object: text as strings (all digits: a number), files as their sizes.
nlohmann::json form_as_json(std::string_view body, std::string_view content_type) {
    const auto boundary = form_boundary(content_type);
    if (!boundary)
        bad("this route takes multipart/form-data with a boundary (a file upload), got Content-Type '" +
            std::string(content_type.substr(0, 100)) + "'");
    nlohmann::json j = nlohmann::json::object();
    for (const auto& p : read_form(body, *boundary)) {
        if (p.filename) {
            j[p.name] = {{"file_bytes", p.value.size()}, {"filename", *p.filename}};
            if (const auto wh = image_size(p.value)) {
                j[p.name]["width"] = wh->first;
                j[p.name]["height"] = wh->second;
            } else if (const auto s = audio_seconds(p.value)) {
                j[p.name]["seconds"] = *s;
            }
            if (const auto f = file_format(p.value); !f.empty()) j[p.name]["format"] = f;
            continue;
        }
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(p.value.data(), p.value.data() + p.value.size(), n);
        if (ec == std::errc() && end == p.value.data() + p.value.size() && !p.value.empty())
            j[p.name] = n;
        else
            j[p.name] = std::string(p.value);
    }
    return j;
}

OpenAIRequest parse_openai_request(Endpoint endpoint, std::string_view body, std::string_view content_type) {
    OpenAIRequest r;
    r.endpoint = endpoint;
    const bool audio = endpoint == Endpoint::audio_transcriptions || endpoint == Endpoint::audio_translations;
    if (audio) {
        r.body = form_as_json(body, content_type);
        const auto file = r.body.find("file");
        if (file == r.body.end() || !file->is_object()) bad("'file' (the audio, a file part) is required");
    } else if (endpoint == Endpoint::image_edits) {
        r.body = form_as_json(body, content_type);
        const auto image =
            r.body.find("image") != r.body.end() ? r.body.find("image") : r.body.find("image[]");
        if (image == r.body.end() || !image->is_object()) bad("'image' (a file part) is required");
        // No size: sd-server generates at the image's own size (read from its header, for the cost).
        if (!r.body.contains("size") && image->contains("width"))
            r.body["size"] = std::to_string((*image)["width"].get<std::uint32_t>()) + "x" +
                             std::to_string((*image)["height"].get<std::uint32_t>());
    } else {
        r.body = parse_json_body(body);
    }
    if (r.body.is_discarded()) bad("the request body is not valid JSON", {{"body_bytes", body.size()}});
    if (!r.body.is_object()) bad("the request body must be a JSON object");

    if (auto model = r.body.find("model"); model != r.body.end()) {
        if (!model->is_string() || model->get_ref<const std::string&>().empty())
            bad("'model' must be a non-empty string");
        r.model = model->get<std::string>();
    } else if (endpoint == Endpoint::sdapi_txt2img) {
        // A1111's clients name the checkpoint in override_settings, or nothing (the one loaded): the model is
        // the checkpoint they name, else (left empty here) the only image model, which the server resolves.
        if (auto o = r.body.find("override_settings"); o != r.body.end() && o->is_object())
            if (auto c = o->find("sd_model_checkpoint"); c != o->end() && c->is_string())
                r.model = c->get<std::string>();
    } else {
        bad("'model' is required: name one of GET /v1/models");
    }

    if (auto s = r.body.find("stream"); s != r.body.end() && !s->is_null()) {
        if (!s->is_boolean()) bad("'stream' must be true or false");
        r.stream = s->get<bool>();
    }
    for (const char* key : {"max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict"}) {
        auto m = r.body.find(key);
        if (m == r.body.end() || m->is_null()) continue;
        if (m->is_number_unsigned()) {
            r.max_tokens = m->get<std::uint64_t>();
            // OpenAI's and Anthropic's APIs refuse 0 (llama-server would generate a token anyway);
            // llama.cpp's own n_predict 0 means "evaluate the prompt only" and stays the engine's.
            if (*r.max_tokens == 0 && std::string_view(key) != "n_predict")
                bad(std::string("'") + key + "' must be at least 1");
        } else if (m->is_number_integer() && m->get<std::int64_t>() == -1 &&
                   std::string_view(key) == "n_predict") {
            continue;  // llama.cpp's "until the context is full"
        } else {
            bad(std::string("'") + key + "' must be a non-negative integer");
        }
        break;
    }

    switch (endpoint) {
        case Endpoint::chat_completions: {
            auto msgs = r.body.find("messages");
            if (msgs == r.body.end() || !msgs->is_array() || msgs->empty())
                bad("'messages' must be a non-empty array");
            for (std::size_t i = 0; i < msgs->size(); ++i) {
                const auto& m = (*msgs)[i];
                if (!m.is_object()) bad("each message must be an object with 'role' and 'content'");
                auto role = m.find("role");
                if (role == m.end() || !role->is_string()) bad("each message needs a string 'role'");
                if (auto c = m.find("content"); c != m.end())
                    count_message_content(*c, r, fmt::format("messages[{}].content", i));
            }
            break;
        }
        case Endpoint::completions: {
            auto p = r.body.find("prompt");
            if (p == r.body.end()) bad("'prompt' is required");
            count_prompt(*p, r, "prompt");
            break;
        }
        case Endpoint::embeddings: {
            auto p = r.body.find("input");
            if (p == r.body.end()) p = r.body.find("content");
            if (p == r.body.end()) bad("'input' is required");
            count_prompt(*p, r, "input");
            r.stream = false;  // embeddings never stream
            break;
        }
        case Endpoint::image_generations:
        case Endpoint::image_edits:
        case Endpoint::sdapi_txt2img: {
            auto p = r.body.find("prompt");
            if (p == r.body.end() || !p->is_string()) bad("'prompt' must be a string");
            r.prompt_bytes = p->get_ref<const std::string&>().size();
            r.stream = false;  // images come whole
            // The size, checked before anything starts: OpenAI's "WxH", A1111's width and height.
            // "auto" (OpenAI's default in its newer image models): the engine's default size.
            if (auto s = r.body.find("size"); s != r.body.end() && !s->is_null() && *s != "auto") {
                const std::string sz = s->is_string() ? s->get<std::string>() : std::string();
                const auto x = sz.find('x');
                std::uint64_t w = 0, h = 0;
                const auto num = [](std::string_view t, std::uint64_t& v) {
                    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
                    return ec == std::errc() && end == t.data() + t.size() && v >= 16 && v <= 16384;
                };
                if (x == std::string::npos || !num(std::string_view(sz).substr(0, x), w) ||
                    !num(std::string_view(sz).substr(x + 1), h))
                    bad("'size' must be \"WIDTHxHEIGHT\" with each side 16-16384 (e.g. \"512x512\"), or "
                        "\"auto\"");
            }
            for (const char* key : {"width", "height"})
                if (auto v = r.body.find(key); v != r.body.end() && !v->is_null())
                    if (!v->is_number_unsigned() || v->get<std::uint64_t>() < 16 ||
                        v->get<std::uint64_t>() > 16384)
                        bad(std::string("'") + key + "' must be an integer 16-16384");
            for (const char* key : {"n", "batch_size"})
                if (auto v = r.body.find(key); v != r.body.end() && !v->is_null())
                    if (!v->is_number_unsigned() || v->get<std::uint64_t>() < 1 ||
                        v->get<std::uint64_t>() > 16)
                        bad(std::string("'") + key + "' must be an integer 1-16");
            break;
        }
        case Endpoint::audio_transcriptions:
        case Endpoint::audio_translations: {
            r.stream = false;  // a transcript comes whole
            if (auto f = r.body.find("response_format"); f != r.body.end()) {
                const std::string v = f->is_string() ? f->get<std::string>() : std::string();
                if (v != "json" && v != "text" && v != "srt" && v != "verbose_json" && v != "vtt")
                    bad("'response_format' must be one of json, text, srt, verbose_json, vtt");
            }
            if (auto t = r.body.find("temperature"); t != r.body.end()) {
                // A number as its text; anything else (a file part of that name, whose filename may not
                // even be UTF-8 and could not be dumped) is refused below like any non-number.
                const std::string v = t->is_string()   ? t->get<std::string>()
                                      : t->is_number() ? t->dump()
                                                       : "";
                char* end = nullptr;
                const double x = std::strtod(v.c_str(), &end);
                if (v.empty() || end != v.c_str() + v.size() || !(x >= 0 && x <= 1))
                    bad("'temperature' must be a number 0-1");
            }
            if (auto p = r.body.find("prompt"); p != r.body.end() && p->is_string())
                r.prompt_bytes = p->get_ref<const std::string&>().size();
            break;
        }
        case Endpoint::responses:
        case Endpoint::responses_input_tokens: {
            // input: a string, or items ({role, content} messages whose content is text or typed parts);
            // instructions: the system text.
            auto in = r.body.find("input");
            if (in == r.body.end()) bad("'input' is required (a string or a list of input items)");
            if (in->is_string()) {
                r.prompt_bytes += in->get_ref<const std::string&>().size();
            } else if (in->is_array()) {
                for (std::size_t i = 0; i < in->size(); ++i)
                    if (const auto& item = (*in)[i]; item.is_object())
                        if (auto c = item.find("content"); c != item.end())
                            count_message_content(*c, r, fmt::format("input[{}].content", i));
            } else {
                bad("'input' must be a string or a list of input items");
            }
            if (auto i = r.body.find("instructions"); i != r.body.end() && i->is_string())
                r.prompt_bytes += i->get_ref<const std::string&>().size();
            break;
        }
        case Endpoint::anthropic_messages:
        case Endpoint::anthropic_count_tokens: {
            auto msgs = r.body.find("messages");
            if (msgs == r.body.end() || !msgs->is_array() || msgs->empty())
                bad("'messages' must be a non-empty array");
            for (std::size_t i = 0; i < msgs->size(); ++i) {
                const auto& m = (*msgs)[i];
                if (!m.is_object()) bad("each message must be an object with 'role' and 'content'");
                if (auto c = m.find("content"); c != m.end())
                    count_message_content(*c, r, fmt::format("messages[{}].content", i));
            }
            if (auto sys = r.body.find("system"); sys != r.body.end())
                count_message_content(*sys, r, "system");
            break;
        }
        case Endpoint::rerank: {
            auto q = r.body.find("query");
            if (q == r.body.end() || !q->is_string()) bad("'query' must be a string");
            auto docs = r.body.find("documents");
            if (docs == r.body.end() || !docs->is_array() || docs->empty())
                bad("'documents' must be a non-empty array");
            r.prompt_bytes = q->get_ref<const std::string&>().size();
            for (const auto& d : *docs) {
                if (d.is_string())
                    r.prompt_bytes =
                        std::max<std::uint64_t>(r.prompt_bytes, q->get_ref<const std::string&>().size() +
                                                                    d.get_ref<const std::string&>().size());
                else if (!d.is_object())
                    bad("each document must be a string or an object with 'text'");
            }
            r.stream = false;  // scores come whole
            break;
        }
        case Endpoint::audio_speech: {  // text to speech: the answer is audio bytes
            auto in = r.body.find("input");
            if (in == r.body.end() || !in->is_string() || in->get_ref<const std::string&>().empty())
                bad("'input' (the text to speak) must be a non-empty string");
            r.prompt_bytes = in->get_ref<const std::string&>().size();
            r.stream = false;
            break;
        }
    }
    // A token count generates nothing and comes whole (the request's own max_tokens, if any, is not spent).
    if (endpoint == Endpoint::anthropic_count_tokens || endpoint == Endpoint::responses_input_tokens) {
        r.stream = false;
        r.max_tokens.reset();
    }
    return r;
}

}  // namespace loch::http
