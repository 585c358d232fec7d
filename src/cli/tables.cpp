#include "cli/tables.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/memory.hpp"

namespace loch::cli {

namespace {

using nlohmann::json;

std::string table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<std::size_t> width;
    for (const auto& r : rows)
        for (std::size_t i = 0; i < r.size(); ++i) {
            if (width.size() <= i) width.push_back(0);
            width[i] = std::max(width[i], r[i].size());
        }
    std::string out;
    for (const auto& r : rows) {
        std::string line;
        for (std::size_t i = 0; i < r.size(); ++i)
            line += i + 1 == r.size() ? r[i] : fmt::format("{:<{}}   ", r[i], width[i]);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    }
    return out;
}

// A command line as the tables show it: its first `max` bytes, the cut marked. Another program's full command
// line (a training run's, with every flag) would otherwise widen every row to well past a terminal.
std::string clipped(const std::string& command, std::size_t max = 32) {
    if (command.size() <= max) return command;
    std::size_t cut = max - 1;
    while (cut > 0 && (static_cast<unsigned char>(command[cut]) & 0xC0) == 0x80) --cut;  // not mid-character
    return command.substr(0, cut) + "…";
}

std::uint64_t bytes_of(const json& figure) {
    return figure.is_object() ? figure.value("bytes", std::uint64_t{0}) : 0;
}

std::string state_of(const json& e) {
    const std::string s = e.value("state", "");
    if (e.contains("quarantined")) return "quarantined";
    if (s == "ready" && e.value("active_requests", 0) > 0) return "busy";
    if (s == "loading" && e.contains("loading")) {
        const auto& l = e["loading"];
        std::string t = "loading " + span_text(l.value("elapsed_s", 0.0));
        if (l.contains("expected_s")) t += " of ~" + span_text(l["expected_s"].get<double>());
        return t;
    }
    return s;
}

}  // namespace

std::string span_text(double s) {
    if (s < 90) return fmt::format("{:.0f} s", s);
    if (s < 5400) return fmt::format("{:.0f} min", s / 60);
    if (s < 3 * 86400) return fmt::format("{:.1f} h", s / 3600);
    return fmt::format("{:.0f} days", s / 86400);
}

// "ETA 12 s" from a waiter's eta_s; "ETA unknown" (its reason is in the JSON) when loch measured nothing.
std::string eta_text(const json& w) {
    if (w.contains("eta_s") && w["eta_s"].is_number()) return "ETA " + span_text(w["eta_s"].get<double>());
    return "ETA unknown";
}

std::string ps_table(const json& status, bool all) {
    std::vector<std::vector<std::string>> rows = {
        {"NAME", "STATE", "DEVICE", "MEMORY", "REQUESTS", "IDLE", "UNTIL"}};
    std::map<std::string, int> waiting;
    for (const auto& w : status["queue"].value("waiting", json::array())) ++waiting[w.value("model", "")];
    const json requests = status.value("requests", json::object());
    for (const auto& e : status.value("engines", json::array())) {
        const std::string name = e.value("name", "");
        const std::string state = e.value("state", "stopped");
        if (!all && state == "stopped" && !waiting.count(name) && !e.contains("quarantined")) continue;
        std::string memory;
        if (e.contains("reservation"))
            memory = fmt::format("{} ({})", human_bytes(bytes_of(e["reservation"])),
                                 e["reservation"].value("source", ""));
        else if (e.contains("footprint") && !e["footprint"]["needs"].empty())
            memory = fmt::format("needs {} ({})",
                                 human_bytes(e["footprint"]["needs"][0].value("bytes", std::uint64_t{0})),
                                 e["footprint"].value("source", ""));
        std::string reqs = fmt::format("{}/{}", e.value("active_requests", 0), e.value("slots", 1));
        if (waiting.count(name)) reqs += fmt::format(" +{} waiting", waiting[name]);
        if (requests.contains(name)) reqs += fmt::format(", {} done", requests[name].value("count", 0));
        std::string idle, until;
        if (state == "ready") {
            const double idle_s = e.value("idle_s", 0.0);
            idle = e.value("active_requests", 0) > 0 ? "-" : span_text(idle_s);
            if (e.value("pinned", false))
                until = "pinned";
            else if (e.contains("keep_alive_s"))
                until = e.value("active_requests", 0) > 0
                            ? "after its requests + " + span_text(e["keep_alive_s"].get<double>())
                            : "in " + span_text(std::max(0.0, e["keep_alive_s"].get<double>() - idle_s));
            else
                until = "forever";
        }
        if (e.contains("quarantined"))
            until = "retry in " + span_text(e["quarantined"].value("retry_in_s", 0.0));
        rows.push_back({name, state_of(e), e.value("device", ""), memory, reqs, idle, until});
    }
    // Jobs and holds (`loch run`, POST /loch/holds): their memory, and where they wait.
    for (const auto& h : status.value("holds", json::array())) {
        const std::string state = h.value("state", "");
        std::string what = clipped(h.value("command", std::string()));
        if (state == "waiting")
            what = fmt::format("position {}, {}: {}", h.value("position", 0), eta_text(h),
                               h.value("reason", std::string()));
        rows.push_back({"job " + h.value("name", std::string()) + " (" + h.value("id", std::string()) + ")",
                        state, h.value("device", std::string()),
                        fmt::format("{} ({})", human_bytes(h.value("bytes", std::uint64_t{0})),
                                    h.value("source", std::string())),
                        what, state == "granted" ? span_text(h.value("held_s", 0.0)) + " held" : "", ""});
    }
    // --all: the programs loch did not start, where a device names them (pid, user, command, bytes).
    if (all)
        for (const auto& d : status.value("devices", json::array()))
            for (const auto& p : d.value("other_processes", json::array()))
                rows.push_back({"other: " + clipped(p.value("command", std::string())), "running",
                                d.value("device", ""), human_bytes(p.value("bytes", std::uint64_t{0})),
                                fmt::format("pid {}, {}", p.value("pid", 0), p.value("user", std::string())),
                                "", ""});
    if (rows.size() == 1) return "no model is running (loch ps --all lists every model)\n";
    return table(rows);
}

