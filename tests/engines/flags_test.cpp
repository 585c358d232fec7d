// engines/flags: reading `extra` against a table, and reading an engine's --help (the integration test
// compares the pinned engines' own help with the tables: tests/integration/engines/flag_tables_test.cpp).
#include "engines/flags/table.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace loch::engines::flags {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FlagHelp, TheOptionColumnOfEachLayoutIsRead) {
    // llama.cpp: names at the margin, value hints, the description at column 40 or on the next line (where
    // a flag named in the text is not an option).
    const std::string llama =
        "----- common params -----\n"
        "-c,    --ctx-size N                     size of the prompt context\n"
        "-kvo,  --kv-offload, -nkvo, --no-kv-offload\n"
        "                                        whether to enable KV cache offloading (default: enabled)\n"
        "                                        --hf-repo (default: unused)\n"
        "-lm,   --load-mode MODE                 model loading mode:\n"
        "                                        - mmap: memory-map model\n";
    EXPECT_THAT(flag_names_in_help(llama), ElementsAre("-c", "--ctx-size", "-kvo", "--kv-offload", "-nkvo",
                                                       "--no-kv-offload", "-lm", "--load-mode"));
    // sd.cpp: two spaces in, underscores in names.
    EXPECT_THAT(flag_names_in_help("  -m, --model <string>        path\n  --clip_l <string>   clip\n"),
                ElementsAre("-m", "--model", "--clip_l"));
    // whisper.cpp: the value between the spellings, a long name alone further in.
    EXPECT_THAT(flag_names_in_help("  -t N,      --threads N   [2 ] threads\n"
                                   "             --prompt PROMPT             [       ] initial prompt\n"),
                ElementsAre("-t", "--threads", "--prompt"));
}

TEST(FlagExtra, ValuesAreTakenAndEveryClassIsHandled) {
    const auto read = read_extra(llama_server(), {"--pooling", "last", "--temp", "0.5", "--embeddings"});
    ASSERT_TRUE(std::holds_alternative<std::vector<ExtraFlag>>(read));
    const auto& f = std::get<std::vector<ExtraFlag>>(read);
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[0].values, std::vector<std::string>{"last"});
    EXPECT_EQ(f[1].rule->cls, FlagClass::neutral);
    EXPECT_EQ(f[2].rule->cls, FlagClass::planned);
    // llama.cpp reads --a_b as --a-b.
    EXPECT_FALSE(refusal(llama_server(), {"--top_k", "5"}));
    EXPECT_THAT(*refusal(llama_server(), {"--control-vector", "a.gguf"}), HasSubstr("is refused"));
    EXPECT_THAT(*refusal(llama_server(), {"--lora", "a.gguf"}), HasSubstr("args.lora"));
    EXPECT_THAT(*refusal(llama_server(), {"--port", "1"}), HasSubstr("is set by loch"));
    EXPECT_THAT(*refusal(llama_server(), {"--top-k"}), HasSubstr("needs 1 value"));
    // vLLM's argparse takes --flag=value.
    EXPECT_FALSE(refusal(vllm(), {"--max-num-batched-tokens=8192", "--enforce-eager"}));
    EXPECT_THAT(*refusal(vllm(), {"--enforce-eager=1"}), HasSubstr("takes no value"));
}

TEST(FlagTables, EverySpellingIsInOneRuleOnlyAndEveryRuleSaysWhy) {
    for (const FlagTable* t : {&llama_server(), &sd_server(), &whisper_server(), &vllm()}) {
        std::vector<std::string_view> seen;
        for (const auto& r : t->rules) {
            EXPECT_FALSE(r.why.empty()) << t->engine << " " << r.names.at(0);
            for (auto n : r.names) {
                EXPECT_EQ(std::count(seen.begin(), seen.end(), n), 0) << t->engine << " " << n;
                seen.push_back(n);
            }
        }
    }
}

}  // namespace
}  // namespace loch::engines::flags
