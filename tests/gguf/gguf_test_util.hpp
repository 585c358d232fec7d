// Shared helpers for the gguf tests: a small model builder, byte patching and a temp dir.
#pragma once

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/model.hpp"
#include "support/temp_dir.hpp"

namespace loch::gguf::test {

inline Model small_model() {
    Model m;
    m.metadata.set("general.architecture", Value::str("llama"));
    m.metadata.set("general.name", Value::str("tiny"));
    m.metadata.set("llama.block_count", Value::u32(2));
    m.tensors.push_back({"token_embd.weight", {64, 10}, GgmlType::F16, 0, 0});
    m.tensors.push_back({"blk.0.attn_q.weight", {256, 4}, GgmlType::Q4_K, 0, 0});
    m.tensors.push_back({"output_norm.weight", {64}, GgmlType::F32, 0, 0});
    return m;
}

template <typename T>
void poke(std::vector<std::byte>& b, std::size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
}

template <typename T>
void append(std::vector<std::byte>& b, T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
}

inline void append_str(std::vector<std::byte>& b, std::string_view s) {
    append<std::uint64_t>(b, s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    b.insert(b.end(), p, p + s.size());
}

// A fresh directory, removed at scope exit (one class for every suite: support/temp_dir.hpp).
using loch::test::TempDir;

}  // namespace loch::gguf::test
