#include "batch/store.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include <array>
#include <random>
#include <stdexcept>

namespace loch::batch {

namespace {

constexpr int kSchemaVersion = 2;  // 2: batches.errors

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS files(
  id TEXT PRIMARY KEY, purpose TEXT NOT NULL, filename TEXT NOT NULL, bytes INTEGER NOT NULL,
  path TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS batches(
  id TEXT PRIMARY KEY, input_file_id TEXT NOT NULL, endpoint TEXT NOT NULL, metadata TEXT NOT NULL,
  window_s INTEGER NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
  in_progress_at INTEGER, finalizing_at INTEGER, completed_at INTEGER, failed_at INTEGER, expired_at INTEGER,
  cancelling_at INTEGER, cancelled_at INTEGER, output_file_id TEXT NOT NULL DEFAULT '',
  error_file_id TEXT NOT NULL DEFAULT '', seq INTEGER NOT NULL, errors TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS items(
  batch_id TEXT NOT NULL, line INTEGER NOT NULL, custom_id TEXT NOT NULL, url TEXT NOT NULL,
  model TEXT NOT NULL, line_offset INTEGER NOT NULL, line_bytes INTEGER NOT NULL, state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0, status_code INTEGER NOT NULL DEFAULT 0, result BLOB, error TEXT,
  PRIMARY KEY(batch_id, line), UNIQUE(batch_id, custom_id));
CREATE INDEX IF NOT EXISTS items_by_state ON items(batch_id, state, line);
)sql";

// The timestamp columns, in BatchStatus order (validating has created_at).
constexpr std::array<const char*, 8> kStatusColumn = {"created_at",    "failed_at",    "in_progress_at",
                                                      "finalizing_at", "completed_at", "expired_at",
                                                      "cancelling_at", "cancelled_at"};
constexpr std::array<const char*, 8> kStatusName = {"validating", "failed",  "in_progress", "finalizing",
                                                    "completed",  "expired", "cancelling",  "cancelled"};
constexpr std::array<const char*, 4> kItemStateName = {"queued", "running", "done", "failed"};

std::optional<std::int64_t> optional_int(const SQLite::Column& c) {
    return c.isNull() ? std::nullopt : std::optional(c.getInt64());
}

BatchRecord batch_row(SQLite::Statement& q) {
    BatchRecord b;
    b.id = q.getColumn(0).getString();
    b.input_file_id = q.getColumn(1).getString();
    b.endpoint = q.getColumn(2).getString();
    b.metadata_json = q.getColumn(3).getString();
    b.window_s = q.getColumn(4).getInt64();
    b.status = batch_status_from(q.getColumn(5).getString()).value_or(BatchStatus::failed);
    b.created_at = q.getColumn(6).getInt64();
    b.in_progress_at = optional_int(q.getColumn(7));
    b.finalizing_at = optional_int(q.getColumn(8));
    b.completed_at = optional_int(q.getColumn(9));
    b.failed_at = optional_int(q.getColumn(10));
    b.expired_at = optional_int(q.getColumn(11));
    b.cancelling_at = optional_int(q.getColumn(12));
    b.cancelled_at = optional_int(q.getColumn(13));
    b.output_file_id = q.getColumn(14).getString();
    b.error_file_id = q.getColumn(15).getString();
    b.errors_json = q.getColumn(16).getString();
    return b;
}
constexpr const char* kBatchColumns =
    "id, input_file_id, endpoint, metadata, window_s, status, created_at, in_progress_at, finalizing_at, "
    "completed_at, failed_at, expired_at, cancelling_at, cancelled_at, output_file_id, error_file_id, errors";

ItemRecord item_row(SQLite::Statement& q) {
    ItemRecord i;
    i.line = q.getColumn(0).getInt64();
    i.custom_id = q.getColumn(1).getString();
    i.url = q.getColumn(2).getString();
    i.model = q.getColumn(3).getString();
    i.line_offset = static_cast<std::uint64_t>(q.getColumn(4).getInt64());
    i.line_bytes = static_cast<std::uint64_t>(q.getColumn(5).getInt64());
    const std::string state = q.getColumn(6).getString();
    for (std::size_t s = 0; s < kItemStateName.size(); ++s)
        if (state == kItemStateName[s]) i.state = static_cast<ItemState>(s);
    i.attempts = q.getColumn(7).getInt();
    i.status_code = q.getColumn(8).getInt();
    i.result = q.getColumn(9).isNull() ? std::string() : q.getColumn(9).getString();
    i.error = q.getColumn(10).isNull() ? std::string() : q.getColumn(10).getString();
    return i;
}
constexpr const char* kItemColumns =
    "line, custom_id, url, model, line_offset, line_bytes, state, attempts, status_code, result, error";

FileRecord file_row(SQLite::Statement& q) {
    FileRecord f;
    f.id = q.getColumn(0).getString();
    f.purpose = q.getColumn(1).getString();
    f.filename = q.getColumn(2).getString();
    f.bytes = static_cast<std::uint64_t>(q.getColumn(3).getInt64());
    f.path = q.getColumn(4).getString();
    f.created_at = q.getColumn(5).getInt64();
    return f;
}

}  // namespace

std::string_view to_string(BatchStatus s) {
    return kStatusName[static_cast<std::size_t>(s)];
}
std::optional<BatchStatus> batch_status_from(std::string_view s) {
    for (std::size_t i = 0; i < kStatusName.size(); ++i)
        if (s == kStatusName[i]) return static_cast<BatchStatus>(i);
    return std::nullopt;
}
std::string_view to_string(ItemState s) {
    return kItemStateName[static_cast<std::size_t>(s)];
}

Store::Store(const std::filesystem::path& path, Mode mode) {
    try {
        if (mode == Mode::read) {
            db_ = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READONLY);
            return;
        }
        db_ = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        // WAL: readers never wait for the runner's writes. NORMAL: a power cut may lose the last commits,
        // which then run once more — the promise a crash already gives (docs/batches.md).
        // wal_autocheckpoint=0: the commit that crosses ~1000 pages of log would checkpoint it on the owner's
        // thread, with an fsync of the log and the database (tens of ms, seconds on a busy disk):
        // `checkpoint` does that off the loop.
        db_->exec(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
            "PRAGMA wal_autocheckpoint=0;");
        const int version = db_->execAndGet("PRAGMA user_version").getInt();
        if (version > kSchemaVersion)
            throw std::runtime_error(fmt::format("written by a newer loch (schema {}, this loch knows {})",
                                                 version, kSchemaVersion));
        if (version == 1) db_->exec("ALTER TABLE batches ADD COLUMN errors TEXT NOT NULL DEFAULT ''");
        db_->exec(kSchema);
        db_->exec(fmt::format("PRAGMA user_version={}", kSchemaVersion));
    } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("cannot open the batch store {}: {}", path.string(), e.what()));
    }
}

