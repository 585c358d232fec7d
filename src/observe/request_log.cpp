#include "observe/request_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <spdlog/spdlog.h>

namespace loch::observe {

RequestLog::RequestLog(std::filesystem::path file, std::uint64_t rotate_at)
    : file_(std::move(file)), rotate_at_(rotate_at) {
    if (!file_.empty()) open();
}

RequestLog::~RequestLog() {
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

void RequestLog::write(const RequestRecord& r) {
    const std::string line = to_json_line(r);
    // With the file, loch's own log keeps the requests that went wrong and leaves the rest to the file (at
    // debug): one write per request instead of two on the request path.
    if (fd_ >= 0 && r.outcome() == "ok")
        spdlog::debug("request {}", line);
    else
        spdlog::info("request {}", line);
    if (fd_ < 0) return;
    if (size_ + line.size() + 1 > rotate_at_ && size_ > 0) {
        ::close(fd_);
        fd_ = -1;
        std::error_code ec;
        std::filesystem::rename(file_, file_.string() + ".1", ec);
        try {
            open();
        } catch (const std::exception& e) {
            spdlog::warn("{}", e.what());
            return;
        }
    }
    const std::string out = line + "\n";
    if (::write(fd_, out.data(), out.size()) == static_cast<ssize_t>(out.size()))
        size_ += out.size();
    else
        spdlog::warn("request log {}: write failed: {}", file_.string(), std::strerror(errno));
}

}  // namespace loch::observe
