#include "observe/request_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <stdexcept>
#include <utility>

#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

namespace loch::observe {

RequestLog::RequestLog(std::filesystem::path file, std::uint64_t rotate_at, std::size_t flush_at)
    : file_(std::move(file)), rotate_at_(rotate_at), flush_at_(flush_at) {
    if (!file_.empty()) open();
    has_file_ = fd_ >= 0;
}

RequestLog::~RequestLog() {
    flush();
    writer_.join();  // runs what was handed over, then the thread ends
    if (fd_ >= 0) ::close(fd_);
}

void RequestLog::open() {
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
        throw std::runtime_error("cannot open the request log " + file_.string() + ": " +
                                 std::strerror(errno));
    struct stat st {};
    size_ = ::fstat(fd_, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

bool RequestLog::write(RequestRecord r) {
    // Loch's own log keeps the requests that went wrong and, with the file, leaves the rest to it (debug).
    const bool to_file = has_file_;
    const auto level = to_file && r.outcome() == "ok" ? spdlog::level::debug : spdlog::level::info;
    if (spdlog::should_log(level)) spdlog::log(level, "request {}", to_json_line(r));
    if (!to_file) return false;
    const bool first = pending_.empty();
    pending_.push_back(std::move(r));
    if (pending_.size() >= flush_at_) {
        flush();
        return false;
    }
    return first;
}

void RequestLog::rotate_if_full(std::size_t adding) {
    if (size_ + adding <= rotate_at_ || size_ == 0) return;
    ::close(fd_);
    fd_ = -1;
    std::error_code ec;
    std::filesystem::rename(file_, file_.string() + ".1", ec);
    try {
        open();
    } catch (const std::exception& e) {
        has_file_ = false;  // from now on every request's line goes to loch's own log
        spdlog::warn("{}", e.what());
    }
}

void RequestLog::flush() {
    if (pending_.empty() || !has_file_) return;
    boost::asio::post(writer_, [this, records = std::exchange(pending_, {})] { append(records); });
}

void RequestLog::wait_written() {
    std::promise<void> done;
    auto written = done.get_future();
    boost::asio::post(writer_, [&done] { done.set_value(); });
    written.wait();
}

void RequestLog::append(const std::vector<RequestRecord>& records) {
    std::string lines;
    for (const auto& r : records) lines.append(to_json_line(r)).push_back('\n');
    if (fd_ >= 0) rotate_if_full(lines.size());
    if (fd_ < 0) {  // the file could not be opened again after rotating: the lines go to loch's own log
        for (const auto& r : records) spdlog::info("request {}", to_json_line(r));
        return;
    }
    std::string_view rest = lines;
    while (!rest.empty()) {
        const ssize_t n = ::write(fd_, rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            spdlog::warn("request log {}: write failed: {}", file_.string(), std::strerror(errno));
            break;
        }
        size_ += static_cast<std::uint64_t>(n);
        rest.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace loch::observe
