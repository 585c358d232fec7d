// batch/runner — runs the Batch API's batches (issue 29, docs/batches.md): validates a new batch's input
// file, sends its items one by one to loch's own HTTP port at batch priority, records each result in the
// store, and writes the output and error files when the batch ends (completed, cancelled or expired).
//
// Exactly once: an item is `running` in the store before it is sent and `done`/`failed` with its answer in
// the transaction that ends it; at start-up the items that were running when loch died are queued again
// once (Store::recover). An answer that says the item never ran — loch was busy (429, a 503 queue_full /
// queue_timeout / shutting_down) or unreachable, or the item was preempted — puts it back in the queue
// without counting an attempt.
//
// Yielding: items go through the same admission as any request, at batch priority (the broker holds them
// while a person's request runs or waits where their model runs). An item already running where an
// interactive request now wants the device is preempted when its engine can stop it (llama-server,
// whisper-server): cancelled through the cancel path and requeued, counted in the batch's `preempted`.
//
// At most `concurrency(model)` items of a model are in flight at once (default: its slots).
//
// Threads: everything on loch's io_context; the input file's check and the output files are written on the
// worker pool (core/off_loop.hpp), and so is the store's checkpoint (its only fsync). The store is the
// runner's own (Store is not thread-safe).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "batch/input_file.hpp"
#include "batch/store.hpp"

namespace loch::batch {

// loch's answer to one item.
struct ItemAnswer {
    int status = 0;          // HTTP status; 0 = no answer (loch was not reachable, or the connection broke)
    std::string body;        // the answer's body
    std::string error_type;  // a non-2xx JSON answer's error.type ("cancelled", "queue_full", …)
    int retry_after_s = 0;
};

struct RunnerHooks {
    // Sends one item to loch's own port (X-Loch-Priority: batch, X-Request-Id: request_id).
    std::function<boost::asio::awaitable<ItemAnswer>(std::string url, std::string body,
                                                     std::string request_id)>
        send;
    // Whether an interactive request runs or waits where `model` runs (Broker::yields_to_interactive).
    std::function<bool(const std::string& model)> yields;
    // Preempts the request if its engine is running it and can stop it; false otherwise.
    std::function<bool(const std::string& request_id)> preempt;
    // Ends the request wherever it is (queued or running) for a cancelled or expired batch.
    std::function<void(const std::string& request_id)> cancel;
    std::function<unsigned(const std::string& model)> concurrency;
    // The rules an input file is checked by now (the models may have changed since its upload).
    std::function<InputRules()> rules;
};

struct RunnerOptions {
    std::filesystem::path dir;            // batches.sqlite3, files/, tmp/
    std::chrono::milliseconds pass{250};  // while a batch is unfinished; none: it sleeps until woken
    std::size_t insert_chunk = 2000;      // items added per transaction while a batch validates
    // How often the store's write-ahead log is copied into its database, on the worker (Store::checkpoint):
    // the loop's commits never fsync.
    std::chrono::milliseconds checkpoint_every{5000};
};

// What POST /v1/batches asked for, checked by the HTTP layer.
struct NewBatch {
    std::string input_file_id, endpoint, metadata_json = "{}";
    std::int64_t window_s = 24 * 3600;
};

class Runner : public std::enable_shared_from_this<Runner> {
  public:
    Runner(boost::asio::any_io_executor ex, boost::asio::thread_pool& work, RunnerOptions options,
           RunnerHooks hooks);
    ~Runner();
    Runner(const Runner&) = delete;
    Runner& operator=(const Runner&) = delete;

    // Opens the store (creating its folders), recovers what a crash left running, resumes unfinished
    // batches. Throws std::runtime_error when the store cannot be opened.
    void start();
    void stop();  // starts nothing more (shutdown); what runs ends with loch's drain, and is requeued
    void kick();  // a pass now (an interactive request arrived: preempt at once)
    // Passes over the unfinished batches so far: none while there is none (the loop sleeps until woken).
    std::uint64_t passes() const { return passes_; }
    Store& store() { return *store_; }
    const std::filesystem::path& files_dir() const { return files_dir_; }

    // POST /v1/batches: recorded as `validating`, checked and queued in the background. Throws
    // std::invalid_argument when the input file is unknown or not a batch input file.
    BatchRecord create(const NewBatch& b);
    // POST /v1/batches/{id}/cancel: `cancelling` now, `cancelled` once what runs has stopped. nullopt:
    // unknown. Throws std::logic_error naming the status when the batch has already ended.
    std::optional<BatchRecord> cancel(const std::string& id);
    // Progress of an unfinished batch (the `loch` field): counts, preempted, throughput, ETA; a batch that
    // ended in this run keeps its last figures (null after a restart).
    nlohmann::json progress(const std::string& id) const;
    // Every unfinished batch's progress (loch status, the dashboard, /metrics).
    nlohmann::json active() const;
    bool uses_file(const std::string& file_id) const;  // an unfinished batch reads it

  private:
    using Clock = std::chrono::steady_clock;
    struct Running {
        std::string request_id, model;
        bool preempted = false, cancelled = false;
    };
    struct Active {
        BatchRecord rec;
        std::filesystem::path input;
        ItemCounts counts;
        std::map<std::int64_t, Running> running;  // by line
        bool validating = false, finalizing = false, expiring = false;
        bool items_in = true;  // false until validation has added every item (even if cancelled meanwhile)
        std::deque<std::pair<Clock::time_point, double>> finished;  // recent items: end, seconds
        std::uint64_t preempted = 0, retried = 0, done_here = 0;
        Clock::time_point since = Clock::now();
    };

    boost::asio::awaitable<void> loop();
    void pass();
    void start_items(Active& a);
    void preempt_for_people(Active& a);
    void cancel_running(Active& a);
    boost::asio::awaitable<void> validate(std::shared_ptr<Runner> self, std::string id);
    boost::asio::awaitable<void> run_item(std::shared_ptr<Runner> self, std::string id, ItemRecord item);
    // What an item's answer means: done, failed, or back in the queue.
    void settle(const std::string& id, const ItemRecord& item, const ItemAnswer& answer, bool unreadable,
                Clock::time_point t0);
    boost::asio::awaitable<void> finalize(std::shared_ptr<Runner> self, std::string id);
    boost::asio::awaitable<void> checkpoint(std::shared_ptr<Runner> self);
    void fail_validation(Active& a, const nlohmann::json& errors);
    Active* find(const std::string& id);

    boost::asio::any_io_executor ex_;
    boost::asio::thread_pool& work_;
    RunnerOptions options_;
    RunnerHooks hooks_;
    std::filesystem::path files_dir_;
    std::unique_ptr<Store> store_;
    boost::asio::steady_timer wake_;
    std::vector<std::string> order_;  // unfinished batches, oldest first
    std::map<std::string, Active> active_;
    std::map<std::string, nlohmann::json> ended_;  // the last figures of batches that ended in this run
    std::map<std::string, unsigned> in_flight_;    // per model
    std::map<std::string, Clock::time_point> not_before_;  // per model: after a busy answer
    bool stopping_ = false, started_ = false;
    bool checkpointing_ = false;
    bool wrote_since_checkpoint_ = false;  // a pass ran with batches unfinished since the last checkpoint
    std::uint64_t passes_ = 0;
    Clock::time_point next_checkpoint_ = Clock::now();
};

// The Batch object as OpenAI's clients read it, with loch's progress under `loch` when given.
nlohmann::json batch_json(const BatchRecord& b, const ItemCounts& counts,
                          const nlohmann::json& loch = nullptr);

}  // namespace loch::batch
