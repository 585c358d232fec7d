#include "http/data_url.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <boost/archive/iterators/binary_from_base64.hpp>
#include <boost/archive/iterators/transform_width.hpp>

#include "broker/error.hpp"
#include "http/image_size.hpp"

namespace loch::http {

namespace {

using broker::Error;
using broker::ErrorKind;

// Decodes whole groups of four base64 characters (Boost's iterators do not handle '=' themselves).
std::string decode(std::string_view b64) {
    using namespace boost::archive::iterators;
    using It = transform_width<binary_from_base64<std::string_view::const_iterator>, 8, 6>;
    std::size_t pad = 0;
    while (pad < 2 && b64.size() > pad && b64[b64.size() - 1 - pad] == '=') ++pad;
    const std::string_view body = b64.substr(0, b64.size() - pad);
    std::string out(It(body.begin()), It(body.end()));
    // The last group's spare bits come out as an extra byte when padding was dropped.
    out.resize(b64.size() / 4 * 3 - pad);
    return out;
}

}  // namespace

InlineImage read_image_url(std::string_view url, std::string_view where) {
    const auto fail = [&](const std::string& why) {
        throw Error(ErrorKind::invalid_request, fmt::format("{}: {}", where, why),
                    {{"param", std::string(where)}});
    };
    if (!url.starts_with("data:")) {
        fail(fmt::format(
            "'{}…' is not a data URL; loch's engines do not fetch images from the network, so send "
            "the image inline: data:image/png;base64,… (or image/jpeg)",
            url.substr(0, std::min<std::size_t>(url.size(), 40))));
    }
    const auto comma = url.find(',');
    if (comma == std::string_view::npos || !url.substr(0, comma).ends_with(";base64"))
        fail("a data URL of an image is data:image/png;base64,… or data:image/jpeg;base64,…");
    const std::string_view b64 = url.substr(comma + 1);
    if (b64.size() % 4 != 0 || !std::all_of(b64.begin(), b64.end(), [](char c) {
            return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                   c == '/' || c == '=';
        }))
        fail("the image's base64 is not valid (standard alphabet, padded to a multiple of 4)");
    InlineImage img;
    img.bytes = b64.size() / 4 * 3 - (b64.ends_with("==") ? 2 : b64.ends_with("=") ? 1 : 0);
    // The header is at the start (a JPEG's size marker after its EXIF block, within 64 KiB by the format):
    // decode a prefix first, the whole only if that was not enough.
    constexpr std::size_t kPrefix = 96 * 1024;  // base64 characters, a multiple of 4
    std::optional<std::pair<std::uint32_t, std::uint32_t>> size;
    std::string head;
    try {
        head = decode(b64.size() > kPrefix ? b64.substr(0, kPrefix) : b64);
        size = image_size(head);
        if (!size && b64.size() > kPrefix) {
            head = decode(b64);
            size = image_size(head);
        }
    } catch (const std::exception&) {
        fail("the image's base64 is not valid");
    }
    const bool png = head.size() >= 8 && head.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
    const bool jpeg = head.size() >= 3 && head.compare(0, 3, "\xff\xd8\xff") == 0;
    if (!png && !jpeg) fail("the image is not a PNG or a JPEG (the formats loch and its engines both read)");
    if (!size || size->first == 0 || size->second == 0)
        fail(fmt::format("the {}'s header is damaged: its pixel size cannot be read", png ? "PNG" : "JPEG"));
    img.format = png ? "png" : "jpeg";
    img.width = size->first;
    img.height = size->second;
    return img;
}

}  // namespace loch::http
