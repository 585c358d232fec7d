// engines/kinds/registry — the one table of engine kinds. A new kind is its file under kinds/, which defines
// its `const Kind& <name>_kind()`, plus its line here.
#include <array>
#include <stdexcept>

#include "engines/kind.hpp"

namespace loch::engines {

// Each kind is stateless: one const instance, for the life of the program, made by its file. The first is
// the default kind (a model entry without `engine:`, the embedded default's models).
const Kind& llama_server_kind();    // kinds/llama_server.cpp
const Kind& command_kind();         // kinds/command.cpp
const Kind& vllm_kind();            // kinds/vllm.cpp
const Kind& sd_server_kind();       // kinds/sd_server.cpp
const Kind& whisper_server_kind();  // kinds/whisper_server.cpp

namespace {

const std::array<const Kind*, 5> kKinds{&llama_server_kind(), &command_kind(), &vllm_kind(),
                                        &sd_server_kind(), &whisper_server_kind()};

}  // namespace

const Kind& kind_named(std::string_view name) {
    for (const Kind* k : kKinds)
        if (k->name() == name) return *k;
    throw std::out_of_range("no engine kind named '" + std::string(name) + "'");
}

const Kind& kind_of(const config::ModelConfig& model) {
    return model.engine.empty() ? *kKinds.front() : kind_named(model.engine);
}

std::vector<const config::KindSchema*> kind_schemas() {
    return {kKinds.begin(), kKinds.end()};
}

std::vector<std::string_view> kind_names() {
    std::vector<std::string_view> out;
    for (const Kind* k : kKinds) out.push_back(k->name());
    return out;
}

}  // namespace loch::engines
