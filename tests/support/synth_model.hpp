// support/synth_model — writes a synthetic model with the real loch-synth (from LOCH_BIN_DIR) into a
// temporary directory that disappears with the object. Any suite can use it: it needs no library.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace loch::test {

class SynthModel {
  public:
    // `args` are loch-synth arguments without --out, e.g. {"--preset", "tiny-llama"} or
    // {"--arch", "qwen3", "--layers", "2", ...}.
    explicit SynthModel(const std::vector<std::string>& args, const std::string& file_name = "model.gguf")
        : dir_("loch-synth") {
        path_ = dir_.path() / file_name;
        std::vector<std::string> full = args;
        full.push_back("--out");
        full.push_back(path_.string());
        std::filesystem::path exe;
#ifdef LOCH_BIN_DIR
        exe = std::filesystem::path(LOCH_BIN_DIR) / "loch-synth";
#endif
        if (exe.empty() || !std::filesystem::exists(exe)) {
            throw std::runtime_error("loch-synth not found at " + exe.string() +
                                     " (build the loch-synth target)");
        }
        const auto log = dir_.path() / "loch-synth.log";
        const int status = run_to_completion(exe, full, log);
        if (status != 0 || !std::filesystem::exists(path_)) {
            throw std::runtime_error("loch-synth failed with status " + std::to_string(status) + ": " +
                                     read_all(log));
        }
    }
    static SynthModel preset(const std::string& name, const std::string& quant = "") {
        std::vector<std::string> args = {"--preset", name};
        if (!quant.empty()) {
            args.push_back("--quant");
            args.push_back(quant);
        }
        return SynthModel(args);
    }

    const std::filesystem::path& path() const {
        return path_;
    }
    const std::filesystem::path& dir() const {
        return dir_.path();
    }

  private:
    static std::string read_all(const std::filesystem::path& p) {
        std::ifstream in(p, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    TempDir dir_;
    std::filesystem::path path_;
};

}  // namespace loch::test
