// engines/kinds/registry — the one table of engine kinds. A new kind is its file under kinds/ plus one line
// here.
#include <array>
#include <stdexcept>

#include "engines/kind.hpp"
#include "engines/kinds/command.hpp"
#include "engines/kinds/llama_server.hpp"

namespace loch::engines {

namespace {

// Kinds are stateless: one const instance each, for the life of the program. The first is the default kind
// (a model entry without `engine:`, the embedded default's models).
const LlamaServerKind kLlamaServer;
const CommandKind kCommand;

const std::array<const Kind*, 2> kKinds{&kLlamaServer, &kCommand};

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
