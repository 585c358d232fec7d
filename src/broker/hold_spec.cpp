// broker/holds — the request for a hold (hold_spec_from_json): outside input, checked field by field before
// anything is booked. Apart from holds.cpp so that its fuzz target links no coroutine code.
#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "broker/error.hpp"
#include "broker/holds.hpp"

namespace loch::broker {

namespace {

constexpr std::uint64_t kMaxHoldBytes = std::uint64_t{1} << 50;  // 1 PiB: anything above is a typo

Error bad(std::string message, nlohmann::json details = nlohmann::json::object()) {
    return Error(ErrorKind::invalid_request, std::move(message), std::move(details));
}
std::uint64_t size_field(const nlohmann::json& v) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    if (v.is_number_integer() || v.is_number_float())
        throw bad(fmt::format("memory must be a positive size, got {}", v.dump()), {{"memory", v}});
    if (!v.is_string()) throw bad("memory must be a size: bytes, or text such as \"12GiB\"", {{"memory", v}});
    std::string why;
    const auto bytes = config::parse_size(v.get<std::string>(), &why);
    if (!bytes) throw bad(fmt::format("memory '{}' is not a size: {}", v.get<std::string>(), why));
    return *bytes;
}

}  // namespace

HoldSpec hold_spec_from_json(const nlohmann::json& b) {
    if (!b.is_object()) throw bad("the body must be a JSON object: {\"memory\": \"12GiB\", …}");
    static const std::vector<std::string> known = {"name",  "memory", "like",    "device", "priority",
                                                   "ttl_s", "pgid",   "command", "owner",  "running"};
    for (const auto& [k, v] : b.items())
        if (std::find(known.begin(), known.end(), k) == known.end())
            throw bad(fmt::format("unknown field '{}' (known: {})", k, fmt::join(known, ", ")),
                      {{"field", k}});
    const auto text = [&](const char* k) -> std::optional<std::string> {
        if (!b.contains(k) || b[k].is_null()) return std::nullopt;
        if (!b[k].is_string()) throw bad(fmt::format("{} must be a string", k), {{"field", k}});
        return b[k].get<std::string>();
    };
    HoldSpec s;
    s.name = text("name").value_or("job");
    static const std::regex name_re("[A-Za-z0-9._-]{1,64}");
    if (!std::regex_match(s.name, name_re))
        throw bad(fmt::format("name '{}' must be 1–64 of A–Z a–z 0–9 . _ -", s.name), {{"name", s.name}});
    if (b.contains("memory") && !b["memory"].is_null()) {
        s.bytes = size_field(b["memory"]);
        if (*s.bytes == 0 || *s.bytes > kMaxHoldBytes)
            throw bad(fmt::format("memory {} is not a size any device has (1 byte … 1 PiB)", *s.bytes),
                      {{"memory_bytes", *s.bytes}});
    }
    s.like = text("like").value_or("");
    s.device = text("device").value_or("auto");
    if (auto p = text("priority")) {
        if (*p == "interactive")
            s.priority = config::Priority::interactive;
        else if (*p == "batch")
            s.priority = config::Priority::batch;
        else
            throw bad(fmt::format("priority '{}' must be interactive or batch", *p), {{"priority", *p}});
    }
    if (b.contains("ttl_s")) {
        if (!b["ttl_s"].is_number() || b["ttl_s"].get<double>() < 1 || b["ttl_s"].get<double>() > 86400)
            throw bad("ttl_s must be a number of seconds from 1 to 86400", {{"ttl_s", b["ttl_s"]}});
        s.ttl = std::chrono::seconds(static_cast<long>(b["ttl_s"].get<double>()));
    }
    if (b.contains("pgid") && !b["pgid"].is_null()) {
        if (!b["pgid"].is_number_integer() || b["pgid"].get<long>() <= 1 ||
            b["pgid"].get<long>() > (1L << 22))
            throw bad("pgid must be a process group id (> 1)", {{"pgid", b["pgid"]}});
        s.pgid = b["pgid"].get<int>();
    }
    s.command = text("command").value_or("");
    s.owner = text("owner").value_or("");
    if (b.contains("running")) {
        if (!b["running"].is_boolean()) throw bad("running must be true or false");
        s.running = b["running"].get<bool>();
    }
    if (s.running && (s.device == "auto" || !s.bytes))
        throw bad("a running job re-registers with the device it was granted and its memory");
    if (s.bytes && !s.like.empty()) throw bad("give memory or like, not both");
    return s;
}

}  // namespace loch::broker
