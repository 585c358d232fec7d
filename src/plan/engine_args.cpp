// plan/engine_args — a plan's settings as llama-server's and llama-fit-params' flags, and byte sizes read
// from text ("512MiB", "2G"): plan.hpp declares them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "plan/plan.hpp"

namespace loch::plan {

std::vector<std::string> engine_args(const Settings& st) {
    std::vector<std::string> a;
    auto add = [&](std::string k, std::string v) {
        a.push_back(std::move(k));
        a.push_back(std::move(v));
    };
    add("-c", std::to_string(st.n_ctx));
    add("-np", std::to_string(st.n_parallel));
    if (st.kv_unified) a.push_back("--kv-unified");
    add("-b", std::to_string(st.n_batch));
    add("-ub", std::to_string(st.n_ubatch));
    add("-fa", st.flash_attn == FlashAttn::on ? "on" : st.flash_attn == FlashAttn::off ? "off" : "auto");
    add("-ctk", std::string(gguf::traits(st.type_k).name));
    add("-ctv", std::string(gguf::traits(st.type_v).name));
    if (st.swa_full) a.push_back("--swa-full");
    if (st.gpus.empty()) {
        add("-ngl", "0");
    } else {
        add("-ngl", st.n_gpu_layers < 0 ? "999" : std::to_string(st.n_gpu_layers));
        std::string devs;
        for (const auto& g : st.gpus) {
            std::string up;
            // loch ids are lower case ("cuda0"); ggml names the backend devices "CUDA0", "ROCm0", "Vulkan0".
            if (g.starts_with("cuda"))
                up = "CUDA" + g.substr(4);
            else if (g.starts_with("rocm"))
                up = "ROCm" + g.substr(4);
            else if (g.starts_with("vulkan"))
                up = "Vulkan" + g.substr(6);
            else
                up = g;
            devs += (devs.empty() ? "" : ",") + up;
        }
        add("--device", devs);
        if (!st.tensor_split.empty()) {
            std::string ts;
            for (float f : st.tensor_split) ts += (ts.empty() ? "" : ",") + fmt::format("{}", f);
            add("-ts", ts);
        }
    }
    if (st.n_cpu_moe > 0) add("--n-cpu-moe", std::to_string(st.n_cpu_moe));
    for (const auto& p : st.cpu_tensor_patterns) add("-ot", p + "=CPU");
    if (st.draft) {
        add("--spec-type", "draft-simple");
        add("--spec-draft-model", st.draft->path);
        add("--spec-draft-n-max", std::to_string(st.draft->n_max));
        add("--spec-draft-ngl", st.gpus.empty()              ? "0"
                                : st.draft->n_gpu_layers < 0 ? "999"
                                                             : std::to_string(st.draft->n_gpu_layers));
        add("--spec-draft-type-k", std::string(gguf::traits(st.draft->type_k).name));
        add("--spec-draft-type-v", std::string(gguf::traits(st.draft->type_v).name));
    }
    return a;
}

std::optional<std::uint64_t> parse_bytes(std::string_view t) {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    std::size_t n = 0;
    while (n < t.size() && ((t[n] >= '0' && t[n] <= '9') || t[n] == '.')) ++n;
    if (n == 0 || n > 30) return std::nullopt;
    double v = 0;
    try {
        std::size_t used = 0;
        v = std::stod(std::string(t.substr(0, n)), &used);
        if (used != n) return std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;
    }
    std::string unit;
    for (char c : t.substr(n))
        if (c != ' ') unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    double mul = 0;
    if (unit.empty() || unit == "b")
        mul = 1;
    else if (unit == "k" || unit == "kib")
        mul = 1024.0;
    else if (unit == "m" || unit == "mib")
        mul = 1024.0 * 1024;
    else if (unit == "g" || unit == "gib")
        mul = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tib")
        mul = 1024.0 * 1024 * 1024 * 1024;
    else if (unit == "kb")
        mul = 1e3;
    else if (unit == "mb")
        mul = 1e6;
    else if (unit == "gb")
        mul = 1e9;
    else if (unit == "tb")
        mul = 1e12;
    else
        return std::nullopt;
    const double bytes = v * mul;
    if (!(bytes >= 0) || bytes > 1.8e19) return std::nullopt;
    return static_cast<std::uint64_t>(std::llround(bytes));
}

}  // namespace loch::plan
