// core/time_text — a point in time as text, the one format loch writes: ISO 8601 in UTC, to the second
// ("2026-12-01T17:04:48Z"). Engine log headers and Ollama's timestamps use it. OpenAI's records (files,
// batches) carry Unix seconds instead: unix_now().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace loch {

std::string iso8601_utc(std::chrono::system_clock::time_point t);
// Seconds since 1970-01-01 UTC, now.
std::int64_t unix_now();

}  // namespace loch
