#include "batch/runner.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "batch/outputs.hpp"
#include "batch/streamed_answer.hpp"
#include "core/json_text.hpp"
#include "core/off_loop.hpp"
#include "core/time_text.hpp"

namespace loch::batch {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// An answer that says the item never ran: loch was busy or going down, or could not be reached. The item
// goes back in the queue without an attempt counted.
bool never_ran(const ItemAnswer& a) {
    if (a.status == 0 || a.status == 429) return true;
    return a.status == 503 && (a.error_type == "queue_full" || a.error_type == "queue_timeout" ||
                               a.error_type == "shutting_down" || a.error_type == "too_many_connections");
}

// One item's request line from the input file (a pread of its bytes). Chat and text completions go
// streamed, with their usage (batch/streamed_answer: a preempted one stops within a token), put together
// again by the sender; any other route's "stream" is turned off: a batch keeps whole answers.
std::optional<std::string> item_body(const fs::path& input, const ItemRecord& item) {
    const int fd = ::open(input.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string line(item.line_bytes, '\0');
    const auto n = ::pread(fd, line.data(), line.size(), static_cast<off_t>(item.line_offset));
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size())) return std::nullopt;
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("body") || !j["body"].is_object()) return std::nullopt;
    auto& body = j["body"];
    if (streams_item(item.url))
        ask_streamed(body);
    else if (body.contains("stream"))
        body["stream"] = false;
    return core::json_text(body);
}

std::string window_text(std::int64_t s) {
    return s % 3600 == 0 ? fmt::format("{}h", s / 3600) : fmt::format("{}s", s);
}

}  // namespace

json batch_json(const BatchRecord& b, const ItemCounts& c, const json& loch) {
    const auto ts = [](const std::optional<std::int64_t>& t) { return t ? json(*t) : json(nullptr); };
    json j = {{"id", b.id},
              {"object", "batch"},
              {"endpoint", b.endpoint},
              {"errors", b.errors_json.empty() ? json(nullptr) : json::parse(b.errors_json, nullptr, false)},
              {"input_file_id", b.input_file_id},
              {"completion_window", window_text(b.window_s)},
              {"status", std::string(to_string(b.status))},
              {"output_file_id", b.output_file_id.empty() ? json(nullptr) : json(b.output_file_id)},
              {"error_file_id", b.error_file_id.empty() ? json(nullptr) : json(b.error_file_id)},
              {"created_at", b.created_at},
              {"in_progress_at", ts(b.in_progress_at)},
              {"expires_at", b.created_at + b.window_s},
              {"finalizing_at", ts(b.finalizing_at)},
              {"completed_at", ts(b.completed_at)},
              {"failed_at", ts(b.failed_at)},
              {"expired_at", ts(b.expired_at)},
              {"cancelling_at", ts(b.cancelling_at)},
              {"cancelled_at", ts(b.cancelled_at)},
              {"request_counts", {{"total", c.total}, {"completed", c.done}, {"failed", c.failed}}},
              {"metadata", json::parse(b.metadata_json, nullptr, false)}};
    if (j["metadata"].is_discarded()) j["metadata"] = nullptr;
    if (!loch.is_null()) j["loch"] = loch;
    return j;
}

Runner::Runner(asio::any_io_executor ex, asio::thread_pool& work, RunnerOptions options, RunnerHooks hooks)
    : ex_(ex), work_(work), options_(std::move(options)), hooks_(std::move(hooks)), wake_(ex) {
    files_dir_ = options_.dir / "files";
}

Runner::~Runner() = default;

void Runner::start() {
    fs::create_directories(files_dir_);
    fs::create_directories(options_.dir / "tmp");
    store_ = std::make_unique<Store>(options_.dir / "batches.sqlite3");
    const auto [requeued, failed] = store_->recover();
    if (requeued || failed)
        spdlog::warn(
            "batches: {} item(s) were running when loch stopped: {} run again, {} failed (stopped twice)",
            requeued + failed, requeued, failed);
    for (auto& b : store_->unfinished_batches()) {
        Active a;
        a.rec = b;
        a.items_in = b.status != BatchStatus::validating;
        if (const auto f = store_->file(b.input_file_id)) a.input = f->path;
        a.counts = store_->counts(b.id);
        order_.push_back(b.id);
        active_.emplace(b.id, std::move(a));
    }
    if (!order_.empty()) spdlog::info("batches: resuming {} unfinished batch(es)", order_.size());
    started_ = true;
    asio::co_spawn(
        ex_, [self = shared_from_this()]() { return self->loop(); }, asio::detached);
}

