// http/query — one value of a request target's query, percent-decoded by Boost.URL:
// query_param("/v1/batches?after=batch_1&limit=20", "after") is "batch_1". A key that is absent, or a target
// Boost.URL cannot parse as origin-form, gives nothing (the route then uses its default).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace loch::http {

std::optional<std::string> query_param(std::string_view target, std::string_view key);

}  // namespace loch::http
