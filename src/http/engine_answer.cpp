// What an engine's answer, or its failure, means for loch's client (engine_answer.hpp).
#include "http/engine_answer.hpp"

#include <charconv>

#include <fmt/format.h>
#include <boost/beast/core/error.hpp>

#include "http/respond.hpp"

namespace loch::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using broker::Error;
using broker::ErrorKind;
using namespace std::chrono_literals;

// What the engine's answer says it used: a `usage` in OpenAI's chat shape (prompt_tokens, completion_tokens),
// in the Responses API's or Anthropic's (input_tokens, output_tokens; under `response` or `message` in their
// stream events), or llama-server's `timings`. A figure the object does not carry is left as it was, so that
// the events of one stream add up (Anthropic's message_start has the input, its message_delta the output).
void take_usage(const nlohmann::json& j, observe::RequestRecord& rec) {
    if (!j.is_object()) return;
    const auto number = [](const nlohmann::json& o, std::initializer_list<const char*> keys) {
        for (const char* k : keys)
            if (const auto it = o.find(k); it != o.end() && it->is_number_unsigned())
                return std::optional<std::uint64_t>(it->get<std::uint64_t>());
        return std::optional<std::uint64_t>();
    };
    const nlohmann::json* u = nullptr;
    for (const char* holder : {"response", "message"})
        if (const auto h = j.find(holder); h != j.end() && h->is_object())
            if (const auto it = h->find("usage"); it != h->end() && it->is_object()) u = &*it;
    if (const auto it = j.find("usage"); it != j.end() && it->is_object()) u = &*it;
    if (u) {
        if (const auto n = number(*u, {"prompt_tokens", "input_tokens"})) rec.prompt_tokens = n;
        if (const auto n = number(*u, {"completion_tokens", "output_tokens"})) rec.completion_tokens = n;
        if (const auto n = number(*u, {"cache_read_input_tokens"})) rec.cached_tokens = n;
        for (const char* details : {"prompt_tokens_details", "input_tokens_details"})
            if (const auto d = u->find(details); d != u->end() && d->is_object())
                if (const auto n = number(*d, {"cached_tokens"})) rec.cached_tokens = n;
    }
    if (const auto t = j.find("timings"); t != j.end() && t->is_object()) {
        if (!rec.prompt_tokens) rec.prompt_tokens = number(*t, {"prompt_n"});
        if (!rec.completion_tokens) rec.completion_tokens = number(*t, {"predicted_n"});
        if (!rec.cached_tokens) rec.cached_tokens = number(*t, {"cache_n"});
    }
}

namespace {
// A key is a quoted name followed by ':', which a JSON string value cannot contain unescaped.
std::optional<std::uint64_t> number_after(std::string_view body, std::string_view key) {
    const auto at = body.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    auto p = at + key.size();
    while (p < body.size() && (body[p] == ' ' || body[p] == '\t' || body[p] == '\n' || body[p] == '\r')) ++p;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(body.data() + p, body.data() + body.size(), v);
    if (ec != std::errc()) return std::nullopt;
    return v;
}
}  // namespace

void take_usage_scan(std::string_view body, observe::RequestRecord& rec) {
    // OpenAI's chat shape, else the Responses API's and Anthropic's.
    rec.prompt_tokens = number_after(body, "\"prompt_tokens\":");
    if (!rec.prompt_tokens) rec.prompt_tokens = number_after(body, "\"input_tokens\":");
    rec.completion_tokens = number_after(body, "\"completion_tokens\":");
    if (!rec.completion_tokens) rec.completion_tokens = number_after(body, "\"output_tokens\":");
    // (Only after a restore: the one answer whose reuse is checked. A scan for a key is cheap, but not free.)
    if (rec.restore) {
        rec.cached_tokens = number_after(body, "\"cached_tokens\":");
        if (!rec.cached_tokens) rec.cached_tokens = number_after(body, "\"cache_n\":");
    }
}

// The engine's error answer as loch's error (a JSON answer after the SSE head went out can only be told
// as an event).
Error engine_answer_error(unsigned status, std::string_view body, const std::string& model) {
    auto j = nlohmann::json::parse(body, nullptr, false);
    std::string msg(body.substr(0, 500));
    // Engine output: any shape at all (a message that is not a string is shown as the JSON it is).
    if (!j.is_discarded() && j.is_object() && j.contains("error")) {
        const auto& e = j["error"];
        const auto m = e.is_object() ? e.find("message") : e.end();
        if (!e.is_object())
            msg = e.is_string() ? e.get<std::string>() : dump(e);
        else if (m != e.end())
            msg = m->is_string() ? m->get<std::string>() : dump(*m);
    }
    return Error(status < 500 ? ErrorKind::invalid_request : ErrorKind::engine_failed,
                 fmt::format("the engine of model '{}' answered {}: {}", model, status, msg),
                 {{"model", model}, {"engine_status", status}});
}

Error refusal_error(const std::string& model, engines::Refusal no) {
    no.details["model"] = model;
    const auto kind = no.kind == engines::Refusal::Kind::context_length_exceeded
                          ? ErrorKind::context_length_exceeded
                      : no.kind == engines::Refusal::Kind::too_large ? ErrorKind::request_too_large
                                                                     : ErrorKind::invalid_request;
    return Error(kind, fmt::format("model '{}': {}", model, no.message), std::move(no.details));
}

asio::awaitable<Error> upstream_failure(broker::BrokerView& broker, const broker::Lease& lease, bool stream,
                                        std::chrono::seconds watchdog, const std::optional<Error>& abort,
                                        boost::system::error_code ec) {
    if (abort) co_return *abort;
    const std::string& model = lease.model();
    nlohmann::json d = nlohmann::json::object();
    d["model"] = model;
    if (stream && ec == beast::error::timeout) {
        d["watchdog_s"] = watchdog.count();
        co_return Error(
            ErrorKind::watchdog_timeout,
            fmt::format("engine of model '{}' sent nothing for {} s (watchdog)", model, watchdog.count()),
            std::move(d));
    }
    std::optional<engines::ExitReport> report = co_await broker.exit_report(lease.engine(), 1500ms);
    d["transport_error"] = ec.message();
    if (report && report->kind == engines::ExitKind::hung) {
        d["exit"] = *report;
        co_return Error(
            ErrorKind::watchdog_timeout,
            fmt::format("the engine of model '{}' hung mid-request (watchdog): {}", model, report->summary),
            std::move(d));
    }
    if (report) {
        d["exit"] = *report;
        std::string msg =
            fmt::format("the engine of model '{}' died mid-request: {}", model, report->summary);
        co_return Error(ErrorKind::engine_failed, std::move(msg), std::move(d));
    }
    std::string msg = fmt::format("the engine of model '{}' broke the connection: {}", model, ec.message());
    co_return Error(ErrorKind::engine_failed, std::move(msg), std::move(d));
}

}  // namespace loch::http
