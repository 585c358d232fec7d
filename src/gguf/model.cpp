#include "gguf/model.hpp"

#include <limits>

namespace loch::gguf {

std::string_view to_string(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
            return "uint8";
        case ValueType::INT8:
            return "int8";
        case ValueType::UINT16:
            return "uint16";
        case ValueType::INT16:
            return "int16";
        case ValueType::UINT32:
            return "uint32";
        case ValueType::INT32:
            return "int32";
        case ValueType::FLOAT32:
            return "float32";
        case ValueType::BOOL:
            return "bool";
        case ValueType::STRING:
            return "string";
        case ValueType::ARRAY:
            return "array";
        case ValueType::UINT64:
            return "uint64";
        case ValueType::INT64:
            return "int64";
        case ValueType::FLOAT64:
            return "float64";
    }
    return "unknown";
}

std::optional<std::uint64_t> Value::as_uint() const {
    if (const auto* u = std::get_if<std::uint64_t>(&data)) return *u;
    if (const auto* i = std::get_if<std::int64_t>(&data); i && *i >= 0) return static_cast<std::uint64_t>(*i);
    return std::nullopt;
}

std::optional<std::int64_t> Value::as_int() const {
    if (const auto* i = std::get_if<std::int64_t>(&data)) return *i;
    if (const auto* u = std::get_if<std::uint64_t>(&data);
        u && *u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(*u);
    }
    return std::nullopt;
}

std::optional<double> Value::as_float() const {
    if (const auto* d = std::get_if<double>(&data)) return *d;
    if (const auto* u = std::get_if<std::uint64_t>(&data)) return static_cast<double>(*u);
    if (const auto* i = std::get_if<std::int64_t>(&data)) return static_cast<double>(*i);
    return std::nullopt;
}

const std::string* Value::as_string() const {
    return std::get_if<std::string>(&data);
}
const Array* Value::as_array() const {
    return std::get_if<Array>(&data);
}

bool operator==(const Array& a, const Array& b) {
    return a.element_type == b.element_type && a.items == b.items;
}
bool operator==(const Value& a, const Value& b) {
    return a.type == b.type && a.data == b.data;
}

const Value* Metadata::find(std::string_view key) const {
    for (const auto& kv : entries_) {
        if (kv.key == key) return &kv.value;
    }
    return nullptr;
}

std::optional<std::uint64_t> Metadata::get_uint(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_uint() : std::nullopt;
}

std::optional<double> Metadata::get_float(std::string_view key) const {
    const Value* v = find(key);
    return v ? v->as_float() : std::nullopt;
}

std::optional<std::string> Metadata::get_string(std::string_view key) const {
    const Value* v = find(key);
    const std::string* s = v ? v->as_string() : nullptr;
    return s ? std::optional<std::string>(*s) : std::nullopt;
}

void Metadata::set(std::string key, Value value) {
    for (auto& kv : entries_) {
        if (kv.key == key) {
            kv.value = std::move(value);
            return;
        }
    }
    entries_.push_back({std::move(key), std::move(value)});
}

std::uint64_t TensorInfo::n_elements() const {
    std::uint64_t n = 1;
    for (std::uint64_t d : dims) {
        // Saturates instead of wrapping: the reader rejects such shapes, a hand-built one must not wrap.
        if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d)
            return std::numeric_limits<std::uint64_t>::max();
        n *= d;
    }
    return n;
}

std::uint64_t TensorInfo::n_bytes() const {
    return bytes_for(type, n_elements()).value_or(0);
}

std::string Model::architecture() const {
    return metadata.get_string("general.architecture").value_or("");
}

const Value* Model::arch_value(std::string_view suffix) const {
    const std::string arch = architecture();
    if (arch.empty()) return nullptr;
    std::string key = arch;
    key += '.';
    key += suffix;
    return metadata.find(key);
}

std::optional<std::uint64_t> Model::arch_uint(std::string_view suffix) const {
    const Value* v = arch_value(suffix);
    return v ? v->as_uint() : std::nullopt;
}

std::optional<double> Model::arch_float(std::string_view suffix) const {
    const Value* v = arch_value(suffix);
    return v ? v->as_float() : std::nullopt;
}

const TensorInfo* Model::find_tensor(std::string_view name) const {
    for (const auto& t : tensors) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

std::uint64_t Model::parameter_count() const {
    std::uint64_t n = 0;
    for (const auto& t : tensors) n += t.n_elements();
    return n;
}

std::uint64_t Model::tensor_bytes() const {
    std::uint64_t n = 0;
    for (const auto& t : tensors) n += t.n_bytes();
    return n;
}

}  // namespace loch::gguf
