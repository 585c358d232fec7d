// batch/store — the Batch API's records (issue 29, docs/batches.md): uploaded files, batches and each item's
// state and result, in one SQLite database in the state directory (SQLiteC++ over Debian's libsqlite3).
//
// What it promises: every write that ends an item (its state and its result) is one transaction, so after a
// crash an item is either finished with its result or not; `recover()` at start-up turns the items that were
// running into queued ones with one more attempt (re-run once), and fails those already on their second
// attempt (`interrupted_twice`) instead of re-running them forever. A finished item is never re-run. Requests
// stay in the uploaded file (each item's line: offset and length), not in the database.
//
// Not thread-safe: one owner (the batch runner on loch's io_context) calls it. Every call is short (an
// indexed read or a single-row write, committed without an fsync), so it may run on the loop thread. The one
// step that fsyncs — copying the write-ahead log into the database — is not the owner's: its connection never
// checkpoints, the runner calls `checkpoint` on its worker every few seconds instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace SQLite {
class Database;
}

namespace loch::batch {

struct FileRecord {
    std::string id;  // "file-…"
    std::string purpose, filename;
    std::uint64_t bytes = 0;
    std::filesystem::path path;   // where its bytes are (the state directory's files/)
    std::int64_t created_at = 0;  // Unix seconds
};

enum class BatchStatus {
    validating,
    failed,
    in_progress,
    finalizing,
    completed,
    expired,
    cancelling,
    cancelled
};
std::string_view to_string(BatchStatus s);
std::optional<BatchStatus> batch_status_from(std::string_view s);

struct BatchRecord {
    std::string id;  // "batch_…"
    std::string input_file_id, endpoint, metadata_json = "{}";
    std::int64_t window_s = 24 * 3600;
    BatchStatus status = BatchStatus::validating;
    std::int64_t created_at = 0;
    std::optional<std::int64_t> in_progress_at, finalizing_at, completed_at, failed_at, expired_at,
        cancelling_at, cancelled_at;
    std::string output_file_id, error_file_id;
    std::string errors_json;  // failed at validation: OpenAI's `errors` object; empty otherwise
};

enum class ItemState { queued, running, done, failed };
std::string_view to_string(ItemState s);

struct ItemRecord {
    std::int64_t line = 0;  // 1-based line in the input file: the item's key within its batch
    std::string custom_id, url, model;
    std::uint64_t line_offset = 0, line_bytes = 0;  // the item's line within the input file
    ItemState state = ItemState::queued;
    int attempts = 0;
    int status_code = 0;  // the answer's HTTP status once done or failed
    std::string result;   // the answer's body (done) — JSON text
    std::string error;    // failed: {"code","message"} JSON text
};

struct ItemCounts {
    std::int64_t total = 0, queued = 0, running = 0, done = 0, failed = 0;
};

class Store {
  public:
    // Opens (creating when missing) the database at `path`, in WAL mode. Throws std::runtime_error naming the
    // file and SQLite's reason.
    // `read`: a second connection that only reads (a batch's output file written off the loop, beside the
    // owner's writes: WAL lets readers go on while one writes).
    enum class Mode { write, read };
    explicit Store(const std::filesystem::path& path, Mode mode = Mode::write);
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // Copies what the write-ahead log holds into the database file (SQLite's PASSIVE checkpoint: it waits for
    // no reader or writer; the owner goes on writing meanwhile) on a connection of its own. Blocks on the
    // disk: call it off the loop. Returns the log's frames copied. Throws std::runtime_error naming the file.
    static int checkpoint(const std::filesystem::path& path);

    // A new id with `prefix` ("file-", "batch_"): random, never reused.
    static std::string new_id(std::string_view prefix);

    void add_file(const FileRecord& f);
    std::optional<FileRecord> file(const std::string& id) const;
    std::vector<FileRecord> files() const;  // newest first
    bool remove_file(const std::string& id);

    // The batch, then its items (one transaction each: the runner adds a large batch's items in chunks,
    // the batch `validating` until the last one is in).
    void add_batch(const BatchRecord& b, const std::vector<ItemRecord>& items = {});
    void add_items(const std::string& batch_id, std::span<const ItemRecord> items);
    void clear_items(const std::string& batch_id);  // a validation interrupted by a crash starts over
    std::optional<BatchRecord> batch(const std::string& id) const;
    // Newest first; `after` = the id the previous page ended with (OpenAI's pagination).
    std::vector<BatchRecord> batches(const std::string& after, std::size_t limit) const;
    // Sets the status and its timestamp (`at`, Unix seconds); also the output and error files when given.
    void set_status(const std::string& id, BatchStatus s, std::int64_t at);
    void set_outputs(const std::string& id, const std::string& output_file_id,
                     const std::string& error_file_id);
    void set_errors(const std::string& id, const std::string& errors_json);
    // validating, in_progress, finalizing, cancelling: what the runner resumes at start-up, oldest first.
    std::vector<BatchRecord> unfinished_batches() const;

    // The first queued item of the batch in line order, nullopt when none is queued.
    std::optional<ItemRecord> next_queued(const std::string& batch_id) const;
    std::vector<ItemRecord> queued_items(const std::string& batch_id, std::size_t limit) const;
    // queued → running, attempts + 1. False when the item was not queued.
    bool start_item(const std::string& batch_id, std::int64_t line);
    // running → done (2xx) or failed, with the answer, in one transaction. False when it was not running.
    bool finish_item(const std::string& batch_id, std::int64_t line, int status_code,
                     const std::string& result, const std::string& error);
    // running → queued without an attempt counted (a preempted item: it did not fail).
    bool requeue_item(const std::string& batch_id, std::int64_t line);
    ItemCounts counts(const std::string& batch_id) const;
    // Every item in line order (finalizing writes the output and error files from this).
    void each_item(const std::string& batch_id, const std::function<void(const ItemRecord&)>& f) const;

    // After a crash: running items go back to the queue with their attempt counted; an item that was already
    // on its second attempt fails with `interrupted_twice`. Returns {requeued, failed}.
    std::pair<std::size_t, std::size_t> recover();

  private:
    void insert_items(const std::string& batch_id, std::span<const ItemRecord> items);  // in a transaction
    std::unique_ptr<SQLite::Database> db_;
};

}  // namespace loch::batch