std::string status_text(const json& status, std::size_t events) {
    std::string out;
    for (const auto& d : status.value("devices", json::array())) {
        out += fmt::format("{}: total {} ({}), capacity {}, loch {}, outside {}, free {}\n",
                           d.value("device", ""), human_bytes(bytes_of(d["total"])),
                           d["total"].value("source", ""),
                           human_bytes(d.value("capacity_bytes", std::uint64_t{0})),
                           human_bytes(d.value("own_bytes", std::uint64_t{0})),
                           human_bytes(d.value("outside_bytes", std::uint64_t{0})),
                           human_bytes(d.value("free_bytes", std::uint64_t{0})));
        for (const auto& r : d.value("reservations", json::array()))
            out += fmt::format("  {:<24} {:>12}  {}{}\n", r.value("engine", ""),
                               human_bytes(bytes_of(r["figure"])), r["figure"].value("source", ""),
                               r.value("loading", false) ? " (loading)" : "");
        // Programs loch did not start (the outside use, named where the device reports per process).
        for (const auto& p : d.value("other_processes", json::array()))
            out += fmt::format("  {:<24} {:>12}  pid {}, {}\n",
                               "other: " + clipped(p.value("command", std::string())),
                               human_bytes(p.value("bytes", std::uint64_t{0})), p.value("pid", 0),
                               p.value("user", std::string()));
    }
    const auto& q = status["queue"];
    out +=
        fmt::format("queue: interactive {}/{}, batch {}/{}\n", q.value("interactive", 0),
                    q["limits"].value("interactive", 0), q.value("batch", 0), q["limits"].value("batch", 0));
    for (const auto& w : q.value("waiting", json::array()))
        out += fmt::format(
            "  {}{} ({}, {}, {}): {}\n",
            w.contains("model") ? w.value("model", "") : "job " + w.value("job", std::string()),
            w.contains("request") ? " " + w.value("request", std::string())
                                  : (w.contains("hold") ? " " + w.value("hold", std::string()) : ""),
            w.value("priority", ""), span_text(w.value("waited_s", 0.0)), eta_text(w), w.value("reason", ""));
    // The model requests in flight, by the id that `loch cancel` takes.
    const auto flying = status.value("in_flight", json::array());
    if (!flying.empty()) out += "requests in flight:\n";
    for (const auto& r : flying)
        out += fmt::format("  {:<24} {:<8} {} {} ({}){}\n", r.value("id", std::string()),
                           r.value("state", std::string()), r.value("model", std::string()),
                           r.value("route", std::string()), span_text(r.value("age_s", 0.0)),
                           r.value("cancellable", true) ? "" : ", cannot be cancelled");
    // The Batch API's unfinished batches: how far, how fast, when done.
    const auto batches = status.value("batches", json::array());
    if (!batches.empty()) out += "batches:\n";
    for (const auto& b : batches) {
        const auto eta = b.contains("eta_s") && b["eta_s"].is_number()
                             ? "done in about " + span_text(b["eta_s"].get<double>())
                             : b.value("eta_basis", std::string("ETA unknown"));
        out +=
            fmt::format("  {} {}: {}/{} done, {} failed, {} running, {} queued; {:.1f} items/min; {}{}\n",
                        b.value("id", std::string()), b.value("status", std::string()), b.value("done", 0),
                        b.value("total", 0), b.value("failed", 0), b.value("running", 0),
                        b.value("queued", 0), b.value("items_per_minute", 0.0), eta,
                        b.value("preempted", 0) > 0
                            ? fmt::format(" ({} preempted for interactive requests)", b.value("preempted", 0))
                            : "");
    }
    const auto ev = status.value("events", json::array());
    if (!ev.empty()) out += "recent:\n";
    for (std::size_t i = ev.size() > events ? ev.size() - events : 0; i < ev.size(); ++i)
        out += fmt::format(
            "  {} {} '{}': {}\n", ev[i].value("at", ""), ev[i].value("kind", ""),
            ev[i].contains("model") ? ev[i].value("model", "") : ev[i].value("hold", std::string()),
            ev[i].value("message", ""));
    return out;
}

}  // namespace loch::cli
