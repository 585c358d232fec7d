// http/server_options — what the HTTP server is configured with (loch.yaml's listen, port, api_keys, limits,
// timeouts, the request log and the Batch API's folder), and the completion token of its waits.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace loch::http {

// The completion token of the server's waits: the error comes back as a value (a cancelled read or timer is
// a normal event here, not an exception).
inline constexpr auto tok = boost::asio::as_tuple(boost::asio::use_awaitable);

struct ServerOptions {
    std::string listen = "127.0.0.1";
    std::uint16_t port = 8080;  // 0 = any free port (tests)
    std::vector<std::string> api_keys;
    std::uint64_t max_body_bytes = 16 * 1024 * 1024;
    // The largest upload a model allows (whisper.max_upload): the multipart upload routes take bodies up to
    // it (each model's own limit is checked by its kind); every other route stays at max_body_bytes.
    std::uint64_t max_upload_bytes = 0;
    std::chrono::seconds idle_timeout{30};             // keep-alive connection without a request
    std::chrono::seconds header_timeout{10};           // first byte of a request → its whole header
    std::chrono::seconds body_timeout{60};             // header → the whole body
    std::size_t max_connections = 1024;                // open client connections; beyond → 503
    std::chrono::seconds default_watchdog{600};        // models without a watchdog: still never wait forever
    std::filesystem::path request_log;                 // requests.jsonl; empty = the log line only
    std::chrono::milliseconds request_log_flush{100};  // a finished request's line is in the file within this
    // A streaming client kept waiting (a cold load, a queue) gets an SSE comment after this, then every
    // `heartbeat` (proxies and clients time out on silence).
    std::chrono::milliseconds first_heartbeat{1000}, heartbeat{5000};
    // The Batch API's files (http/batch_api_files.cpp): their store and bytes live here; empty = no Batch
    // API.
    std::filesystem::path batch_dir;
    std::uint64_t max_batch_file_bytes = std::uint64_t{2} << 30;
    unsigned batch_concurrency = 0;  // a batch's items in flight per model; 0 = the model's slots
    // The Responses API's stored responses (in batch_dir's database): kept this long, at most this much.
    std::chrono::seconds responses_max_age{30 * 24 * 3600};
    std::uint64_t responses_max_bytes = std::uint64_t{1} << 30;
};

}  // namespace loch::http
