// The committed fuzz seeds keep their meaning: valid_* parse, invalid_* are FormatErrors.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/reader.hpp"

namespace loch::gguf {
namespace {

TEST(GgufFuzzCorpus, SeedsParseOrFailAsNamed) {
    const std::filesystem::path dir = std::filesystem::path(LOCH_SOURCE_DIR) / "fuzz/corpus/fuzz_gguf_reader";
    int valid = 0, invalid = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("valid_", 0) == 0) {
            EXPECT_NO_THROW(read_model(entry.path())) << name;
            ++valid;
        } else if (name.rfind("invalid_", 0) == 0) {
            EXPECT_THROW(read_model(entry.path()), FormatError) << name;
            ++invalid;
        }
    }
    EXPECT_GE(valid, 4);
    EXPECT_GE(invalid, 4);
}

}  // namespace
}  // namespace loch::gguf
