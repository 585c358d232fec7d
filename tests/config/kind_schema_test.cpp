// The loader hands each model entry's own keys to the entry's engine kind (config/kind_schema.hpp) and knows
// no kind itself: two test-double kinds ("alpha", the default, and "beta") stand in for the real ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "config/kind_schema.hpp"

namespace loch::config {
namespace {

using ::testing::HasSubstr;

struct WordSettings final : KindSettings {
    std::string word = "unset";
    std::uint32_t count = 1;
    std::unique_ptr<KindSettings> clone() const override { return std::make_unique<WordSettings>(*this); }
};

// A test double: a kind whose section is `<key>: {word: text, count: n}`.
class WordKind final : public KindSchema {
  public:
    WordKind(std::string name, std::string key, bool needs_path)
        : name_(std::move(name)), key_(std::move(key)), needs_path_(needs_path) {}
    std::string_view name() const override { return name_; }
    std::unique_ptr<KindSettings> initial_settings() const override {
        return std::make_unique<WordSettings>();
    }
    Walker::Keys keys(Walker& w, KindSettings& into) const override {
        auto& s = dynamic_cast<WordSettings&>(into);
        return {{key_, [&w, &s](auto&, auto& node, auto& path) {
                     w.walk(node, path,
                            {{"word",
                              [&](auto&, auto& v, auto& k) {
                                  if (auto x = w.str(v, k)) s.word = *x;
                              }},
                             {"count", [&](auto&, auto& v, auto& k) {
                                  if (auto x = w.integer(v, k, 1, 9))
                                      s.count = static_cast<std::uint32_t>(*x);
                              }}});
                 }}};
    }
    void check(Walker& w, const YAML::Node& entry, const std::string& path, ModelConfig& m,
               bool) const override {
        if (settings_as<WordSettings>(m).word == "forbidden")
            w.error(entry, path + "." + key_, "that word is not allowed");
    }
    bool needs_path() const override { return needs_path_; }

  private:
    std::string name_, key_;
    bool needs_path_;
};

class KindSchemaTest : public ::testing::Test {
  protected:
    KindSchemaTest() {
        ctx.cwd = "/tmp";
        ctx.check_files = false;
        ctx.kinds = {&alpha, &beta};
    }
    Config parse(const std::string& yaml) { return parse_config(yaml, "/tmp/loch.yaml", ctx); }
    std::vector<Diagnostic> errors(const std::string& yaml) {
        try {
            parse(yaml);
        } catch (const ConfigError& e) {
            return e.diagnostics();
        }
        ADD_FAILURE() << "no error for:\n" << yaml;
        return {};
    }
    WordKind alpha{"alpha", "a_section", /*needs_path=*/true};
    WordKind beta{"beta", "b_section", /*needs_path=*/false};
    LoadContext ctx;
};

TEST_F(KindSchemaTest, EachEntryGetsItsKindsSettingsStartingFromItsKindsDefaults) {
    const auto c = parse(R"(defaults:
  a_section: {word: from-defaults, count: 3}
  b_section: {count: 7}
models:
  - name: one
    path: one.bin
  - name: two
    path: two.bin
    a_section: {word: own}
  - name: three
    engine: beta
    b_section: {word: bee}
)");
    ASSERT_EQ(c.models.size(), 3u);
    EXPECT_EQ(c.models[0].engine, "alpha");  // the default kind: the first one registered
    EXPECT_EQ(settings_as<WordSettings>(c.models[0]).word, "from-defaults");
    EXPECT_EQ(settings_as<WordSettings>(c.models[1]).word, "own");
    EXPECT_EQ(settings_as<WordSettings>(c.models[1]).count, 3u);  // per key: the rest from defaults
    EXPECT_EQ(c.models[2].engine, "beta");
    EXPECT_EQ(settings_as<WordSettings>(c.models[2]).word, "bee");
    EXPECT_EQ(settings_as<WordSettings>(c.models[2]).count, 7u);
    EXPECT_TRUE(c.models[2].path.empty());  // beta needs none
}

TEST_F(KindSchemaTest, ErrorsInAKindsSectionCarryFileAndLineLikeAnyOther) {
    const auto d = errors(R"(models:
  - name: one
    path: one.bin
    a_section:
      count: 12
      colour: red
  - name: two
    engine: gamma
  - name: three
    path: three.bin
    b_section: {word: x}
  - name: four
    path: four.bin
    a_section: {word: forbidden}
  - name: five
    engine: alpha
)");
    ASSERT_EQ(d.size(), 6u);
    EXPECT_EQ(d[0].line, 5);
    EXPECT_EQ(d[0].key, "models[0].a_section.count");
    EXPECT_THAT(d[0].message, HasSubstr("between 1 and 9"));
    EXPECT_EQ(d[1].line, 6);
    EXPECT_THAT(d[1].message, HasSubstr("unknown key 'colour'"));
    EXPECT_EQ(d[2].line, 8);
    EXPECT_THAT(d[2].message, HasSubstr("expected one of alpha, beta, got 'gamma'"));
    EXPECT_EQ(d[3].line, 11);
    EXPECT_THAT(d[3].message, HasSubstr("only for engine: beta (this model uses alpha)"));
    EXPECT_EQ(d[4].line, 12);  // the check reports at the entry
    EXPECT_THAT(d[4].message, HasSubstr("that word is not allowed"));
    EXPECT_EQ(d[5].line, 15);
    EXPECT_THAT(d[5].message, HasSubstr("missing 'path'"));
}

TEST_F(KindSchemaTest, WithoutKindsNothingLoadsAndTheMessageSaysWhy) {
    ctx.kinds.clear();
    const auto d = errors("models:\n  - name: one\n    path: one.bin\n");
    ASSERT_FALSE(d.empty());
    EXPECT_THAT(d[0].message, HasSubstr("no engine kinds are registered"));
}

}  // namespace
}  // namespace loch::config