Store::~Store() = default;

int Store::checkpoint(const std::filesystem::path& path) {
    try {
        SQLite::Database db(path.string(), SQLite::OPEN_READWRITE);
        SQLite::Statement q(db, "PRAGMA wal_checkpoint(PASSIVE)");
        if (!q.executeStep()) return 0;
        return q.getColumn(2).getInt();  // (busy, log frames, frames checkpointed)
    } catch (const std::exception& e) {
        throw std::runtime_error(
            fmt::format("cannot checkpoint the batch store {}: {}", path.string(), e.what()));
    }
}

std::string Store::new_id(std::string_view prefix) {
    std::random_device rd;
    std::uniform_int_distribution<std::uint64_t> any;
    return fmt::format("{}{:016x}{:08x}", prefix, any(rd), static_cast<std::uint32_t>(any(rd)));
}

void Store::add_file(const FileRecord& f) {
    SQLite::Statement q(*db_, "INSERT INTO files VALUES(?,?,?,?,?,?)");
    q.bind(1, f.id);
    q.bind(2, f.purpose);
    q.bind(3, f.filename);
    q.bind(4, static_cast<std::int64_t>(f.bytes));
    q.bind(5, f.path.string());
    q.bind(6, f.created_at);
    q.exec();
}

std::optional<FileRecord> Store::file(const std::string& id) const {
    SQLite::Statement q(*db_, "SELECT * FROM files WHERE id=?");
    q.bind(1, id);
    if (!q.executeStep()) return std::nullopt;
    return file_row(q);
}

