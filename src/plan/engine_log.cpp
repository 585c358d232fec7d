#include "plan/engine_log.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

namespace loch::plan {
namespace {

std::string_view trim_front(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    return s;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

// A decimal number at the start of s ("  4026.00 MiB"): the value and what follows it.
std::optional<double> leading_number(std::string_view s, std::string_view* rest = nullptr) {
    s = trim_front(s);
    std::size_t n = 0;
    while (n < s.size() && (std::isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.' || s[n] == '-'))
        ++n;
    if (n == 0 || n > 32) return std::nullopt;
    std::string tmp(s.substr(0, n));
    char* end = nullptr;
    double v = std::strtod(tmp.c_str(), &end);
    if (end != tmp.c_str() + tmp.size() || !std::isfinite(v)) return std::nullopt;
    if (rest) *rest = s.substr(n);
    return v;
}

// `rest` is the exact remainder of s after the number (only leading blanks are skipped).
std::optional<std::int64_t> leading_int(std::string_view s, std::string_view* rest = nullptr) {
    s = trim_front(s);
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{}) return std::nullopt;
    if (rest) *rest = s.substr(static_cast<std::size_t>(p - s.data()));
    return v;
}

// "  4026.00 MiB" → bytes; only non-negative MiB values below 2^40 MiB are accepted.
std::optional<std::uint64_t> mib_value(std::string_view s) {
    std::string_view rest;
    auto v = leading_number(s, &rest);
    if (!v || *v < 0 || *v > 1e12) return std::nullopt;
    if (!trim(rest).starts_with("MiB")) return std::nullopt;
    return static_cast<std::uint64_t>(std::llround(*v * static_cast<double>(kMiB)));
}

// The last whitespace-separated word before position `pos` of line.
std::string_view word_before(std::string_view line, std::size_t pos) {
    std::string_view head = trim(line.substr(0, pos));
    auto sp = head.find_last_of(" \t");
    return sp == std::string_view::npos ? head : head.substr(sp + 1);
}

enum class Kind { model, kv, recurrent, compute, output };

struct BufferLine {
    std::string_view marker;
    Kind kind;
};
constexpr BufferLine kBufferLines[] = {
    {" model buffer size = ", Kind::model},
    {" KV buffer size = ", Kind::kv},
    {" RS buffer size = ", Kind::recurrent},
    {" compute buffer size = ", Kind::compute},
    {" output buffer size = ", Kind::output},
    // llama_adapter_lora_init_impl: "CUDA0 LoRA buffer size = …": an adapter's pairs, weights on that device.
    {" LoRA buffer size = ", Kind::model},
};

class Parser {
  public:
    void line(std::string_view l) {
        if (draft_line(l) || projector_line(l) || buffer_line(l) || kv_line(l) || offload_line(l) ||
            breakdown_line(l))
            return;
    }
    EngineFootprint take() { return std::move(fp_); }

  private:
    EngineFootprint fp_;
    std::string projector_buffer_ = "CPU";  // the backend clip.cpp says it uses ("CLIP using CUDA0 backend")

    // The vision projector's lines (clip.cpp): they must not be taken for the language model's buffers.
    bool projector_line(std::string_view l) {
        if (const auto pos = l.find("CLIP using "); pos != std::string_view::npos) {
            std::string_view r = trim(l.substr(pos + 11));
            const auto sp = r.find(' ');
            if (sp != std::string_view::npos && sp > 0 && sp <= 64)
                projector_buffer_ = std::string(r.substr(0, sp));
            return true;
        }
        if (l.find("load_hparams: ") != std::string_view::npos) {
            constexpr std::string_view marker = "model size:";
            const auto pos = l.find(marker);
            if (pos == std::string_view::npos) return true;
            if (const auto bytes = mib_value(l.substr(pos + marker.size())))
                buffer(projector_buffer_).projector_weights = *bytes;
            return true;
        }
        if (l.find("reserve_compute_meta: ") == std::string_view::npos) return false;
        constexpr std::string_view marker = " compute buffer size = ";
        const auto pos = l.find(marker);
        if (pos == std::string_view::npos) return true;
        const auto bytes = mib_value(l.substr(pos + marker.size()));
        const std::string_view name = word_before(l, pos);
        if (bytes && !name.empty() && name.size() <= 64 && name.back() != ':')
            buffer(name).projector_compute = *bytes;  // a second reserve (flash attention refused) replaces
        return true;
    }
    bool context_seen_ = false;  // a KV/compute/output line belongs to the current load
    bool in_table_ = false;
    // The draft model (common_speculative_init_result: "loading draft model '…'") loads after the model's
    // context: its buffer lines are the draft's, its KV summary and offload line not the model's.
    bool in_draft_ = false;
    bool draft_context_seen_ = false;

    bool draft_line(std::string_view l) {
        if (l.find("loading draft model") == std::string_view::npos) return false;
        in_draft_ = true;
        draft_context_seen_ = false;
        return true;
    }

    BufferSizes& buffer(std::string_view name) {
        for (auto& b : fp_.buffers)
            if (b.buffer == name) return b;
        BufferSizes b;
        b.buffer = std::string(name);
        b.device = device_of_buffer(name);
        fp_.buffers.push_back(std::move(b));
        return fp_.buffers.back();
    }

    bool buffer_line(std::string_view l) {
        for (const auto& bl : kBufferLines) {
            auto pos = l.find(bl.marker);
            if (pos == std::string_view::npos) continue;
            auto bytes = mib_value(l.substr(pos + bl.marker.size()));
            std::string_view name = word_before(l, pos);
            if (!bytes || name.empty() || name.size() > 64 || name.back() == ':') return true;
            if (bl.kind == Kind::model && (in_draft_ ? draft_context_seen_ : context_seen_)) {
                // A new load starts (the dry run of --fit came first, or the engine restarted).
                fp_ = EngineFootprint{};
                context_seen_ = in_draft_ = draft_context_seen_ = false;
            }
            auto& b = buffer(name);
            if (in_draft_) {
                switch (bl.kind) {
                    case Kind::model:
                        b.draft_model += *bytes;
                        break;
                    case Kind::kv:
                    case Kind::recurrent:
                        b.draft_kv += *bytes;
                        draft_context_seen_ = true;
                        break;
                    case Kind::compute:
                        b.draft_compute = *bytes;  // re-reserve replaces
                        draft_context_seen_ = true;
                        break;
                    case Kind::output:
                        b.draft_output = *bytes;
                        draft_context_seen_ = true;
                        break;
                }
                return true;
            }
            switch (bl.kind) {
                case Kind::model:
                    b.model += *bytes;
                    break;
                case Kind::kv:
                    b.kv += *bytes;
                    context_seen_ = true;
                    break;
                case Kind::recurrent:
                    b.recurrent += *bytes;
                    context_seen_ = true;
                    break;
                case Kind::compute:
                    b.compute = *bytes;
                    context_seen_ = true;
                    break;  // re-reserve replaces
                case Kind::output:
                    b.output = *bytes;
                    context_seen_ = true;
                    break;
            }
            return true;
        }
        return false;
    }

    // llama_kv_cache: size =  512.00 MiB (  4096 cells,  32 layers,  1/1 seqs), K (f16):  256.00 MiB, V
    // (f16): ...
    bool kv_line(std::string_view l) {
        constexpr std::string_view marker = "llama_kv_cache: size = ";
        auto pos = l.find(marker);
        if (pos == std::string_view::npos) return false;
        std::string_view rest = l.substr(pos + marker.size());
        KvSummary kv;
        auto bytes = mib_value(rest);
        if (!bytes) return true;
        kv.bytes = *bytes;
        if (auto p = rest.find('('); p != std::string_view::npos) {
            std::string_view r = rest.substr(p + 1);
            if (auto cells = leading_int(r, &r); cells && *cells >= 0 && *cells <= UINT32_MAX) {
                kv.cells = static_cast<std::uint32_t>(*cells);
                if (auto c = r.find(','); c != std::string_view::npos) {
                    if (auto layers = leading_int(r.substr(c + 1));
                        layers && *layers >= 0 && *layers <= 100000)
                        kv.layers = static_cast<std::uint32_t>(*layers);
                }
            }
        }
        auto type_after = [&](std::string_view key) -> std::string {
            auto p = rest.find(key);
            if (p == std::string_view::npos) return {};
            auto q = rest.find(')', p);
            if (q == std::string_view::npos) return {};
            return std::string(rest.substr(p + key.size(), std::min<std::size_t>(q - p - key.size(), 16)));
        };
        kv.type_k = type_after("K (");
        kv.type_v = type_after("V (");
        if (in_draft_) {
            draft_context_seen_ = true;  // the draft's cache: its bytes are in its buffer lines
            return true;
        }
        fp_.kv_caches.push_back(std::move(kv));
        context_seen_ = true;
        return true;
    }

    bool offload_line(std::string_view l) {
        constexpr std::string_view marker = "offloaded ";
        auto pos = l.find(marker);
        if (pos == std::string_view::npos || l.find(" layers to GPU") == std::string_view::npos) return false;
        if (in_draft_) return true;  // the draft's layers, not the model's
        std::string_view r = l.substr(pos + marker.size());
        auto x = leading_int(r, &r);
        if (!x || r.empty() || r.front() != '/') return true;
        auto y = leading_int(r.substr(1));
        if (!y || *x < 0 || *y < 0 || *x > 1000000 || *y > 1000000) return true;
        fp_.layers_offloaded = static_cast<int>(*x);
        fp_.layers_offloadable = static_cast<int>(*y);
        return true;
    }

    // | memory breakdown [MiB] | total free self model context compute unaccounted |
    // |   - CUDA0 (H200)       | 143771 = 1234 + (5000 = 4026 + 512 + 112) + 597 |
    // |   - Host               |    531 = 500 + 20 + 11 |
    bool breakdown_line(std::string_view l) {
        if (l.find("memory breakdown [MiB]") != std::string_view::npos) {
            fp_.breakdown.clear();
            in_table_ = true;
            return true;
        }
        if (!in_table_ || l.find("common_memory_breakdown_print") == std::string_view::npos) return false;
        auto bar = l.find("| ");
        if (bar == std::string_view::npos) return true;
        std::string_view cells = l.substr(bar + 1);
        auto mid = cells.find('|');
        if (mid == std::string_view::npos) return true;
        std::string_view name = trim(cells.substr(0, mid));
        if (name.starts_with("- ")) name = trim(name.substr(2));
        std::string_view nums = cells.substr(mid + 1);
        if (auto end = nums.find('|'); end != std::string_view::npos) nums = nums.substr(0, end);
        // Collect the integers in order; the template decides which is which.
        std::vector<std::int64_t> v;
        for (std::size_t i = 0; i < nums.size() && v.size() < 8;) {
            char c = nums[i];
            if (std::isdigit(static_cast<unsigned char>(c)) ||
                (c == '-' && i + 1 < nums.size() && std::isdigit(static_cast<unsigned char>(nums[i + 1])))) {
                std::string_view r;
                auto n = leading_int(nums.substr(i), &r);
                if (!n) break;
                v.push_back(*n);
                i = nums.size() - r.size();
            } else {
                ++i;
            }
        }
        BreakdownRow row;
        row.name = std::string(name.substr(0, 128));
        bool has_paren = nums.find('(') != std::string_view::npos;
        if (has_paren && v.size() == 7) {
            row.total_mib = v[0];
            row.free_mib = v[1];
            row.self_mib = v[2];
            row.model_mib = v[3];
            row.context_mib = v[4];
            row.compute_mib = v[5];
            row.unaccounted_mib = v[6];
        } else if (!has_paren && v.size() == 4) {
            row.is_host = true;
            row.self_mib = v[0];
            row.model_mib = v[1];
            row.context_mib = v[2];
            row.compute_mib = v[3];
        } else {
            return true;
        }
        fp_.breakdown.push_back(std::move(row));
        return true;
    }
};

}  // namespace

std::string device_of_buffer(std::string_view buffer) {
    std::string lower;
    lower.reserve(buffer.size());
    for (char c : buffer) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (lower.starts_with("cpu") || lower.ends_with("_host") || lower == "host") return "cpu";
    // "cuda0_split" and friends: keep the device part.
    if (auto us = lower.find('_'); us != std::string::npos) lower.resize(us);
    return lower;
}

EngineFootprint parse_engine_log(std::string_view text) {
    Parser p;
    while (!text.empty()) {
        auto nl = text.find('\n');
        std::string_view l = text.substr(0, nl);
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        p.line(l);
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
    return p.take();
}

MemoryFigure EngineFootprint::device_total(std::string_view device) const {
    MemoryFigure f{0, Source::measured, "llama-server log: buffers on " + std::string(device)};
    for (const auto& b : buffers)
        if (b.device == device) f.bytes += b.total();
    return f;
}

std::vector<std::string> EngineFootprint::devices() const {
    std::vector<std::string> out;
    for (const auto& b : buffers)
        if (b.device != "cpu" && std::find(out.begin(), out.end(), b.device) == out.end())
            out.push_back(b.device);
    for (const auto& b : buffers)
        if (b.device == "cpu") {
            out.push_back("cpu");
            break;
        }
    return out;
}

const BufferSizes* EngineFootprint::find_buffer(std::string_view name) const {
    for (const auto& b : buffers)
        if (b.buffer == name) return &b;
    return nullptr;
}

void to_json(nlohmann::json& j, const BufferSizes& b) {
    j = {{"buffer", b.buffer},       {"device", b.device},   {"model", b.model},   {"kv", b.kv},
         {"recurrent", b.recurrent}, {"compute", b.compute}, {"output", b.output}, {"total", b.total()}};
    if (b.projector_weights || b.projector_compute) {
        j["projector_weights"] = b.projector_weights;
        j["projector_compute"] = b.projector_compute;
    }
    if (b.draft() > 0)
        j["draft"] = {{"model", b.draft_model},
                      {"kv", b.draft_kv},
                      {"compute", b.draft_compute},
                      {"output", b.draft_output},
                      {"total", b.draft()}};
}

void to_json(nlohmann::json& j, const EngineFootprint& f) {
    j = nlohmann::json::object();
    j["source"] = "measured";
    j["buffers"] = f.buffers;
    nlohmann::json per_device = nlohmann::json::object();
    for (const auto& d : f.devices()) per_device[d] = f.device_total(d).bytes;
    j["device_bytes"] = per_device;
    if (f.layers_offloaded) j["layers_offloaded"] = *f.layers_offloaded;
    if (f.layers_offloadable) j["layers_offloadable"] = *f.layers_offloadable;
    auto kv = nlohmann::json::array();
    for (const auto& k : f.kv_caches)
        kv.push_back({{"bytes", k.bytes},
                      {"cells", k.cells},
                      {"layers", k.layers},
                      {"type_k", k.type_k},
                      {"type_v", k.type_v}});
    j["kv_caches"] = kv;
    auto rows = nlohmann::json::array();
    for (const auto& r : f.breakdown) {
        nlohmann::json row = {{"name", r.name},
                              {"host", r.is_host},
                              {"self_mib", r.self_mib},
                              {"model_mib", r.model_mib},
                              {"context_mib", r.context_mib},
                              {"compute_mib", r.compute_mib}};
        if (r.total_mib) row["total_mib"] = *r.total_mib;
        if (r.free_mib) row["free_mib"] = *r.free_mib;
        if (r.unaccounted_mib) row["unaccounted_mib"] = *r.unaccounted_mib;
        rows.push_back(row);
    }
    j["breakdown"] = rows;
}

}  // namespace loch::plan
