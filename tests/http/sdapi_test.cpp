// A1111's model list and which image model a txt2img request means when it names none in `model`.
#include "http/sdapi.hpp"

#include <gtest/gtest.h>

#include "broker/error.hpp"

namespace loch::http {
namespace {

config::ModelConfig image_model(std::string name, std::string file, std::vector<std::string> aliases = {}) {
    config::ModelConfig m;
    m.name = std::move(name);
    m.path = "/models/" + file;
    m.aliases = std::move(aliases);
    return m;
}

broker::ErrorKind kind_of_error(const std::string& asked, const std::vector<const config::ModelConfig*>& ms) {
    try {
        sdapi_model(asked, ms);
    } catch (const broker::Error& e) {
        return e.kind();
    }
    ADD_FAILURE() << "'" << asked << "' was resolved";
    return broker::ErrorKind::internal;
}

TEST(Sdapi, TheOnlyImageModelOrTheNamedCheckpointInAnyOfA1111sForms) {
    const auto flux = image_model("flux", "flux1-dev-q8_0.gguf", {"flux-dev"});
    const auto sd = image_model("sd15", "v1-5-pruned-emaonly.safetensors");
    EXPECT_EQ(sdapi_model("", {&flux}), "flux");
    EXPECT_EQ(sdapi_model("flux", {&flux, &sd}), "flux");
    EXPECT_EQ(sdapi_model("flux-dev", {&flux, &sd}), "flux");                         // an alias
    EXPECT_EQ(sdapi_model("sd15 [6ce0161689]", {&flux, &sd}), "sd15");                // a title with its hash
    EXPECT_EQ(sdapi_model("v1-5-pruned-emaonly.safetensors", {&flux, &sd}), "sd15");  // the file name
    EXPECT_EQ(kind_of_error("", {&flux, &sd}), broker::ErrorKind::invalid_request);   // which one?
    EXPECT_EQ(kind_of_error("", {}), broker::ErrorKind::invalid_request);
    EXPECT_EQ(kind_of_error("sdxl", {&flux, &sd}), broker::ErrorKind::model_not_found);
}

TEST(Sdapi, TheListIsA1111sShape) {
    const auto flux = image_model("flux", "flux1-dev.gguf");
    const auto list = sd_models({&flux});
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["title"], "flux");
    EXPECT_EQ(list[0]["model_name"], "flux");
    EXPECT_EQ(list[0]["filename"], "flux1-dev.gguf");
    EXPECT_TRUE(list[0].contains("hash"));
}

}  // namespace
}  // namespace loch::http
