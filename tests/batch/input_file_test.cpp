// The Batch API's input-file check: a good file gives each item's line (where it is in the file), a bad one
// every problem by line number and no items at all.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "batch/input_file.hpp"

namespace loch::batch {
namespace {

InputRules rules() {
    InputRules r;
    r.url_problem = [](const std::string& url) -> std::optional<std::string> {
        if (url == "/v1/chat/completions" || url == "/v1/embeddings") return std::nullopt;
        return "loch runs no batch items on " + url;
    };
    r.model_problem = [](const std::string& m) -> std::optional<std::string> {
        if (m == "demo" || m == "embed") return std::nullopt;
        return "no model named '" + m + "' (known: demo, embed)";
    };
    return r;
}

InputCheck check(const std::string& text, InputRules r = rules()) {
    std::istringstream in(text);
    return check_input_file(in, r);
}

std::string chat_line(const std::string& id, const std::string& model = "demo") {
    return R"({"custom_id":")" + id + R"(","method":"POST","url":"/v1/chat/completions","body":{"model":")" +
           model + R"(","messages":[{"role":"user","content":"hi"}]}})";
}

TEST(BatchInput, AGoodFileGivesEachItemItsLineAndWhereItIs) {
    const std::string file =
        chat_line("a") + "\n\n" +
        R"({"custom_id":"b","method":"POST","url":"/v1/embeddings","body":{"model":"embed","input":"x"}})" +
        "\r\n" + chat_line("c");  // a blank line, CRLF, no final newline
    const auto c = check(file);
    ASSERT_TRUE(c.ok()) << c.summary();
    ASSERT_EQ(c.items.size(), 3u);
    EXPECT_EQ(c.items[0].line, 1);
    EXPECT_EQ(c.items[1].line, 3);
    EXPECT_EQ(c.items[1].url, "/v1/embeddings");
    EXPECT_EQ(c.items[1].model, "embed");
    EXPECT_EQ(c.items[2].line, 4);
    for (const auto& item : c.items) {
        const auto j = nlohmann::json::parse(file.substr(item.line_offset, item.line_bytes));
        EXPECT_EQ(j["custom_id"], item.custom_id);
    }
}

TEST(BatchInput, EveryProblemIsReportedByLineAndABadFileRunsNothing) {
    const std::string file = chat_line("a") + "\n" +  // 1: fine
                             "{not json\n" +          // 2
                             "[1,2]\n" +              // 3
                             R"({"method":"POST","url":"/v1/chat/completions"})"
                             "\n"  // 4: no custom_id
                             + R"({"custom_id":"d","method":"GET","url":"/v1/chat/completions","body":{}})"
                               "\n" +
                             R"({"custom_id":"e","method":"POST","url":"/v1/files","body":{"model":"demo"}})"
                             "\n" +
                             chat_line("f", "nope") + "\n" +  // 7: unknown model
                             R"({"custom_id":"g","method":"POST","url":"/v1/chat/completions","body":{}})"
                             "\n" +
                             chat_line("a") + "\n";  // 9: duplicate
    const auto c = check(file);
    EXPECT_FALSE(c.ok());
    EXPECT_TRUE(c.items.empty()) << "a file with problems runs nothing";
    ASSERT_EQ(c.problems.size(), 8u) << c.summary();
    const std::vector<std::int64_t> lines = {2, 3, 4, 5, 6, 7, 8, 9};
    for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(c.problems[i].line, lines[i]) << c.summary();
    const auto s = c.summary();
    EXPECT_NE(s.find("line 2: not valid JSON"), std::string::npos) << s;
    EXPECT_NE(s.find("line 4: no \"custom_id\""), std::string::npos) << s;
    EXPECT_NE(s.find("line 5: method must be \"POST\""), std::string::npos) << s;
    EXPECT_NE(s.find("line 6: loch runs no batch items on /v1/files"), std::string::npos) << s;
    EXPECT_NE(s.find("line 7: no model named 'nope'"), std::string::npos) << s;
    EXPECT_NE(s.find("line 8: \"body\" has no \"model\""), std::string::npos) << s;
    EXPECT_NE(s.find("line 9: custom_id \"a\" is already used on line 1"), std::string::npos) << s;
}

TEST(BatchInput, ProblemsAreCappedWithACountOfTheRestAndAnEmptyFileIsAProblem) {
    std::string file;
    for (int i = 0; i < 30; ++i) file += "x\n";
    InputRules r = rules();
    r.max_problems = 5;
    const auto c = check(file, r);
    EXPECT_EQ(c.problems.size(), 5u);
    EXPECT_EQ(c.more_problems, 25u);
    EXPECT_NE(c.summary().find("and 25 more"), std::string::npos);
    const auto empty = check("\n\n");
    ASSERT_EQ(empty.problems.size(), 1u);
    EXPECT_EQ(empty.problems[0].message, "the file has no requests");
}

TEST(BatchInput, AnOverlongLineIsRefusedWithoutBeingReadWhole) {
    InputRules r = rules();
    r.max_line_bytes = 64;
    const auto c = check(std::string(1000, 'x') + "\n" + chat_line("a").substr(0, 10) + "\n", r);
    ASSERT_EQ(c.problems.size(), 2u) << c.summary();
    EXPECT_NE(c.problems[0].message.find("1000 bytes, over the 64"), std::string::npos) << c.summary();
    EXPECT_EQ(c.problems[1].line, 2);
}

}  // namespace
}  // namespace loch::batch
