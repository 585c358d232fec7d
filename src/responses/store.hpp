// responses/store — the Responses API's stored responses (OpenAI's `store: true`, the default): each
// response as the client got it, the input it was given, and the conversation the engine saw, so that
// GET /v1/responses/{id}, its input_items and a later request's `previous_response_id` are served by loch
// for any engine. A table in the Batch API's database (batches.sqlite3: one SQLite file of loch's records).
//
// Kept within an age and a size (config `responses:`): every put removes what is older than the age, then
// the oldest until the table is under the size. Not thread-safe: one owner on loch's io_context; every call
// is a short indexed statement committed without an fsync (http/responses_api checkpoints the log off the
// loop every few MiB kept).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace SQLite {
class Database;
class Statement;
}  // namespace SQLite

namespace loch::responses {

struct StoredResponse {
    std::string id;               // "resp_…" (the engine's)
    std::int64_t created_at = 0;  // Unix seconds
    std::string model;
    std::string response;  // the Response object as the client got it (JSON text)
    std::string input;     // this request's own input items (a JSON array)
    std::string context;   // every item the engine was given before the output: earlier turns + input
};

struct Retention {
    std::int64_t max_age_s = 30 * 24 * 3600;
    std::uint64_t max_bytes = 1ull << 30;
};

class Store {
  public:
    // Opens (creating the table when missing) the database at `path`. Throws std::runtime_error naming it.
    explicit Store(const std::filesystem::path& path, Retention keep = {});
    ~Store();
    Store(const Store&) = delete;
    Store& operator=(const Store&) = delete;

    // Keeps `r` (replacing one of the same id), then applies the retention at `now`. Returns how many older
    // ones that removed.
    std::size_t put(const StoredResponse& r, std::int64_t now);
    std::optional<StoredResponse> get(const std::string& id) const;
    bool remove(const std::string& id);
    std::uint64_t bytes() const { return bytes_; }  // what the kept responses take (their texts)

  private:
    std::size_t expire(std::int64_t now);
    // Runs a DELETE … RETURNING bytes; takes what it removed off bytes_. Returns how many rows.
    std::size_t remove_counted(SQLite::Statement& q);
    std::unique_ptr<SQLite::Database> db_;
    Retention keep_;
    std::uint64_t bytes_ = 0;  // summed once at open, then kept by every write (no scan per put)
};

}  // namespace loch::responses
