// http/relays — the relays in flight: the list, cancel, preemption, a drain's end.
#include "http/relays.hpp"

#include <fmt/format.h>

namespace loch::http {

using boost::asio::ip::tcp;

using broker::Error;
using broker::ErrorKind;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

nlohmann::json Relays::in_flight() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& w : list_) {
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

nlohmann::json Relays::cancel(const std::string& id) {
    std::vector<std::shared_ptr<RelayState>> found;
    for (const auto& w : list_)
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
        if (!st->granted && st->abort) broker_.control().cancel_waiting(id, *st->abort);
    nlohmann::json out = {{"cancelled", cancelled}};
    if (!kept.empty()) out["not_cancellable"] = kept;
    return out;
}

bool Relays::preempt(const std::string& id) {
    bool any = false;
    for (const auto& w : list_) {
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

void RelayState::close_upstream() {
    if (!upstream) return;
    boost::system::error_code ec;
    upstream->socket().shutdown(tcp::socket::shutdown_both, ec);
    upstream->socket().close(ec);
}

void RelayState::finish() {
    done = true;
    close_upstream();
    if (watched) {
        boost::system::error_code ec;
        std::exchange(watched, nullptr)->cancel(ec);
    }
}

void Relays::abort_all(const broker::Error& why) {
    for (auto& w : list_)
        if (auto st = w.lock(); st && !st->done) {
            st->abort = why;
            st->close_upstream();
        }
}

}  // namespace loch::http
