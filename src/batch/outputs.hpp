// batch/outputs — a finished batch's output and error files in OpenAI's format, written from the store by
// streaming its items in line order (each item appears exactly once, in one of the two files):
//   output: {"id": "batch_req_…", "custom_id", "response": {"status_code", "request_id", "body"}, "error":
//   null} error:  {"id", "custom_id", "response": null | {…a non-2xx answer…}, "error": {"code", "message"}}
// An item that never finished (the batch was cancelled or expired) goes to the error file with
// `unfinished_code` (batch_cancelled, batch_expired). Runs off the loop, on a read-only connection.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "batch/store.hpp"

namespace loch::batch {

struct OutputFigures {
    std::uint64_t output_lines = 0, output_bytes = 0, error_lines = 0, error_bytes = 0;
};

// The X-Request-Id an item's attempt was sent with (and its output line's request_id).
std::string item_request_id(const std::string& batch_id, std::int64_t line, int attempt);

// Writes both files (each whole or not at all: written aside, then renamed). Throws std::runtime_error.
OutputFigures write_outputs(const Store& reader, const std::string& batch_id,
                            const std::filesystem::path& output, const std::filesystem::path& errors,
                            const std::string& unfinished_code, const std::string& unfinished_message);

}  // namespace loch::batch
