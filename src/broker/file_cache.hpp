// broker/file_cache — the page cache in the broker's service (docs/performance.md, "Swaps").
//
// Read ahead: a model whose start has to wait — for the engines evicted for it to drain, for busy or
// yielding work to make room — gets its files (every regular file its launch names: weights, projector,
// VAE, the engine binary) read into the page cache meanwhile, so that its engine reads them at memory speed
// once it starts instead of from disk. Only where host memory allows (worth_reading_ahead): page cache is
// given back under pressure, but reading more than half of what the host has free would push out other
// models' files — the next swap's.
//
// Residency: how much of each model's files is in the page cache, measured (mincore) at most every 30 s
// and after a read-ahead. /loch/status shows it per model, and for the models not running as the host's
// `page_cache` line: kept for a fast restart, given back under pressure, never booked — on a unified-memory
// APU it is the same memory the GPU allocates from, so it is shown rather than hidden.
//
// The file work runs on this store's own worker thread; nothing here blocks the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

namespace loch::broker {

// Whether `missing` bytes (not yet resident) may be read ahead with `host_free` bytes free on the host.
// Pure.
bool worth_reading_ahead(std::uint64_t missing, std::uint64_t host_free);

struct FilesResidency {
    std::uint64_t bytes = 0;                     // the files' sizes
    std::uint64_t cached = 0;                    // of it, resident
    std::chrono::steady_clock::time_point at{};  // when measured (set by the broker, on its clock)
};

struct ReadAheadResult {
    std::uint64_t bytes = 0;  // read
    double seconds = 0;
};

class FileCache {
  public:
    // `runs_on`: where the reads run instead of the worker thread (a unit test's own loop).
    explicit FileCache(std::optional<boost::asio::any_io_executor> runs_on = std::nullopt);
    ~FileCache();  // a read in progress stops at its next chunk; the worker is joined
    FileCache(const FileCache&) = delete;
    FileCache& operator=(const FileCache&) = delete;

    boost::asio::awaitable<FilesResidency> measure(std::vector<std::filesystem::path> files);
    boost::asio::awaitable<ReadAheadResult> read_ahead(std::vector<std::filesystem::path> files);

  private:
    std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
    boost::asio::thread_pool work_{1};
    boost::asio::any_io_executor runs_on_;
};

}  // namespace loch::broker