std::vector<FileRecord> Store::files() const {
    SQLite::Statement q(*db_, "SELECT * FROM files ORDER BY created_at DESC, rowid DESC");
    std::vector<FileRecord> out;
    while (q.executeStep()) out.push_back(file_row(q));
    return out;
}

bool Store::remove_file(const std::string& id) {
    SQLite::Statement q(*db_, "DELETE FROM files WHERE id=?");
    q.bind(1, id);
    return q.exec() > 0;
}

void Store::add_batch(const BatchRecord& b, const std::vector<ItemRecord>& items) {
    SQLite::Transaction t(*db_);
    SQLite::Statement q(
        *db_,
        "INSERT INTO batches(id, input_file_id, endpoint, metadata, window_s, status, created_at, "
        "seq) VALUES(?,?,?,?,?,?,?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM batches))");
    q.bind(1, b.id);
    q.bind(2, b.input_file_id);
    q.bind(3, b.endpoint);
    q.bind(4, b.metadata_json);
    q.bind(5, b.window_s);
    q.bind(6, std::string(to_string(b.status)));
    q.bind(7, b.created_at);
    q.exec();
    insert_items(b.id, items);
    t.commit();
}

std::optional<BatchRecord> Store::batch(const std::string& id) const {
    SQLite::Statement q(*db_, fmt::format("SELECT {} FROM batches WHERE id=?", kBatchColumns));
    q.bind(1, id);
    if (!q.executeStep()) return std::nullopt;
    return batch_row(q);
}

std::vector<BatchRecord> Store::batches(const std::string& after, std::size_t limit) const {
    SQLite::Statement q(*db_,
                        fmt::format("SELECT {} FROM batches WHERE seq < COALESCE((SELECT seq FROM batches "
                                    "WHERE id=?), 9223372036854775807) ORDER BY seq DESC LIMIT ?",
                                    kBatchColumns));
    q.bind(1, after);
    q.bind(2, static_cast<std::int64_t>(limit));
    std::vector<BatchRecord> out;
    while (q.executeStep()) out.push_back(batch_row(q));
    return out;
}

void Store::set_status(const std::string& id, BatchStatus s, std::int64_t at) {
    // (The column name comes from the fixed table above, never from input.)
    SQLite::Statement q(*db_, fmt::format("UPDATE batches SET status=?, {}=? WHERE id=?",
                                          kStatusColumn[static_cast<std::size_t>(s)]));
    q.bind(1, std::string(to_string(s)));
    q.bind(2, at);
    q.bind(3, id);
    q.exec();
}

void Store::set_outputs(const std::string& id, const std::string& output_file_id,
                        const std::string& error_file_id) {
    SQLite::Statement q(*db_, "UPDATE batches SET output_file_id=?, error_file_id=? WHERE id=?");
    q.bind(1, output_file_id);
    q.bind(2, error_file_id);
    q.bind(3, id);
    q.exec();
}

void Store::set_errors(const std::string& id, const std::string& errors_json) {
    SQLite::Statement q(*db_, "UPDATE batches SET errors=? WHERE id=?");
    q.bind(1, errors_json);
    q.bind(2, id);
    q.exec();
}

std::vector<BatchRecord> Store::unfinished_batches() const {
    SQLite::Statement q(*db_,
                        fmt::format("SELECT {} FROM batches WHERE status IN ('validating', 'in_progress', "
                                    "'finalizing', 'cancelling') ORDER BY seq",
                                    kBatchColumns));
    std::vector<BatchRecord> out;
    while (q.executeStep()) out.push_back(batch_row(q));
    return out;
}

void Store::add_items(const std::string& batch_id, std::span<const ItemRecord> items) {
    SQLite::Transaction t(*db_);
    insert_items(batch_id, items);
    t.commit();
}

void Store::insert_items(const std::string& batch_id, std::span<const ItemRecord> items) {
    SQLite::Statement add(
        *db_,
        "INSERT INTO items(batch_id, line, custom_id, url, model, line_offset, line_bytes, state) "
        "VALUES(?,?,?,?,?,?,?,'queued')");
    for (const auto& i : items) {
        add.bind(1, batch_id);
        add.bind(2, i.line);
        add.bind(3, i.custom_id);
        add.bind(4, i.url);
        add.bind(5, i.model);
        add.bind(6, static_cast<std::int64_t>(i.line_offset));
        add.bind(7, static_cast<std::int64_t>(i.line_bytes));
        add.exec();
        add.reset();
    }
}

