#include "gguf/writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>

namespace loch::gguf {
namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr std::uint64_t kDefaultAlignment = 32;

[[noreturn]] void invalid(const std::string& what) {
    throw std::invalid_argument("gguf writer: " + what);
}

std::uint64_t pad_to(std::uint64_t n, std::uint64_t align) {
    const std::uint64_t rem = n % align;
    if (rem == 0) return n;
    if (n > std::numeric_limits<std::uint64_t>::max() - (align - rem)) invalid("size overflows 64 bits");
    return n + (align - rem);
}

class ByteSink {
  public:
    explicit ByteSink(std::vector<std::byte>& out) : out_(out) {}

    template <typename T>
    void put(T v) {
        static_assert(std::is_trivially_copyable_v<T>);
        const auto* p = reinterpret_cast<const std::byte*>(&v);  // little-endian host (x86-64, aarch64)
        out_.insert(out_.end(), p, p + sizeof(T));
    }
    void put_string(std::string_view s) {
        put<std::uint64_t>(s.size());
        const auto* p = reinterpret_cast<const std::byte*>(s.data());
        out_.insert(out_.end(), p, p + s.size());
    }
    void pad(std::uint64_t align) { out_.resize(pad_to(out_.size(), align), std::byte{0}); }

  private:
    std::vector<std::byte>& out_;
};

template <typename T>
T checked_uint(const Value& v, std::string_view key) {
    const auto u = v.as_uint();
    if (!u || *u > std::numeric_limits<T>::max()) {
        invalid("value of '" + std::string(key) + "' does not fit " + std::string(to_string(v.type)));
    }
    return static_cast<T>(*u);
}

template <typename T>
T checked_int(const Value& v, std::string_view key) {
    const auto i = v.as_int();
    if (!i || *i < std::numeric_limits<T>::min() || *i > std::numeric_limits<T>::max()) {
        invalid("value of '" + std::string(key) + "' does not fit " + std::string(to_string(v.type)));
    }
    return static_cast<T>(*i);
}

void put_value_body(ByteSink& s, const Value& v, std::string_view key);

void put_array(ByteSink& s, const Value& v, std::string_view key) {
    const Array* a = v.as_array();
    if (!a) invalid("value of '" + std::string(key) + "' is declared array but holds no array");
    s.put<std::uint32_t>(static_cast<std::uint32_t>(a->element_type));
    s.put<std::uint64_t>(a->items.size());
    for (const Value& item : a->items) {
        if (item.type != a->element_type) {
            invalid("array '" + std::string(key) + "' of " + std::string(to_string(a->element_type)) +
                    " holds an item of type " + std::string(to_string(item.type)));
        }
        put_value_body(s, item, key);
    }
}

void put_value_body(ByteSink& s, const Value& v, std::string_view key) {
    switch (v.type) {
        case ValueType::UINT8:
            s.put(checked_uint<std::uint8_t>(v, key));
            return;
        case ValueType::UINT16:
            s.put(checked_uint<std::uint16_t>(v, key));
            return;
        case ValueType::UINT32:
            s.put(checked_uint<std::uint32_t>(v, key));
            return;
        case ValueType::UINT64:
            s.put(checked_uint<std::uint64_t>(v, key));
            return;
        case ValueType::INT8:
            s.put(checked_int<std::int8_t>(v, key));
            return;
        case ValueType::INT16:
            s.put(checked_int<std::int16_t>(v, key));
            return;
        case ValueType::INT32:
            s.put(checked_int<std::int32_t>(v, key));
            return;
        case ValueType::INT64:
            s.put(checked_int<std::int64_t>(v, key));
            return;
        case ValueType::FLOAT32: {
            const auto f = v.as_float();
            if (!f) invalid("value of '" + std::string(key) + "' is not a number");
            if (std::isfinite(*f) && std::fabs(*f) > std::numeric_limits<float>::max()) {
                invalid("value of '" + std::string(key) + "' is out of float32 range");
            }
            s.put(static_cast<float>(*f));
            return;
        }
        case ValueType::FLOAT64: {
            const auto f = v.as_float();
            if (!f) invalid("value of '" + std::string(key) + "' is not a number");
            s.put(*f);
            return;
        }
        case ValueType::BOOL: {
            const bool* b = std::get_if<bool>(&v.data);
            if (!b) invalid("value of '" + std::string(key) + "' is declared bool but holds no bool");
            s.put<std::uint8_t>(*b ? 1 : 0);
            return;
        }
        case ValueType::STRING: {
            const std::string* str = v.as_string();
            if (!str) invalid("value of '" + std::string(key) + "' is declared string but holds no string");
            s.put_string(*str);
            return;
        }
        case ValueType::ARRAY:
            put_array(s, v, key);
            return;
    }
    invalid("value of '" + std::string(key) + "' has unknown type " +
            std::to_string(static_cast<std::uint32_t>(v.type)));
}

void check_alignment(const Model& model) {
    const std::uint64_t a = model.alignment;
    if (a == 0 || (a & (a - 1)) != 0) invalid("alignment " + std::to_string(a) + " is not a power of two");
    const Value* v = model.metadata.find("general.alignment");
    if (!v) {
        if (a != kDefaultAlignment) {
            invalid("alignment " + std::to_string(a) + " needs general.alignment (uint32) in the metadata");
        }
        return;
    }
    if (v->type != ValueType::UINT32 || v->as_uint() != a) {
        invalid("general.alignment must be uint32 " + std::to_string(a) + " (the model's alignment)");
    }
}

std::uint64_t tensor_bytes_checked(const TensorInfo& t) {
    const TypeTraits* tr = find_type(static_cast<std::uint32_t>(t.type));
    if (!tr)
        invalid("tensor '" + t.name + "' has unknown type id " + std::to_string(static_cast<int>(t.type)));
    if (!t.dims.empty() && t.dims[0] % tr->block_size != 0) {
        invalid("tensor '" + t.name + "' has " + std::to_string(t.dims[0]) +
                " elements per row, not a multiple of " + std::string(tr->name) + " block size " +
                std::to_string(tr->block_size));
    }
    const auto bytes = bytes_for(t.type, t.n_elements());
    if (!bytes || t.n_elements() == std::numeric_limits<std::uint64_t>::max()) {
        invalid("tensor '" + t.name + "' is too large");
    }
    return *bytes;
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

[[noreturn]] void io_error(const std::filesystem::path& path, const char* what) {
    throw std::system_error(errno, std::generic_category(), std::string(what) + " " + path.string());
}

void pwrite_all(int fd, const std::byte* p, std::size_t n, std::uint64_t at,
                const std::filesystem::path& path) {
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(at));
        if (w < 0) {
            if (errno == EINTR) continue;
            io_error(path, "cannot write");
        }
        p += w;
        n -= static_cast<std::size_t>(w);
        at += static_cast<std::uint64_t>(w);
    }
}

