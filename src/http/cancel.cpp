// Cancel, and the list it works from: the relays in flight (http/server.hpp) are the model requests loch is
// serving, each under its X-Request-Id. A queued one is taken out of the broker's queue; a running one has
// its engine connection closed, which is how llama-server and whisper-server are told to stop a task (and
// free its slot). sd-server cannot stop a generation it has started: a cancel of one is refused with the
// reason rather than pretended (the slot and its memory would stay in use while loch showed them free).
#include <fmt/format.h>

#include "http/server.hpp"

namespace loch::http {

using broker::Error;
using broker::ErrorKind;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

nlohmann::json Server::in_flight() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& w : relays_) {
        const auto st = w.lock();
        if (!st || st->done || st->id.empty()) continue;
        out.push_back({{"id", st->id},
                       {"model", st->model},
                       {"route", st->route},
                       {"state", st->granted ? "running" : "queued"},
                       {"age_s", seconds_since(st->since)},
                       {"cancellable", !st->granted || st->cancellable}});
    }
    return out;
}

nlohmann::json Server::cancel(const std::string& id) {
    std::vector<std::shared_ptr<RelayState>> found;
    for (const auto& w : relays_)
        if (auto st = w.lock(); st && !st->done && st->id == id) found.push_back(std::move(st));
    if (found.empty()) {
        if (auto h = broker_.holds().cancel(id)) return {{"cancelled", {{{"id", id}, {"hold", *h}}}}};
        throw Error(ErrorKind::not_found,
                    fmt::format("nothing in flight has the id '{}': no queued or running request and no hold "
                                "(a finished request cannot be cancelled; GET /loch/requests lists the ones "
                                "in flight)",
                                id),
                    {{"id", id}});
    }
    nlohmann::json cancelled = nlohmann::json::array(), kept = nlohmann::json::array();
    for (const auto& st : found) {
        const double age = seconds_since(st->since);
        if (st->granted && !st->cancellable) {
            kept.push_back({{"id", id}, {"model", st->model}, {"state", "running"}, {"age_s", age}});
            continue;
        }
        const std::string state = st->granted ? "running" : "queued";
        st->abort = Error(
            ErrorKind::cancelled,
            fmt::format("request {} was cancelled while {} for model '{}' ({:.1f} s after it arrived){}", id,
                        state, st->model, age,
                        st->granted ? "; the engine was told to stop it" : "; it never reached the engine"),
            {{"request", id}, {"model", st->model}, {"state", state}, {"age_s", age}});
        st->close_upstream();
        cancelled.push_back({{"id", id}, {"model", st->model}, {"state", state}, {"age_s", age}});
    }
    if (cancelled.empty()) {
        const auto& k = kept.front();
        throw Error(ErrorKind::not_cancellable,
                    fmt::format("request {} is running on model '{}' ({:.0f} s so far), whose engine cannot "
                                "stop a generation it has started; it ends by itself and its answer goes to "
                                "its client (a queued request of this model can be cancelled)",
                                id, k["model"].get<std::string>(), k["age_s"].get<double>()),
                    {{"request", id}, {"running", kept}});
    }
    // The queued ones: their acquire throws the error each relay also holds as its abort.
    for (const auto& st : found)
        if (!st->granted && st->abort) broker_.cancel_waiting(id, *st->abort);
    nlohmann::json out = {{"cancelled", cancelled}};
    if (!kept.empty()) out["not_cancellable"] = kept;
    return out;
}

bool Server::preempt(const std::string& id) {
    bool any = false;
    for (const auto& w : relays_) {
        const auto st = w.lock();
        if (!st || st->done || st->id != id || !st->granted || !st->cancellable || st->abort) continue;
        const double age =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - st->since).count();
        st->abort = Error(ErrorKind::cancelled,
                          fmt::format("batch item {} was preempted for an interactive request to '{}' after "
                                      "{:.1f} s; it runs again",
                                      id, st->model, age),
                          {{"request", id}, {"model", st->model}, {"preempted", true}});
        st->close_upstream();
        any = true;
    }
    return any;
}

}  // namespace loch::http
