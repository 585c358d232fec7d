#include "http/router.hpp"

#include "http/query.hpp"

#include <charconv>
#include <vector>

namespace loch::http {

namespace {

// lines=N (default 100, at most 10000) and follow=1|true.
void parse_log_query(std::string_view target, Route& r) {
    if (const auto lines = query_param(target, "lines")) {
        std::size_t v = 0;
        auto [p, ec] = std::from_chars(lines->data(), lines->data() + lines->size(), v);
        if (ec == std::errc() && p == lines->data() + lines->size())
            r.lines = std::min<std::size_t>(v, 10000);
    }
    const auto follow = query_param(target, "follow");
    r.follow = follow == "1" || follow == "true";
}

Route with(Route::Kind k) {
    Route r;
    r.kind = k;
    return r;
}

Route check(std::string_view method, std::string_view want, Route r) {
    if (method == want) return r;
    Route bad = with(Route::Kind::method_not_allowed);
    bad.allow = std::string(want);
    return bad;
}

}  // namespace

Route route(std::string_view method, std::string_view target) {
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/health") return check(method, "GET", with(Route::Kind::health));
    if (path == "/v1/models") return check(method, "GET", with(Route::Kind::models));
    if (constexpr std::string_view models = "/v1/models/";
        path.starts_with(models) && path.size() > models.size()) {
        Route r = with(Route::Kind::model);
        r.engine = std::string(path.substr(models.size()));  // aliases may hold '/': "org/model"
        return check(method, "GET", r);
    }
    // Ollama's API, for the clients that speak only it (its chat and generate routes: not yet).
    if (path == "/api/version") return check(method, "GET", with(Route::Kind::ollama_version));
    if (path == "/api/tags") return check(method, "GET", with(Route::Kind::ollama_tags));
    if (path == "/api/ps") return check(method, "GET", with(Route::Kind::ollama_ps));
    if (path == "/api/pull") return check(method, "POST", with(Route::Kind::ollama_pull));
    if (path == "/api/show") return check(method, "POST", with(Route::Kind::ollama_show));
    if (path == "/api/chat" || path == "/api/generate" || path == "/api/embed" || path == "/api/embeddings") {
        Route r = with(Route::Kind::ollama_generation);
        r.path = std::string(path);
        return check(method, "POST", r);
    }
    if (path == "/metrics") return check(method, "GET", with(Route::Kind::metrics));
    if (path == "/sdapi/v1/sd-models") return check(method, "GET", with(Route::Kind::sdapi_models));
    if (path == "/" || path == "/index.html") {
        Route r = with(Route::Kind::dashboard);
        r.path = "index.html";
        return check(method, "GET", r);
    }
    if (constexpr std::string_view m = "/loch/models/"; path.starts_with(m)) {
        const auto rest = path.substr(m.size());
        for (const auto& [suffix, kind] : {std::pair{std::string_view("/load"), Route::Kind::model_load},
                                           std::pair{std::string_view("/unload"), Route::Kind::model_unload}})
            if (rest.ends_with(suffix) && rest.size() > suffix.size()) {
                Route r = with(kind);
                r.engine = std::string(rest.substr(0, rest.size() - suffix.size()));
                return check(method, "POST", r);
            }
    }
    if (const ModelRoute* m = find_model_route(path)) {
        Route r = with(Route::Kind::openai);
        r.endpoint = m->endpoint;
        r.model_route = m;
        return check(method, m->method, r);
    }
    if (constexpr std::string_view responses = "/v1/responses/"; path.starts_with(responses)) {
        // GET|DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items (after the model routes:
        // /v1/responses/input_tokens is one)
        const auto rest = path.substr(responses.size());
        const auto slash = rest.find('/');
        Route r = with(Route::Kind::stored_response);
        r.engine = std::string(rest.substr(0, slash));
        if (r.engine.empty()) return with(Route::Kind::not_found);
        if (slash == std::string_view::npos) {
            if (method == "GET" || method == "DELETE") return r;
            Route bad = with(Route::Kind::method_not_allowed);
            bad.allow = "GET, DELETE";
            return bad;
        }
        if (rest.substr(slash) != "/input_items") return with(Route::Kind::not_found);
        r.path = "input_items";
        return check(method, "GET", r);
    }
    if (path == "/loch/status") return check(method, "GET", with(Route::Kind::status));
    if (path == "/loch/history") return check(method, "GET", with(Route::Kind::history));
    if (path == "/loch/holds") {
        if (method == "POST") return with(Route::Kind::hold_create);
        return check(method, "GET", with(Route::Kind::holds_list));
    }
    if (constexpr std::string_view holds = "/loch/holds/"; path.starts_with(holds)) {
        const auto id = path.substr(holds.size());
        if (id.empty() || id.find('/') != std::string_view::npos) return with(Route::Kind::not_found);
        Route r = with(method == "POST"     ? Route::Kind::hold_update
                       : method == "DELETE" ? Route::Kind::hold_release
                                            : Route::Kind::hold_get);
        r.engine = std::string(id);
        return check(method, r.kind == Route::Kind::hold_get ? "GET" : method, r);
    }
    if (path == "/v1/files" || path.starts_with("/v1/files/")) {
        // POST|GET /v1/files, GET|DELETE /v1/files/{id}, GET /v1/files/{id}/content
        Route r = with(Route::Kind::files);
        r.path = std::string(path);
        const auto rest = path.size() > 10 ? path.substr(10) : std::string_view();
        const auto slash = rest.find('/');
        r.engine = std::string(rest.substr(0, slash));
        const auto either = [&](std::string_view other, const char* allow) {
            if (method == "GET" || method == other) return r;
            Route bad = with(Route::Kind::method_not_allowed);
            bad.allow = allow;
            return bad;
        };
        if (path == "/v1/files") return either("POST", "GET, POST");
        if (r.engine.empty()) return with(Route::Kind::not_found);
        if (slash == std::string_view::npos) return either("DELETE", "GET, DELETE");
        if (rest.substr(slash) == "/content") return check(method, "GET", r);
        return with(Route::Kind::not_found);
    }
    if (path == "/v1/batches" || path.starts_with("/v1/batches/")) {
        // POST|GET /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel
        Route r = with(Route::Kind::batches);
        r.path = std::string(path);
        const auto rest = path.size() > 12 ? path.substr(12) : std::string_view();
        const auto slash = rest.find('/');
        r.engine = std::string(rest.substr(0, slash));
        if (path == "/v1/batches") {
            if (method == "GET" || method == "POST") return r;
            Route bad = with(Route::Kind::method_not_allowed);
            bad.allow = "GET, POST";
            return bad;
        }
        if (r.engine.empty()) return with(Route::Kind::not_found);
        if (slash == std::string_view::npos) return check(method, "GET", r);
        if (rest.substr(slash) == "/cancel") return check(method, "POST", r);
        return with(Route::Kind::not_found);
    }
    if (path == "/loch/requests") return check(method, "GET", with(Route::Kind::requests_list));
    if (constexpr std::string_view requests = "/loch/requests/"; path.starts_with(requests)) {
        const auto id = path.substr(requests.size());
        if (id.empty() || id.find('/') != std::string_view::npos) return with(Route::Kind::not_found);
        Route r = with(Route::Kind::request_cancel);
        r.engine = std::string(id);
        return check(method, "DELETE", r);
    }
    if (path == "/loch/plan") return check(method, "POST", with(Route::Kind::plan));
    constexpr std::string_view prefix = "/loch/engines/", suffix = "/log";
    if (path.starts_with(prefix) && path.ends_with(suffix) && path.size() > prefix.size() + suffix.size()) {
        Route r = with(Route::Kind::engine_log);
        r.engine = std::string(path.substr(prefix.size(), path.size() - prefix.size() - suffix.size()));
        if (r.engine.find('/') != std::string::npos) return with(Route::Kind::not_found);
        parse_log_query(target, r);
        return check(method, "GET", r);
    }
    return with(Route::Kind::not_found);
}

bool authorized(std::string_view authorization, const std::vector<std::string>& keys) {
    if (keys.empty()) return true;
    constexpr std::string_view bearer = "Bearer ";
    if (!authorization.starts_with(bearer)) return false;
    const auto given = authorization.substr(bearer.size());
    bool ok = false;
    for (const auto& k : keys) {
        // Constant time for equal lengths: no early exit on the first differing byte.
        unsigned diff = given.size() == k.size() ? 0u : 1u;
        for (std::size_t i = 0; i < k.size(); ++i)
            diff |= unsigned(k[i]) ^ unsigned(i < given.size() ? given[i] : 0);
        ok |= diff == 0;
    }
    return ok;
}

}  // namespace loch::http
