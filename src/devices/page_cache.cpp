// devices/page_cache — resident bytes and read-ahead (page_cache.hpp says what and why).
#include "devices/page_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace loch::devices {

namespace {

// An open file descriptor, closed on every path.
class Fd {
  public:
    // O_NONBLOCK: a FIFO named in an argv must not hang the worker; it is not a regular file anyway.
    explicit Fd(const std::filesystem::path& p) : fd_(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    std::uint64_t size() const {
        struct stat st {};
        return fd_ >= 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) ? std::uint64_t(st.st_size) : 0;
    }

  private:
    int fd_;
};

// mincore's vector is a byte per page: a window of 1 GiB at a time keeps it at 256 KiB for any file.
constexpr std::uint64_t kWindow = std::uint64_t{1} << 30;
constexpr std::size_t kChunk = std::size_t{8} << 20;

// Which pages of [off, off + len) are resident (a byte per page, bit 0), through a mapping that touches
// none of them; empty when the window cannot be mapped.
std::vector<unsigned char> pages_in(int fd, std::uint64_t off, std::uint64_t len, std::uint64_t page) {
    void* at = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(off));
    if (at == MAP_FAILED) return {};
    std::vector<unsigned char> pages((len + page - 1) / page, 0);
    const bool ok = ::mincore(at, len, pages.data()) == 0;
    ::munmap(at, len);
    if (!ok) pages.clear();
    return pages;
}

}  // namespace

FileResidency resident(const std::filesystem::path& file) {
    const Fd fd(file);
    FileResidency r;
    r.bytes = fd.size();
    if (r.bytes == 0) return {};
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    for (std::uint64_t off = 0; off < r.bytes; off += kWindow) {
        const std::uint64_t len = std::min(kWindow, r.bytes - off);
        const auto pages = pages_in(fd.get(), off, len, page);
        if (pages.empty()) return {r.bytes, 0};
        for (std::size_t i = 0; i < pages.size(); ++i)
            if (pages[i] & 1) r.cached += std::min(page, len - i * page);
    }
    return r;
}

std::uint64_t read_ahead(const std::filesystem::path& file, const std::function<bool()>& keep_going) {
    const Fd fd(file);
    const std::uint64_t size = fd.size();
    if (size == 0) return 0;
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::vector<char> buf(kChunk);
    std::uint64_t done = 0;
    // Only what is not resident yet is read: a file mostly in the page cache costs a mincore, not a copy.
    for (std::uint64_t off = 0; off < size; off += kWindow) {
        const std::uint64_t len = std::min(kWindow, size - off);
        auto pages = pages_in(fd.get(), off, len, page);
        if (pages.empty()) pages.assign((len + page - 1) / page, 0);
        for (std::size_t i = 0; i < pages.size();) {
            if (pages[i] & 1) {
                ++i;
                continue;
            }
            if (!keep_going()) return done;
            std::size_t j = i;
            while (j < pages.size() && !(pages[j] & 1) && (j - i) * page < kChunk) ++j;
            const std::uint64_t at = off + i * page;
            const std::uint64_t want = std::min<std::uint64_t>((j - i) * page, size - at);
            const ssize_t n = ::pread(fd.get(), buf.data(), want, static_cast<off_t>(at));
            if (n <= 0) return done;
            done += static_cast<std::uint64_t>(n);
            i = j;
        }
    }
    return done;
}

}  // namespace loch::devices
