// gguf/model — the in-memory picture of a GGUF model: metadata key/values and tensor infos.
//
// The reader fills it from a file (or a set of split files); loch-synth builds one from a shape and the
// writer serializes it; the planner reads shapes from it. Tensor data are not held here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gguf/ggml_types.hpp"

namespace loch::gguf {

// GGUF metadata value types, numbered as in the file format.
enum class ValueType : std::uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};
std::string_view to_string(ValueType t);

struct Value;
struct Array {
    ValueType element_type = ValueType::UINT8;
    std::vector<Value> items;
};

// One metadata value; `type` keeps the exact on-disk type so that a read file can be written back byte-exact.
struct Value {
    ValueType type = ValueType::UINT32;
    std::variant<std::uint64_t, std::int64_t, double, bool, std::string, Array> data;

    static Value u32(std::uint32_t v) { return {ValueType::UINT32, std::uint64_t{v}}; }
    static Value u64(std::uint64_t v) { return {ValueType::UINT64, v}; }
    static Value i32(std::int32_t v) { return {ValueType::INT32, std::int64_t{v}}; }
    static Value f32(float v) { return {ValueType::FLOAT32, double{v}}; }
    static Value boolean(bool v) { return {ValueType::BOOL, v}; }
    static Value str(std::string v) { return {ValueType::STRING, std::move(v)}; }
    static Value array(ValueType element_type, std::vector<Value> items) {
        return {ValueType::ARRAY, Array{element_type, std::move(items)}};
    }

    // Numeric views convert between integer kinds when the value fits; nullopt otherwise.
    std::optional<std::uint64_t> as_uint() const;
    std::optional<std::int64_t> as_int() const;
    std::optional<double> as_float() const;  // any numeric type
    const std::string* as_string() const;
    const Array* as_array() const;
};

// Exact equality (type, value, nested items); used to check round trips and determinism.
bool operator==(const Array& a, const Array& b);
bool operator==(const Value& a, const Value& b);

struct KeyValue {
    std::string key;
    Value value;
};

// Metadata in file order with lookup by key.
class Metadata {
  public:
    const Value* find(std::string_view key) const;
    std::optional<std::uint64_t> get_uint(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<std::string> get_string(std::string_view key) const;
    void set(std::string key, Value value);  // replaces an existing key in place
    // Appends without looking for an existing key: for the reader, which has already rejected duplicates.
    void append(std::string key, Value value) { entries_.push_back({std::move(key), std::move(value)}); }
    const std::vector<KeyValue>& entries() const { return entries_; }

  private:
    std::vector<KeyValue> entries_;
};

struct TensorInfo {
    std::string name;
    std::vector<std::uint64_t> dims;  // ne[0] first, as stored in the file
    GgmlType type = GgmlType::F32;
    std::uint64_t offset = 0;      // relative to the data section of its file
    std::uint32_t file_index = 0;  // which split file holds it (0 for single files)

    std::uint64_t n_elements() const;
    std::uint64_t n_bytes() const;  // from the type table; the reader has already checked it is exact
};

struct Model {
    std::uint32_t version = 3;
    Metadata metadata;
    std::vector<TensorInfo> tensors;
    std::uint64_t alignment = 32;  // general.alignment or 32
    std::uint64_t file_size = 0;   // bytes on disk, all split files together
    std::vector<std::string> files;
    std::vector<std::uint64_t> data_offsets;  // per file: where its (aligned) tensor data section starts

    std::string architecture() const;  // general.architecture, "" when absent
    // "<architecture>.<suffix>", e.g. arch_uint("block_count").
    std::optional<std::uint64_t> arch_uint(std::string_view suffix) const;
    std::optional<double> arch_float(std::string_view suffix) const;
    const Value* arch_value(std::string_view suffix) const;
    const TensorInfo* find_tensor(std::string_view name) const;
    std::uint64_t parameter_count() const;  // sum of tensor elements
    std::uint64_t tensor_bytes() const;     // sum of tensor sizes
};

}  // namespace loch::gguf