void Runner::stop() {
    stopping_ = true;
    wake_.cancel();
}

void Runner::kick() {
    wake_.cancel();
}

asio::awaitable<void> Runner::loop() {
    auto self = shared_from_this();  // (kept alive while the loop runs)
    while (!stopping_) {
        try {
            ++passes_;
            pass();
        } catch (const std::exception& e) {
            spdlog::error("batches: {}", e.what());
        }
        // With no batch unfinished there is nothing to pass over: the loop sleeps until create(), cancel()
        // or kick() wakes it (an idle loch does not wake; issue 55), after one last checkpoint of what the
        // batches wrote. Uploads alone leave a few rows in the write-ahead log until the next batch's.
        const bool idle = active_.empty();
        if (!checkpointing_ && (idle ? wrote_since_checkpoint_ : Clock::now() >= next_checkpoint_)) {
            checkpointing_ = true;
            wrote_since_checkpoint_ = false;
            asio::co_spawn(ex_, checkpoint(self), asio::detached);
        }
        if (!idle) wrote_since_checkpoint_ = true;
        if (idle && !checkpointing_)
            wake_.expires_at(asio::steady_timer::time_point::max());
        else
            wake_.expires_after(options_.pass);
        co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
}

asio::awaitable<void> Runner::checkpoint(std::shared_ptr<Runner> self) {
    try {
        co_await core::off_loop(work_,
                                [db = options_.dir / "batches.sqlite3"] { return Store::checkpoint(db); });
    } catch (const std::exception& e) {
        spdlog::warn("batches: {} (tried again in {} ms; the log grows meanwhile)", e.what(),
                     options_.checkpoint_every.count());
    }
    checkpointing_ = false;
    next_checkpoint_ = Clock::now() + options_.checkpoint_every;
}

Runner::Active* Runner::find(const std::string& id) {
    const auto it = active_.find(id);
    return it == active_.end() ? nullptr : &it->second;
}

void Runner::pass() {
    const auto now = unix_now();
    for (const auto& id : std::vector<std::string>(order_)) {
        Active* a = find(id);
        if (!a || a->finalizing) continue;
        // Its items first, whatever happened meanwhile (a cancel): then it ends with every item listed.
        if (!a->items_in) {
            if (!a->validating) {
                a->validating = true;
                asio::co_spawn(ex_, validate(shared_from_this(), id), asio::detached);
            }
            continue;
        }
        switch (a->rec.status) {
            case BatchStatus::in_progress:
                if (!a->expiring && now >= a->rec.created_at + a->rec.window_s) {
                    a->expiring = true;
                    spdlog::warn("batch {}: its completion window ({}) passed with {} item(s) unfinished", id,
                                 window_text(a->rec.window_s), a->counts.queued + a->counts.running);
                }
                if (a->expiring) {
                    cancel_running(*a);
                } else {
                    if (a->counts.queued > 0) start_items(*a);
                    preempt_for_people(*a);
                }
                if (a->running.empty() && (a->expiring || a->counts.queued == 0)) {
                    a->finalizing = true;
                    asio::co_spawn(ex_, finalize(shared_from_this(), id), asio::detached);
                }
                break;
            case BatchStatus::cancelling:
                cancel_running(*a);
                if (a->running.empty()) {
                    a->finalizing = true;
                    asio::co_spawn(ex_, finalize(shared_from_this(), id), asio::detached);
                }
                break;
            case BatchStatus::finalizing:
                a->finalizing = true;
                asio::co_spawn(ex_, finalize(shared_from_this(), id), asio::detached);
                break;
            default:
                break;
        }
    }
}

void Runner::start_items(Active& a) {
    if (stopping_) return;
    const auto now = Clock::now();
    const std::string id = a.rec.id;  // (a may move? no: std::map nodes are stable)
    for (auto& item : store_->queued_items(id, 64)) {
        if (a.running.contains(item.line)) continue;
        const auto& model = item.model;
        if (auto nb = not_before_.find(model); nb != not_before_.end() && nb->second > now) continue;
        auto& n = in_flight_[model];
        if (n >= std::max(1u, hooks_.concurrency(model))) continue;
        if (!store_->start_item(id, item.line)) continue;
        ++n;
        --a.counts.queued;
        ++a.counts.running;
        ++item.attempts;
        a.running[item.line] = {item_request_id(id, item.line, item.attempts), model};
        asio::co_spawn(ex_, run_item(shared_from_this(), id, std::move(item)), asio::detached);
    }
}

void Runner::preempt_for_people(Active& a) {
    std::map<std::string, bool> yields;  // asked once per model per pass
    for (auto& [line, r] : a.running) {
        if (r.preempted || r.cancelled) continue;
        auto y = yields.find(r.model);
        if (y == yields.end()) y = yields.emplace(r.model, hooks_.yields(r.model)).first;
        if (y->second && hooks_.preempt(r.request_id)) {
            r.preempted = true;
            spdlog::info(
                "batch {}: item on line {} preempted for an interactive request to '{}' (it runs again)",
                a.rec.id, line, r.model);
        }
    }
}

void Runner::cancel_running(Active& a) {
    for (auto& [line, r] : a.running) {
        if (r.cancelled) continue;
        r.cancelled = true;
        hooks_.cancel(r.request_id);
    }
}

asio::awaitable<void> Runner::run_item(std::shared_ptr<Runner> self, std::string id, ItemRecord item) {
    const auto t0 = Clock::now();
    ItemAnswer answer;
    bool unreadable = false;
    if (Active* a = find(id)) {
        auto body = item_body(a->input, item);
        if (body) {
            answer = co_await hooks_.send(item.url, std::move(*body), a->running[item.line].request_id);
        } else {
            unreadable = true;
        }
    }
    try {
        settle(id, item, answer, unreadable, t0);
    } catch (const std::exception& e) {
        // (A store that cannot be written: the item stays `running` there and runs once more after a
        // restart.)
        spdlog::error("batch {}: the item on line {} could not be recorded: {}", id, item.line, e.what());
    }
    kick();
}

void Runner::settle(const std::string& id, const ItemRecord& item, const ItemAnswer& answer, bool unreadable,
                    Clock::time_point t0) {
    Active* a = find(id);
    if (!a) return;
    const Running r = a->running[item.line];
    a->running.erase(item.line);
    if (auto& n = in_flight_[item.model]; n > 0) --n;
    --a->counts.running;
    const bool stopped_by_us = answer.error_type == "cancelled" && (r.preempted || r.cancelled);
    if (!unreadable && stopped_by_us && r.cancelled) {
        // It ran, and the batch's end stopped it — its cancel, or its completion window: it is not one that
        // "never ran" (write_outputs' wording for the items still queued).
        const bool cancelled = a->rec.cancelling_at.has_value();
        store_->finish_item(
            id, item.line, answer.status, answer.body,
            core::json_text(
                {{"code", cancelled ? "batch_cancelled" : "batch_expired"},
                 {"message", cancelled ? "The batch was cancelled while this request ran: loch stopped it "
                                         "before it finished."
                                       : "The completion window expired while this request ran: loch stopped "
                                         "it before it finished."}}));
        ++a->counts.failed;
        return;
    }
    if (!unreadable && (stopped_by_us || never_ran(answer))) {
        store_->requeue_item(id, item.line);
        ++a->counts.queued;
        if (r.preempted && stopped_by_us) {
            ++a->preempted;
        } else if (!stopped_by_us) {
            ++a->retried;
            // loch was busy: give this model's items a moment (its Retry-After, at least a second).
            not_before_[item.model] = Clock::now() + std::chrono::seconds(std::max(1, answer.retry_after_s));
        }
    } else {
        std::string error;
        if (unreadable)
            error = json{{"code", "input_unreadable"},
                         {"message", "the item's line could not be read back from the input file"}}
                        .dump();
        else if (answer.status < 200 || answer.status >= 300) {
            const auto body = json::parse(answer.body, nullptr, false);
            std::string message = fmt::format("HTTP {}", answer.status);
            if (body.is_object() && body.contains("error") && body["error"].is_object() &&
                body["error"].contains("message") && body["error"]["message"].is_string())
                message = body["error"]["message"].get<std::string>();
            error = core::json_text(
                json{{"code", answer.error_type.empty() ? "request_failed" : answer.error_type},
                     {"message", message}});
        }
        store_->finish_item(id, item.line, answer.status, answer.body, error);
        if (error.empty()) {
            ++a->counts.done;
            ++a->done_here;
            a->finished.emplace_back(Clock::now(), std::chrono::duration<double>(Clock::now() - t0).count());
            while (a->finished.size() > 1 &&
                   a->finished.front().first < Clock::now() - std::chrono::minutes(5))
                a->finished.pop_front();
        } else {
            ++a->counts.failed;
        }
    }
}

void Runner::fail_validation(Active& a, const json& errors) {
    store_->set_errors(a.rec.id, core::json_text(errors));
    store_->set_status(a.rec.id, BatchStatus::failed, unix_now());
    spdlog::warn("batch {}: failed validation: {}", a.rec.id, errors.dump());
    const std::string id = a.rec.id;
    active_.erase(id);
    std::erase(order_, id);
}

asio::awaitable<void> Runner::validate(std::shared_ptr<Runner> self, std::string id) {
    Active* a = find(id);
    store_->clear_items(id);  // a validation a crash interrupted starts over
    const auto file = store_->file(a->rec.input_file_id);
    if (!file) {
        fail_validation(*a, {{"object", "list"},
                             {"data",
                              {{{"code", "input_file_missing"},
                                {"message", "the input file " + a->rec.input_file_id + " was deleted"},
                                {"line", nullptr}}}}});
        co_return;
    }
    a->input = file->path;
    InputCheck check;
    try {
        check = co_await core::off_loop(work_, [path = file->path, rules = hooks_.rules()] {
            std::ifstream in(path, std::ios::binary);
            return check_input_file(in, rules);
        });
    } catch (const std::exception& e) {
        check.problems.push_back({0, e.what()});
    }
    a = find(id);
    if (!a) co_return;
    if (!check.ok()) {
        json data = json::array();
        for (const auto& p : check.problems)
            data.push_back({{"code", "invalid_line"},
                            {"message", p.message},
                            {"line", p.line > 0 ? json(p.line) : json(nullptr)},
                            {"param", nullptr}});
        fail_validation(*a, {{"object", "list"}, {"data", data}});
        co_return;
    }
    // In chunks, the loop free between them (a 51k-item batch is a few hundred milliseconds of inserts).
    for (std::size_t i = 0; i < check.items.size(); i += options_.insert_chunk) {
        const auto n = std::min(options_.insert_chunk, check.items.size() - i);
        store_->add_items(id, std::span<const ItemRecord>(check.items).subspan(i, n));
        co_await asio::post(ex_, asio::use_awaitable);
        if (!find(id)) co_return;
    }
    a = find(id);
    if (a->rec.status == BatchStatus::validating) {
        const auto at = unix_now();
        store_->set_status(id, BatchStatus::in_progress, at);
        a->rec.status = BatchStatus::in_progress;
        a->rec.in_progress_at = at;
    }
    a->counts = store_->counts(id);
    a->since = Clock::now();
    a->validating = false;
    a->items_in = true;
    spdlog::info("batch {}: {} item(s) queued", id, a->counts.total);
    kick();
}

asio::awaitable<void> Runner::finalize(std::shared_ptr<Runner> self, std::string id) {
    Active* a = find(id);
    // How it ends: cancelled when asked; expired when items are left unfinished; else completed.
    const bool cancelled = a->rec.cancelling_at.has_value();
    const bool expired = !cancelled && a->counts.queued > 0;
    const auto final_status = cancelled ? BatchStatus::cancelled
                              : expired ? BatchStatus::expired
                                        : BatchStatus::completed;
    if (!cancelled && a->rec.status != BatchStatus::finalizing) {
        const auto at = unix_now();
        store_->set_status(id, BatchStatus::finalizing, at);
        a->rec.status = BatchStatus::finalizing;
        a->rec.finalizing_at = at;
    }
    FileRecord out, err;
    out.id = Store::new_id("file-");
    err.id = Store::new_id("file-");
    out.path = files_dir_ / out.id;
    err.path = files_dir_ / err.id;
    OutputFigures figures;
    try {
        figures = co_await core::off_loop(
            work_, [db = options_.dir / "batches.sqlite3", id, o = out.path, e = err.path, cancelled] {
                const Store reader(db, Store::Mode::read);
                return write_outputs(reader, id, o, e, cancelled ? "batch_cancelled" : "batch_expired",
                                     cancelled ? "The batch was cancelled before this request ran."
                                               : "This request could not be executed before the completion "
                                                 "window expired.");
            });
    } catch (const std::exception& e) {
        spdlog::error("batch {}: cannot write its output files: {} (retried)", id, e.what());
        if (Active* again = find(id)) again->finalizing = false;
        co_return;
    }
    const auto at = unix_now();
    const auto keep = [&](FileRecord& f, std::uint64_t lines, std::uint64_t bytes, const char* what) {
        std::error_code ec;
        if (lines == 0) {
            fs::remove(f.path, ec);
            f.id.clear();
            return;
        }
        f.purpose = "batch_output";
        f.filename = fmt::format("{}_{}.jsonl", id, what);
        f.bytes = bytes;
        f.created_at = at;
        store_->add_file(f);
    };
    keep(out, figures.output_lines, figures.output_bytes, "output");
    keep(err, figures.error_lines, figures.error_bytes, "error");
    store_->set_outputs(id, out.id, err.id);
    store_->set_status(id, final_status, at);
    spdlog::info("batch {}: {} — {} answer(s) in the output file, {} in the error file", id,
                 to_string(final_status), figures.output_lines, figures.error_lines);
    if (ended_.size() >= 100) ended_.erase(ended_.begin());
    ended_[id] = progress(id);
    active_.erase(id);
    std::erase(order_, id);
}

BatchRecord Runner::create(const NewBatch& nb) {
    const auto file = store_->file(nb.input_file_id);
    if (!file) throw std::invalid_argument("no file '" + nb.input_file_id + "'");
    if (file->purpose != "batch")
        throw std::invalid_argument(
            fmt::format("file '{}' is a {} file, not a batch input file (purpose \"batch\")",
                        nb.input_file_id, file->purpose));
    BatchRecord b;
    b.id = Store::new_id("batch_");
    b.input_file_id = nb.input_file_id;
    b.endpoint = nb.endpoint;
    b.metadata_json = nb.metadata_json;
    b.window_s = nb.window_s;
    b.status = BatchStatus::validating;
    b.created_at = unix_now();
    store_->add_batch(b);
    Active a;
    a.rec = b;
    a.items_in = false;
    a.input = file->path;
    order_.push_back(b.id);
    active_.emplace(b.id, std::move(a));
    kick();
    return b;
}

std::optional<BatchRecord> Runner::cancel(const std::string& id) {
    auto b = store_->batch(id);
    if (!b) return std::nullopt;
    Active* a = find(id);
    if (!a) throw std::logic_error(fmt::format("batch {} has already ended ({})", id, to_string(b->status)));
    if (a->rec.status == BatchStatus::cancelling || a->rec.status == BatchStatus::finalizing) return a->rec;
    const auto at = unix_now();
    store_->set_status(id, BatchStatus::cancelling, at);
    a->rec.status = BatchStatus::cancelling;
    a->rec.cancelling_at = at;
    kick();
    return a->rec;
}

json Runner::progress(const std::string& id) const {
    const auto it = active_.find(id);
    if (it == active_.end()) {
        const auto e = ended_.find(id);
        return e == ended_.end() ? json(nullptr) : e->second;
    }
    const Active& a = it->second;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - a.since).count();
    json j = {{"queued", a.counts.queued}, {"running", a.counts.running}, {"done", a.counts.done},
              {"failed", a.counts.failed}, {"preempted", a.preempted},    {"retried", a.retried}};
    j["items_per_minute_overall"] = elapsed > 0 ? 60.0 * double(a.done_here) / elapsed : 0.0;
    double recent_per_s = 0;
    if (a.finished.size() >= 2) {
        const double span = std::chrono::duration<double>(now - a.finished.front().first).count();
        if (span > 0) recent_per_s = double(a.finished.size()) / span;
        double sum = 0;
        for (const auto& [t, s] : a.finished) sum += s;
        j["mean_item_s"] = sum / double(a.finished.size());
    }
    j["items_per_minute"] = 60.0 * recent_per_s;
    const auto left = a.counts.queued + a.counts.running;
    if (left == 0) {
        j["eta_s"] = 0;
        j["eta_basis"] = "nothing left to run";
    } else if (recent_per_s > 0) {
        j["eta_s"] = double(left) / recent_per_s;
        j["eta_basis"] = fmt::format("{} item(s) left at {:.2f}/s (the last 5 minutes)", left, recent_per_s);
    } else {
        j["eta_s"] = nullptr;
        j["eta_basis"] = "unknown: fewer than two items finished yet";
    }
    bool yielding = false;
    for (const auto& [line, r] : a.running) yielding = yielding || r.preempted;
    j["yielding"] = yielding;
    return j;
}

json Runner::active() const {
    json out = json::array();
    for (const auto& id : order_) {
        const auto it = active_.find(id);
        if (it == active_.end()) continue;
        json j = progress(id);
        j["id"] = id;
        j["status"] = std::string(to_string(it->second.rec.status));
        j["total"] = it->second.counts.total;
        out.push_back(std::move(j));
    }
    return out;
}

bool Runner::uses_file(const std::string& file_id) const {
    for (const auto& [id, a] : active_)
        if (a.rec.input_file_id == file_id) return true;
    return false;
}

}  // namespace loch::batch
