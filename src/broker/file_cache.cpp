// broker/file_cache — read-ahead and residency of models' files (file_cache.hpp says what and why).
#include "broker/file_cache.hpp"

#include "core/off_loop.hpp"
#include "devices/page_cache.hpp"

namespace loch::broker {

bool worth_reading_ahead(std::uint64_t missing, std::uint64_t host_free) {
    return missing > 0 && missing <= host_free / 2;
}

FileCache::FileCache(std::optional<boost::asio::any_io_executor> runs_on)
    : runs_on_(runs_on ? *runs_on : work_.get_executor()) {}

FileCache::~FileCache() {
    stopping_->store(true);
    work_.join();
}

boost::asio::awaitable<FilesResidency> FileCache::measure(std::vector<std::filesystem::path> files) {
    co_return co_await core::off_loop(runs_on_, [files = std::move(files)]() {
        FilesResidency r;
        for (const auto& f : files) {
            const auto one = devices::resident(f);
            r.bytes += one.bytes;
            r.cached += one.cached;
        }
        return r;
    });
}

boost::asio::awaitable<ReadAheadResult> FileCache::read_ahead(std::vector<std::filesystem::path> files) {
    co_return co_await core::off_loop(runs_on_, [files = std::move(files), stopping = stopping_]() {
        const auto t0 = std::chrono::steady_clock::now();
        ReadAheadResult r;
        for (const auto& f : files) r.bytes += devices::read_ahead(f, [&] { return !stopping->load(); });
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return r;
    });
}

}  // namespace loch::broker
