#include "http/query.hpp"

// Boost.URL is compiled here, header-only (Debian's Boost 1.81 ships its sources): this is its one
// translation unit, so build/bin/loch stays free of a Boost runtime library.
#include <boost/url/src.hpp>

#include <boost/url/parse.hpp>

namespace loch::http {

std::optional<std::string> query_param(std::string_view target, std::string_view key) {
    const auto url = boost::urls::parse_origin_form(target);
    if (!url) return std::nullopt;
    const auto params = url->params();
    const auto it = params.find(key);
    if (it == params.end()) return std::nullopt;
    return std::string((*it).value);
}

}  // namespace loch::http