// Calls `sink(offset_in_file, chunk)` for every data chunk of every tensor.
template <typename Sink>
void for_each_data_chunk(const Model& model, const Layout& lay, const TensorDataFn& data, Sink&& sink) {
    std::vector<std::byte> buf;
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
        const TensorInfo& t = model.tensors[i];
        const std::uint64_t n = t.n_bytes();
        for (std::uint64_t pos = 0; pos < n;) {
            const std::size_t len =
                static_cast<std::size_t>(std::min<std::uint64_t>(kWriteChunkBytes, n - pos));
            buf.assign(len, std::byte{0});
            data(t, pos, std::span<std::byte>(buf.data(), len));
            sink(lay.data_offset + lay.tensor_offsets[i] + pos, std::span<const std::byte>(buf.data(), len));
            pos += len;
        }
    }
}

}  // namespace

Layout layout(const Model& model) {
    check_alignment(model);
    Layout lay;
    lay.data_offset = serialize_header(model).size();
    std::uint64_t off = 0;
    for (const TensorInfo& t : model.tensors) {
        lay.tensor_offsets.push_back(off);
        const std::uint64_t padded = pad_to(tensor_bytes_checked(t), model.alignment);
        if (off > std::numeric_limits<std::uint64_t>::max() - padded)
            invalid("data section overflows 64 bits");
        off += padded;
    }
    if (off > std::numeric_limits<std::uint64_t>::max() - lay.data_offset)
        invalid("file size overflows 64 bits");
    lay.file_size = lay.data_offset + off;
    return lay;
}

void assign_offsets(Model& model) {
    const Layout lay = layout(model);
    for (std::size_t i = 0; i < model.tensors.size(); ++i) model.tensors[i].offset = lay.tensor_offsets[i];
}

std::vector<std::byte> serialize_header(const Model& model) {
    check_alignment(model);
    std::vector<std::byte> out;
    ByteSink s(out);
    s.put(kGgufMagic);
    s.put<std::uint32_t>(3);
    s.put<std::uint64_t>(model.tensors.size());
    s.put<std::uint64_t>(model.metadata.entries().size());
    for (const KeyValue& kv : model.metadata.entries()) {
        s.put_string(kv.key);
        s.put<std::uint32_t>(static_cast<std::uint32_t>(kv.value.type));
        put_value_body(s, kv.value, kv.key);
    }
    std::uint64_t off = 0;
    for (const TensorInfo& t : model.tensors) {
        s.put_string(t.name);
        s.put<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
        for (std::uint64_t d : t.dims) s.put(d);
        s.put<std::uint32_t>(static_cast<std::uint32_t>(t.type));
        s.put(off);
        off += pad_to(tensor_bytes_checked(t), model.alignment);
    }
    s.pad(model.alignment);
    return out;
}

std::vector<std::byte> serialize(const Model& model, const TensorDataFn& data) {
    const Layout lay = layout(model);
    std::vector<std::byte> out = serialize_header(model);
    out.resize(lay.file_size, std::byte{0});
    if (data) {
        for_each_data_chunk(model, lay, data, [&out](std::uint64_t at, std::span<const std::byte> chunk) {
            std::memcpy(out.data() + at, chunk.data(), chunk.size());
        });
    }
    return out;
}

std::uint64_t write_file(const std::filesystem::path& path, const Model& model, const TensorDataFn& data) {
    const Layout lay = layout(model);
    const std::vector<std::byte> header = serialize_header(model);
    Fd f;
    f.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f.fd < 0) io_error(path, "cannot create");
    pwrite_all(f.fd, header.data(), header.size(), 0, path);
    if (data) {
        for_each_data_chunk(model, lay, data, [&](std::uint64_t at, std::span<const std::byte> chunk) {
            pwrite_all(f.fd, chunk.data(), chunk.size(), at, path);
        });
    }
    // Padding and (without `data`) all tensor data become a hole that reads as zeros.
    if (::ftruncate(f.fd, static_cast<off_t>(lay.file_size)) != 0) io_error(path, "cannot extend");
    const int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) io_error(path, "cannot close");
    return lay.file_size;
}

}  // namespace loch::gguf
