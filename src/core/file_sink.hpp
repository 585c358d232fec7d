// core/file_sink — a file written from loch's loop without the loop ever waiting on the disk. A write() into
// the page cache blocks for as long as the kernel throttles dirty pages (a GiB upload while a training run
// writes checkpoints, or on a box whose memory the models hold), and open() can wait on a slow or network
// disk; here both run on a worker pool (core/off_loop.hpp), one at a time, so the bytes stay in order and
// what the caller buffers meanwhile stays bounded (it reads on only when the last write is done).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

namespace loch::core {

class FileSink {
  public:
    static constexpr std::size_t kChunk = 1 << 20;  // what `take` gathers before a write

    // Creates (truncates) `path` on `pool`. Throws std::system_error (the errno, naming the file).
    static boost::asio::awaitable<FileSink> open(boost::asio::thread_pool& pool, std::filesystem::path path);

    // Writes what `bytes` holds, leaving it empty, once it reaches kChunk — or whatever it holds, then closes
    // the file, when `last`. Throws std::system_error: ENOSPC / EDQUOT when the disk is full.
    boost::asio::awaitable<void> take(std::string& bytes, bool last);

    std::uint64_t written() const { return written_; }

  private:
    FileSink(boost::asio::thread_pool& pool, std::filesystem::path path, std::shared_ptr<std::FILE> file)
        : pool_(&pool), path_(std::move(path)), file_(std::move(file)) {}
    boost::asio::thread_pool* pool_;
    std::filesystem::path path_;
    std::shared_ptr<std::FILE>
        file_;           // shared with the write in flight; the last one takes it (closed there)
    std::string spare_;  // the buffer handed back to the caller at the next take
    std::uint64_t written_ = 0;
};

}  // namespace loch::core
