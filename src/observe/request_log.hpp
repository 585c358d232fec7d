// observe/request_log — one JSON line per finished model request in `<log dir>/requests.jsonl`, and the
// same record in loch's own log: at info level when the request failed (or there is no file), at debug
// level when it succeeded and the file has it.
//
// Records are collected in memory and leave as lines in one write(2) per flush, so that the request path
// pays no write per request (issue 9: it was one of the syscalls loch made beyond nginx's), nor the
// formatting of its line (issue 55: a record is moved in; its line is written on the writer thread). The
// owner flushes when write() says a flush is due (the first record pending: the server flushes it within
// ~100 ms), and the log flushes itself once `flush_at` records are pending and on destruction (loch's
// shutdown). A flush hands the records to the log's own writer thread: a write(2) blocks while the kernel
// throttles dirty pages (another program writing gigabytes), and the caller is loch's loop. Loch's own log
// gets the line at once where it shows it: a request that failed, every request without a file, and every
// one at debug level. Only whole lines are ever written, in order,
// so a reader (tail -f, jq) never sees half a line; a crash can lose the lines of the last flush interval,
// never part of one. At `rotate_at` bytes the file is renamed to requests.jsonl.1 and a new one begun (one
// old file kept).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "observe/request_record.hpp"

namespace loch::observe {

class RequestLog {
  public:
    // An empty path: the log line only, no file. Throws std::runtime_error when the file cannot be opened.
    explicit RequestLog(std::filesystem::path file = {}, std::uint64_t rotate_at = 64ull << 20,
                        std::size_t flush_at = 256);
    ~RequestLog();  // flushes, and waits until every line is written
    RequestLog(const RequestLog&) = delete;
    RequestLog& operator=(const RequestLog&) = delete;

    // Adds the record. True when records are now pending that the owner should flush() soon (the first one
    // since the last flush); false when nothing waits or a flush is already due.
    bool write(RequestRecord r);
    // Hands every pending record to the writer thread (its lines in one write(2), rotating first when the
    // file is full).
    void flush();
    // Blocks until what was flushed is in the file (tests; never on the loop).
    void wait_written();
    std::size_t pending() const { return pending_.size(); }
    const std::filesystem::path& file() const { return file_; }

  private:
    void open();
    void rotate_if_full(std::size_t adding);  // on the writer thread, as append
    void append(const std::vector<RequestRecord>& records);
    std::filesystem::path file_;
    std::uint64_t rotate_at_;
    std::size_t flush_at_;
    std::uint64_t size_ = 0;
    std::vector<RequestRecord> pending_;
    int fd_ = -1;                         // after the constructor, used on the writer thread only
    std::atomic<bool> has_file_ = false;  // false too once a reopen after rotating failed
    boost::asio::thread_pool writer_{1};  // last: joined first
};

}  // namespace loch::observe
