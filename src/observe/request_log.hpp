// observe/request_log — one JSON line per finished model request in `<log dir>/requests.jsonl`, and the
// same record in loch's own log: at info level when the request failed (or there is no file), at debug
// level when it succeeded and the file has it. The file is opened for appending and each line is written
// with one write(2), so a reader (tail -f, jq) never sees half a line; at 64 MiB it is renamed to
// requests.jsonl.1 and a new one begun (one old file kept).
#pragma once

#include <cstdint>
#include <filesystem>

#include "observe/request_record.hpp"

namespace loch::observe {

class RequestLog {
  public:
    // An empty path: the log line only, no file. Throws std::runtime_error when the file cannot be opened.
    explicit RequestLog(std::filesystem::path file = {}, std::uint64_t rotate_at = 64ull << 20);
    ~RequestLog();
    RequestLog(const RequestLog&) = delete;
    RequestLog& operator=(const RequestLog&) = delete;

    void write(const RequestRecord& r);
    const std::filesystem::path& file() const { return file_; }

  private:
    void open();
    std::filesystem::path file_;
    std::uint64_t rotate_at_;
    std::uint64_t size_ = 0;
    int fd_ = -1;
};

}  // namespace loch::observe
