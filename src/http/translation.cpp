#include "http/translation.hpp"

#include "core/json_text.hpp"
#include "http/errors.hpp"
#include "http/sse.hpp"

namespace loch::http {

std::string Translation::stream_error(const broker::Error& e) const {
    return sse_error_event(e);
}

nlohmann::json Translation::error_body(const broker::Error& e) const {
    return http::error_body(e);
}

unsigned Translation::error_status(const broker::Error& e) const {
    return static_cast<unsigned>(status_of(e.kind()));
}

std::optional<nlohmann::json> sse_json(std::string_view event) {
    std::string data;
    bool any = false;
    while (!event.empty()) {
        const auto nl = event.find('\n');
        std::string_view line = event.substr(0, nl);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.starts_with("data:")) {
            line.remove_prefix(5);
            if (line.starts_with(' ')) line.remove_prefix(1);
            if (any) data += '\n';
            data += line;
            any = true;
        }
        if (nl == std::string_view::npos) break;
        event.remove_prefix(nl + 1);
    }
    if (!any || data == "[DONE]") return std::nullopt;
    auto j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
}

std::string ModelRename::answer(std::string_view engine_body, unsigned) {
    auto j = nlohmann::json::parse(engine_body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("model")) return std::string(engine_body);
    j["model"] = model_;
    return core::json_text(j);
}

std::string ModelRename::event(std::string_view sse_event) {
    auto j = sse_json(sse_event);
    if (!j || !j->is_object() || !j->contains("model")) return std::string(sse_event);
    (*j)["model"] = model_;
    return "data: " + core::json_text(*j) + "\n\n";
}

}  // namespace loch::http