void Store::clear_items(const std::string& batch_id) {
    SQLite::Statement q(*db_, "DELETE FROM items WHERE batch_id=?");
    q.bind(1, batch_id);
    q.exec();
}

std::vector<ItemRecord> Store::queued_items(const std::string& batch_id, std::size_t limit) const {
    SQLite::Statement q(*db_,
                        fmt::format("SELECT {} FROM items WHERE batch_id=? AND state='queued' ORDER BY line "
                                    "LIMIT ?",
                                    kItemColumns));
    q.bind(1, batch_id);
    q.bind(2, static_cast<std::int64_t>(limit));
    std::vector<ItemRecord> out;
    while (q.executeStep()) out.push_back(item_row(q));
    return out;
}

std::optional<ItemRecord> Store::next_queued(const std::string& batch_id) const {
    SQLite::Statement q(*db_,
                        fmt::format("SELECT {} FROM items WHERE batch_id=? AND state='queued' ORDER BY line "
                                    "LIMIT 1",
                                    kItemColumns));
    q.bind(1, batch_id);
    if (!q.executeStep()) return std::nullopt;
    return item_row(q);
}

bool Store::start_item(const std::string& batch_id, std::int64_t line) {
    SQLite::Statement q(*db_,
                        "UPDATE items SET state='running', attempts=attempts+1 WHERE batch_id=? AND line=? "
                        "AND state='queued'");
    q.bind(1, batch_id);
    q.bind(2, line);
    return q.exec() > 0;
}

bool Store::finish_item(const std::string& batch_id, std::int64_t line, int status_code,
                        const std::string& result, const std::string& error) {
    SQLite::Statement q(*db_,
                        "UPDATE items SET state=?, status_code=?, result=?, error=? WHERE batch_id=? AND "
                        "line=? AND state='running'");
    const bool ok = status_code >= 200 && status_code < 300 && error.empty();
    q.bind(1, ok ? "done" : "failed");
    q.bind(2, status_code);
    if (result.empty())
        q.bind(3);
    else
        q.bind(3, result.data(), static_cast<int>(result.size()));
    if (error.empty())
        q.bind(4);
    else
        q.bind(4, error);
    q.bind(5, batch_id);
    q.bind(6, line);
    return q.exec() > 0;
}

bool Store::requeue_item(const std::string& batch_id, std::int64_t line) {
    SQLite::Statement q(*db_,
                        "UPDATE items SET state='queued', attempts=attempts-1 WHERE batch_id=? AND line=? "
                        "AND state='running'");
    q.bind(1, batch_id);
    q.bind(2, line);
    return q.exec() > 0;
}

ItemCounts Store::counts(const std::string& batch_id) const {
    SQLite::Statement q(*db_, "SELECT state, COUNT(*) FROM items WHERE batch_id=? GROUP BY state");
    q.bind(1, batch_id);
    ItemCounts c;
    while (q.executeStep()) {
        const std::string state = q.getColumn(0).getString();
        const std::int64_t n = q.getColumn(1).getInt64();
        c.total += n;
        if (state == "queued") c.queued = n;
        if (state == "running") c.running = n;
        if (state == "done") c.done = n;
        if (state == "failed") c.failed = n;
    }
    return c;
}

void Store::each_item(const std::string& batch_id, const std::function<void(const ItemRecord&)>& f) const {
    SQLite::Statement q(*db_,
                        fmt::format("SELECT {} FROM items WHERE batch_id=? ORDER BY line", kItemColumns));
    q.bind(1, batch_id);
    while (q.executeStep()) f(item_row(q));
}

std::pair<std::size_t, std::size_t> Store::recover() {
    SQLite::Transaction t(*db_);
    const int failed = db_->exec(
        "UPDATE items SET state='failed', error='{\"code\":\"interrupted_twice\",\"message\":\"loch stopped "
        "twice "
        "while this item ran; it is not run a third time\"}' WHERE state='running' AND attempts>=2");
    const int requeued = db_->exec("UPDATE items SET state='queued' WHERE state='running'");
    t.commit();
    return {static_cast<std::size_t>(requeued), static_cast<std::size_t>(failed)};
}

}  // namespace loch::batch
