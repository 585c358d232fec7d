// support/data_url — images as the data URLs clients send (tests and benches): Boost's base64 iterators,
// padded as RFC 4648 asks (they leave the padding to the caller).
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/transform_width.hpp>

namespace loch::test {

inline std::string base64(const std::string& bin) {
    using namespace boost::archive::iterators;
    using It = base64_from_binary<transform_width<std::string::const_iterator, 6, 8>>;
    std::string out(It(bin.begin()), It(bin.end()));
    out.append((3 - bin.size() % 3) % 3, '=');
    return out;
}

// A PNG file as a data URL.
inline std::string png_data_url(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    const std::string bin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return "data:image/png;base64," + base64(bin);
}

}  // namespace loch::test
