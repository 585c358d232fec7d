#include "core/file_sink.hpp"

#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "core/off_loop.hpp"

namespace loch::core {

namespace {

[[noreturn]] void fail(int err, const std::filesystem::path& path) {
    throw std::system_error(err, std::generic_category(), "cannot write " + path.string());
}

}  // namespace

boost::asio::awaitable<FileSink> FileSink::open(boost::asio::thread_pool& pool, std::filesystem::path path) {
    // stdio, not iostreams: its failures keep their errno (a full disk is not "an I/O error").
    auto file = co_await off_loop(pool, [path] {
        std::FILE* f = std::fopen(path.c_str(), "wbe");  // e: O_CLOEXEC (engines never inherit it)
        if (!f) fail(errno, path);
        return std::shared_ptr<std::FILE>(f, [](std::FILE* p) { std::fclose(p); });
    });
    co_return FileSink(pool, std::move(path), std::move(file));
}

boost::asio::awaitable<void> FileSink::take(std::string& bytes, bool last) {
    if (!file_) throw std::logic_error("FileSink::take after the last take: " + path_.string());
    if (!last && bytes.size() < kChunk) co_return;
    const auto n = bytes.size();
    // Two buffers take turns: the caller fills one while the other is written, then gets it back empty
    // with its capacity (no allocation per MiB; under ASan a freed MiB would sit in its quarantine).
    std::string data;
    data.swap(bytes);
    bytes.swap(spare_);
    // The last write takes the file and closes it on the pool too (a close can wait on a network disk).
    auto [err, emptied] = co_await off_loop(
        *pool_, [file = last ? std::move(file_) : file_, data = std::move(data), last]() mutable {
            errno = 0;
            int e = 0;
            if (!data.empty() && std::fwrite(data.data(), 1, data.size(), file.get()) != data.size())
                e = errno ? errno : EIO;
            else if (last && std::fflush(file.get()) != 0)
                e = errno ? errno : EIO;
            if (last) file.reset();
            data.clear();
            return std::pair{e, std::move(data)};
        });
    spare_ = std::move(emptied);
    if (err) fail(err, path_);
    written_ += n;
}

}  // namespace loch::core
