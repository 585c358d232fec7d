#include "gguf/summary.hpp"

#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>

namespace loch::gguf {
namespace {

LayerValue layer_value(const Value* v) {
    LayerValue out;
    if (!v) return out;
    if (const auto u = v->as_uint()) {
        out.values.push_back(*u);
    } else if (const Array* a = v->as_array()) {
        for (const Value& item : a->items) {
            const auto u = item.as_uint();
            if (!u) return {};  // not a list of counts: treat as absent rather than guess
            out.values.push_back(*u);
        }
    }
    return out;
}

// The pinned llama.cpp's sliding-window period per architecture when the file has no pattern key
// (src/models/*.cpp, load_swa_pattern): the last layer of each period uses full attention.
struct SwaDefault {
    std::string_view arch;
    std::uint32_t period;
    bool dense_first;
};
constexpr SwaDefault kSwaDefaults[] = {
    {"gemma2", 2, false},  {"gemma3", 6, false},  {"gemma3n", 5, false}, {"gemma-embedding", 6, false},
    {"cohere2", 4, false}, {"gpt-oss", 2, false}, {"exaone4", 4, false}, {"olmo2", 4, false},
};

std::vector<bool> period_pattern(std::uint64_t layers, std::uint64_t period, bool dense_first) {
    std::vector<bool> swa(static_cast<std::size_t>(layers));
    for (std::uint64_t il = 0; il < layers; ++il) {
        swa[il] = period == 0 || (dense_first ? il % period != 0 : il % period < period - 1);
    }
    return swa;
}

void fill_swa(const Model& m, Summary& s) {
    s.sliding_window = m.arch_uint("attention.sliding_window");
    if (!s.sliding_window || *s.sliding_window == 0) return;
    const std::uint64_t layers = std::min<std::uint64_t>(s.layer_count.value_or(0), 1u << 16);
    if (const Value* p = m.arch_value("attention.sliding_window_pattern")) {
        if (const Array* a = p->as_array()) {
            for (const Value& item : a->items) {
                const bool* b = std::get_if<bool>(&item.data);
                const auto u = item.as_uint();
                s.swa_layers.push_back(b ? *b : u.value_or(0) != 0);
            }
            s.swa_pattern_source = "metadata";
            return;
        }
        if (const auto period = p->as_uint()) {
            s.swa_layers = period_pattern(layers, *period, false);
            s.swa_pattern_source = fmt::format("metadata (period {})", *period);
            return;
        }
    }
    for (const SwaDefault& d : kSwaDefaults) {
        if (d.arch == s.architecture) {
            s.swa_layers = period_pattern(layers, d.period, d.dense_first);
            s.swa_pattern_source = fmt::format("llama.cpp default for {} (period {})", d.arch, d.period);
            return;
        }
    }
    s.swa_pattern_source = "unknown (no pattern in the file)";
}

std::string printable(std::string_view in) {
    std::string out;
    for (unsigned char c : in) out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
    return out;
}

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json layer_json(const LayerValue& v) {
    if (!v.present()) return nullptr;
    if (v.uniform()) return v.values.front();
    return v.values;
}

std::string layer_text(const LayerValue& v) {
    if (!v.present()) return "-";
    if (v.uniform()) return std::to_string(v.values.front());
    const auto [lo, hi] = std::minmax_element(v.values.begin(), v.values.end());
    return fmt::format("{}..{} per layer", *lo, *hi);
}

template <typename T>
std::string opt_text(const std::optional<T>& v) {
    return v ? fmt::format("{}", *v) : "-";
}

std::string swa_text(const std::vector<bool>& swa) {
    std::string out;
    for (bool b : swa) out += b ? 'S' : 'F';
    return out;
}

}  // namespace

bool LayerValue::uniform() const {
    return !values.empty() &&
           std::all_of(values.begin(), values.end(), [&](auto v) { return v == values[0]; });
}

std::uint64_t LayerValue::max() const {
    return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

std::string file_type_name(std::uint64_t ftype) {
    static const std::map<std::uint64_t, std::string_view> names = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
        {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"},    {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
        {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},    {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
        {21, "Q2_K_S"}, {22, "IQ3_XS"}, {23, "IQ3_XXS"},   {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},
        {27, "IQ3_M"},  {28, "IQ2_S"},  {29, "IQ2_M"},     {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
        {36, "TQ1_0"},  {37, "TQ2_0"},  {38, "MXFP4_MOE"}, {39, "NVFP4"},  {40, "Q1_0"},    {41, "Q2_0"},
    };
    const auto it = names.find(ftype);
    return it == names.end() ? std::string() : std::string(it->second);
}

std::string format_count(std::uint64_t n) {
    const double d = static_cast<double>(n);
    if (n >= 1000000000ull) return fmt::format("{:.2f} B", d / 1e9);
    if (n >= 1000000ull) return fmt::format("{:.1f} M", d / 1e6);
    if (n >= 1000ull) return fmt::format("{:.1f} K", d / 1e3);
    return std::to_string(n);
}

std::string format_bytes(std::uint64_t n) {
    const double d = static_cast<double>(n);
    if (n >= (1ull << 30)) return fmt::format("{:.2f} GiB", d / (1ull << 30));
    if (n >= (1ull << 20)) return fmt::format("{:.1f} MiB", d / (1ull << 20));
    if (n >= (1ull << 10)) return fmt::format("{:.1f} KiB", d / (1ull << 10));
    return fmt::format("{} B", n);
}

Summary summarize(const Model& m) {
    Summary s;
    s.files = m.files;
    s.version = m.version;
    s.file_size = m.file_size;
    s.architecture = m.architecture();
    s.name = m.metadata.get_string("general.name").value_or("");
    if (const auto ft = m.metadata.get_uint("general.file_type")) s.file_type = file_type_name(*ft);
    s.tensor_count = m.tensors.size();

    std::map<std::uint32_t, TypeUsage> by_type;
    for (const TensorInfo& t : m.tensors) {
        TypeUsage& u = by_type[static_cast<std::uint32_t>(t.type)];
        u.type = t.type;
        u.tensors += 1;
        u.elements += t.n_elements();
        u.bytes += t.n_bytes();
        s.parameter_count += t.n_elements();
        s.tensor_bytes += t.n_bytes();
    }
    for (const auto& [id, u] : by_type) s.types.push_back(u);
    std::stable_sort(s.types.begin(), s.types.end(),
                     [](const auto& a, const auto& b) { return a.bytes > b.bytes; });

    s.layer_count = m.arch_uint("block_count");
    s.context_length = m.arch_uint("context_length");
    s.embedding_length = m.arch_uint("embedding_length");
    s.head_count = layer_value(m.arch_value("attention.head_count"));
    s.head_count_kv = layer_value(m.arch_value("attention.head_count_kv"));
    if (!s.head_count_kv.present()) s.head_count_kv = s.head_count;  // llama.cpp: no GQA unless stated
    s.feed_forward_length = layer_value(m.arch_value("feed_forward_length"));
    s.key_length = m.arch_uint("attention.key_length");
    s.value_length = m.arch_uint("attention.value_length");
    const std::uint64_t heads = s.head_count.max();
    if (s.embedding_length && heads > 0) {
        if (!s.key_length) s.key_length = *s.embedding_length / heads;
        if (!s.value_length) s.value_length = *s.embedding_length / heads;
    }

    s.expert_count = m.arch_uint("expert_count");
    s.expert_used_count = m.arch_uint("expert_used_count");
    s.expert_shared_count = m.arch_uint("expert_shared_count");
    s.expert_feed_forward_length = m.arch_uint("expert_feed_forward_length");

    fill_swa(m, s);

    s.kv_lora_rank = m.arch_uint("attention.kv_lora_rank");
    s.q_lora_rank = m.arch_uint("attention.q_lora_rank");
    s.key_length_mla = m.arch_uint("attention.key_length_mla");
    s.value_length_mla = m.arch_uint("attention.value_length_mla");

    s.tokenizer_model = m.metadata.get_string("tokenizer.ggml.model").value_or("");
    s.tokenizer_pre = m.metadata.get_string("tokenizer.ggml.pre").value_or("");
    if (const Value* tokens = m.metadata.find("tokenizer.ggml.tokens"); tokens && tokens->as_array()) {
        s.vocab_size = tokens->as_array()->items.size();
    } else if (const auto v = m.arch_uint("vocab_size")) {
        s.vocab_size = v;
    } else if (const TensorInfo* emb = m.find_tensor("token_embd.weight"); emb && emb->dims.size() >= 2) {
        s.vocab_size = emb->dims[1];
    }
    return s;
}

nlohmann::json to_json(const Summary& s) {
    nlohmann::json types = nlohmann::json::array();
    for (const TypeUsage& u : s.types) {
        types.push_back({{"type", traits(u.type).name},
                         {"tensors", u.tensors},
                         {"elements", u.elements},
                         {"bytes", u.bytes}});
    }
    nlohmann::json swa = nullptr;
    if (s.sliding_window) {
        swa = {{"window", *s.sliding_window},
               {"pattern", s.swa_layers},
               {"swa_layers", std::count(s.swa_layers.begin(), s.swa_layers.end(), true)},
               {"pattern_source", s.swa_pattern_source}};
    }
    return {
        {"files", s.files},
        {"gguf_version", s.version},
        {"file_size", s.file_size},
        {"architecture", s.architecture},
        {"name", s.name},
        {"file_type", s.file_type},
        {"parameter_count", s.parameter_count},
        {"tensor_count", s.tensor_count},
        {"tensor_bytes", s.tensor_bytes},
        {"types", types},
        {"layer_count", opt(s.layer_count)},
        {"context_length", opt(s.context_length)},
        {"embedding_length", opt(s.embedding_length)},
        {"head_count", layer_json(s.head_count)},
        {"head_count_kv", layer_json(s.head_count_kv)},
        {"key_length", opt(s.key_length)},
        {"value_length", opt(s.value_length)},
        {"feed_forward_length", layer_json(s.feed_forward_length)},
        {"experts",
         {{"count", opt(s.expert_count)},
          {"used", opt(s.expert_used_count)},
          {"shared", opt(s.expert_shared_count)},
          {"feed_forward_length", opt(s.expert_feed_forward_length)}}},
        {"sliding_window", swa},
        {"mla",
         {{"kv_lora_rank", opt(s.kv_lora_rank)},
          {"q_lora_rank", opt(s.q_lora_rank)},
          {"key_length_mla", opt(s.key_length_mla)},
          {"value_length_mla", opt(s.value_length_mla)}}},
        {"tokenizer",
         {{"model", s.tokenizer_model}, {"pre", s.tokenizer_pre}, {"vocab_size", opt(s.vocab_size)}}},
    };
}

std::string to_text(const Summary& s) {
    std::string out;
    auto line = [&out](std::string_view label, const std::string& value) {
        out += fmt::format("{:<16}{}\n", label, value);
    };
    line("file", printable(s.files.empty() ? "" : s.files.front()) +
                     (s.files.size() > 1 ? fmt::format(" (+{} split parts)", s.files.size() - 1) : ""));
    line("file size",
         fmt::format("{} ({} bytes), GGUF v{}", format_bytes(s.file_size), s.file_size, s.version));
    line("architecture", s.architecture.empty() ? "-" : printable(s.architecture));
    if (!s.name.empty()) line("name", printable(s.name));
    if (!s.file_type.empty()) line("file type", s.file_type);
    line("parameters", fmt::format("{} ({})", format_count(s.parameter_count), s.parameter_count));
    line("tensors", fmt::format("{}, {}", s.tensor_count, format_bytes(s.tensor_bytes)));
    for (const TypeUsage& u : s.types) {
        out += fmt::format("  {:<14}{:>6} tensors {:>12}  {:>10} params\n", traits(u.type).name, u.tensors,
                           format_bytes(u.bytes), format_count(u.elements));
    }
    line("layers", opt_text(s.layer_count));
    line("context", opt_text(s.context_length));
    line("embedding", opt_text(s.embedding_length));
    line("heads", layer_text(s.head_count));
    line("kv heads", layer_text(s.head_count_kv));
    line("head dims", fmt::format("k {} / v {}", opt_text(s.key_length), opt_text(s.value_length)));
    line("ffn", layer_text(s.feed_forward_length));
    if (s.expert_count) {
        line("experts",
             fmt::format("{} ({} used, {} shared, ffn {})", *s.expert_count, opt_text(s.expert_used_count),
                         opt_text(s.expert_shared_count), opt_text(s.expert_feed_forward_length)));
    }
    if (s.sliding_window) {
        const auto n_swa = std::count(s.swa_layers.begin(), s.swa_layers.end(), true);
        line("sliding window", fmt::format("{} tokens, {} of {} layers; {}", *s.sliding_window, n_swa,
                                           s.swa_layers.size(), s.swa_pattern_source));
        if (!s.swa_layers.empty()) line("  pattern", swa_text(s.swa_layers) + "  (S sliding, F full)");
    }
    if (s.kv_lora_rank) {
        line("MLA", fmt::format("kv_lora_rank {}, q_lora_rank {}, key_length_mla {}, value_length_mla {}",
                                *s.kv_lora_rank, opt_text(s.q_lora_rank), opt_text(s.key_length_mla),
                                opt_text(s.value_length_mla)));
    }
    line("tokenizer",
         fmt::format("{}{}, vocab {}", s.tokenizer_model.empty() ? "-" : printable(s.tokenizer_model),
                     s.tokenizer_pre.empty() ? "" : " (pre " + printable(s.tokenizer_pre) + ")",
                     opt_text(s.vocab_size)));
    return out;
}

}  // namespace loch::gguf
