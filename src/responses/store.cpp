#include "responses/store.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace loch::responses {

namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS responses(
  id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, model TEXT NOT NULL, bytes INTEGER NOT NULL,
  response TEXT NOT NULL, input TEXT NOT NULL, context TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS responses_by_age ON responses(created_at);
)sql";

}  // namespace

Store::Store(const std::filesystem::path& path, Retention keep) : keep_(keep) {
    try {
        db_ = std::make_unique<SQLite::Database>(path.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        // As the batch store's connection (batch/store.hpp): WAL, no checkpoint on this thread; a busy
        // timeout for the moment the batch runner's checkpoint holds the file.
        db_->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0;");
        db_->setBusyTimeout(1000);
        db_->exec(kSchema);
        bytes_ = static_cast<std::uint64_t>(
            db_->execAndGet("SELECT COALESCE(SUM(bytes), 0) FROM responses").getInt64());
    } catch (const std::exception& e) {
        throw std::runtime_error(
            fmt::format("cannot open the responses store {}: {}", path.string(), e.what()));
    }
}

Store::~Store() = default;

std::size_t Store::remove_counted(SQLite::Statement& q) {
    std::size_t rows = 0;
    for (; q.executeStep(); ++rows) bytes_ -= std::min<std::uint64_t>(bytes_, q.getColumn(0).getInt64());
    return rows;
}

std::size_t Store::put(const StoredResponse& r, std::int64_t now) {
    (void)remove(r.id);  // one of the same id is replaced: its bytes go first
    const std::uint64_t size = r.response.size() + r.input.size() + r.context.size();
    SQLite::Statement q(*db_, "INSERT INTO responses VALUES(?,?,?,?,?,?,?)");
    q.bind(1, r.id);
    q.bind(2, r.created_at);
    q.bind(3, r.model);
    q.bind(4, static_cast<std::int64_t>(size));
    q.bind(5, r.response);
    q.bind(6, r.input);
    q.bind(7, r.context);
    q.exec();
    bytes_ += size;
    return expire(now);
}

std::optional<StoredResponse> Store::get(const std::string& id) const {
    SQLite::Statement q(*db_,
                        "SELECT id, created_at, model, response, input, context FROM responses WHERE id=?");
    q.bind(1, id);
    if (!q.executeStep()) return std::nullopt;
    StoredResponse r;
    r.id = q.getColumn(0).getString();
    r.created_at = q.getColumn(1).getInt64();
    r.model = q.getColumn(2).getString();
    r.response = q.getColumn(3).getString();
    r.input = q.getColumn(4).getString();
    r.context = q.getColumn(5).getString();
    return r;
}

bool Store::remove(const std::string& id) {
    SQLite::Statement q(*db_, "DELETE FROM responses WHERE id=? RETURNING bytes");
    q.bind(1, id);
    return remove_counted(q) > 0;
}

std::size_t Store::expire(std::int64_t now) {
    std::size_t removed = 0;
    {
        SQLite::Statement q(*db_, "DELETE FROM responses WHERE created_at < ? RETURNING bytes");
        q.bind(1, now - keep_.max_age_s);
        removed += remove_counted(q);
    }
    // Over the size: the oldest go first, one statement for all of them (a running sum from the newest).
    if (bytes_ > keep_.max_bytes) {
        SQLite::Statement q(*db_,
                            "DELETE FROM responses WHERE id IN (SELECT id FROM (SELECT id, SUM(bytes) OVER "
                            "(ORDER BY created_at DESC, rowid DESC) AS kept FROM responses) WHERE kept > ?) "
                            "RETURNING bytes");
        q.bind(1, static_cast<std::int64_t>(keep_.max_bytes));
        removed += remove_counted(q);
    }
    return removed;
}

}  // namespace loch::responses
