#include "gguf/reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <system_error>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

namespace loch::gguf {
namespace {

constexpr std::uint64_t kInt64Max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// Smallest encoding of one array item of each type, so that `count * min` bounds what a count can claim.
std::uint64_t min_item_bytes(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
        case ValueType::INT8:
        case ValueType::BOOL:
            return 1;
        case ValueType::UINT16:
        case ValueType::INT16:
            return 2;
        case ValueType::UINT32:
        case ValueType::INT32:
        case ValueType::FLOAT32:
            return 4;
        case ValueType::UINT64:
        case ValueType::INT64:
        case ValueType::FLOAT64:
        case ValueType::STRING:
            return 8;  // the length
        case ValueType::ARRAY:
            return 12;  // element type + count
    }
    return 1;
}

bool valid_value_type(std::uint32_t t) {
    return t <= static_cast<std::uint32_t>(ValueType::FLOAT64);
}

class Cursor {
  public:
    Cursor(std::span<const std::byte> bytes, std::string_view name) : bytes_(bytes), name_(name) {}

    std::uint64_t pos() const { return pos_; }
    std::uint64_t left() const { return bytes_.size() - pos_; }
    std::uint64_t size() const { return bytes_.size(); }

    [[noreturn]] void fail(std::uint64_t at, std::string what) const {
        throw FormatError(std::string(name_), at, std::move(what));
    }

    template <typename T>
    T read(std::string_view what) {
        if (left() < sizeof(T)) {
            fail(pos_, fmt::format("truncated: {} needs {} bytes, {} left", what, sizeof(T), left()));
        }
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(std::string_view what) {
        const std::uint64_t at = pos_;
        const auto len = read<std::uint64_t>(fmt::format("length of {}", what));
        if (len > left()) {
            fail(at, fmt::format("{} claims {} bytes, only {} left in the file", what, len, left()));
        }
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(len));
        pos_ += len;
        return s;
    }

  private:
    std::span<const std::byte> bytes_;
    std::string_view name_;
    std::uint64_t pos_ = 0;
};

class Parser {
  public:
    Parser(std::span<const std::byte> bytes, std::string_view name, ReadLimits limits)
        : c_(bytes, name), name_(name), limits_(limits) {}

    Model run() {
        Model m;
        m.file_size = c_.size();
        m.files.emplace_back(name_);
        read_header(m);
        const auto n_tensors = c_.read<std::uint64_t>("tensor count");
        const auto n_kv = c_.read<std::uint64_t>("metadata count");
        // Each key/value needs at least 13 bytes (key length, type, one byte of value), each tensor info 24.
        if (n_kv > c_.left() / 13) {
            c_.fail(16,
                    fmt::format(
                        "metadata count {} (13+ bytes each) exceeds the {} bytes left: truncated or corrupt",
                        n_kv, c_.left()));
        }
        if (n_tensors > c_.left() / 24) {
            c_.fail(8, fmt::format(
                           "tensor count {} (24+ bytes each) exceeds the {} bytes left: truncated or corrupt",
                           n_tensors, c_.left()));
        }
        read_metadata(m, n_kv);
        read_tensor_infos(m, n_tensors);
        check_tensor_data(m);
        return m;
    }

  private:
    void read_header(Model& m) {
        if (c_.size() < 4)
            c_.fail(0, fmt::format("truncated header: {} bytes, a GGUF file starts with 24", c_.size()));
        const auto magic = c_.read<std::array<unsigned char, 4>>("magic");
        if (std::memcmp(magic.data(), "GGUF", 4) != 0) {
            c_.fail(0, fmt::format("bad magic {:02x} {:02x} {:02x} {:02x}, expected 47 47 55 46 (\"GGUF\")",
                                   magic[0], magic[1], magic[2], magic[3]));
        }
        const auto version = c_.read<std::uint32_t>("version");
        if (version == 1)
            c_.fail(4, "GGUF v1 is not supported (it predates 64-bit counts); only v2 and v3 are");
        if ((version & 0xffffu) == 0 && (version == 0x02000000u || version == 0x03000000u)) {
            c_.fail(4, "big-endian GGUF is not supported; only little-endian v2 and v3 are");
        }
        if (version != 2 && version != 3)
            c_.fail(4, fmt::format("unsupported GGUF version {} (v2 and v3 are)", version));
        m.version = version;
    }

    Value read_value(ValueType type, std::uint32_t depth, const std::string& key) {
        switch (type) {
            case ValueType::UINT8:
                return {type, std::uint64_t{c_.read<std::uint8_t>(key)}};
            case ValueType::UINT16:
                return {type, std::uint64_t{c_.read<std::uint16_t>(key)}};
            case ValueType::UINT32:
                return {type, std::uint64_t{c_.read<std::uint32_t>(key)}};
            case ValueType::UINT64:
                return {type, c_.read<std::uint64_t>(key)};
            case ValueType::INT8:
                return {type, std::int64_t{c_.read<std::int8_t>(key)}};
            case ValueType::INT16:
                return {type, std::int64_t{c_.read<std::int16_t>(key)}};
            case ValueType::INT32:
                return {type, std::int64_t{c_.read<std::int32_t>(key)}};
            case ValueType::INT64:
                return {type, c_.read<std::int64_t>(key)};
            case ValueType::FLOAT32:
                return {type, double{c_.read<float>(key)}};
            case ValueType::FLOAT64:
                return {type, c_.read<double>(key)};
            case ValueType::BOOL:
                return {type, c_.read<std::uint8_t>(key) != 0};
            case ValueType::STRING:
                return {type, c_.read_string(fmt::format("string value of '{}'", key))};
            case ValueType::ARRAY:
                return read_array(depth, key);
        }
        c_.fail(c_.pos(), fmt::format("value of '{}' has unknown type", key));
    }

    Value read_array(std::uint32_t depth, const std::string& key) {
        const std::uint64_t at = c_.pos();
        if (depth >= kMaxArrayDepth) {
            c_.fail(at, fmt::format("array '{}' nests deeper than {} levels", key, kMaxArrayDepth));
        }
        const auto raw_type = c_.read<std::uint32_t>(fmt::format("element type of array '{}'", key));
        if (!valid_value_type(raw_type)) {
            c_.fail(at, fmt::format("array '{}' has unknown element type {}", key, raw_type));
        }
        const auto elem = static_cast<ValueType>(raw_type);
        const auto count = c_.read<std::uint64_t>(fmt::format("item count of array '{}'", key));
        if (count > c_.left() / min_item_bytes(elem)) {
            c_.fail(at + 4,
                    fmt::format("array '{}' claims {} items of {}, more than the {} bytes left can hold", key,
                                count, to_string(elem), c_.left()));
        }
        if (count > kMaxMetadataValues - values_) {
            c_.fail(at + 4,
                    fmt::format("array '{}' of {} items exceeds the limit of {} metadata values per file",
                                key, count, kMaxMetadataValues));
        }
        values_ += count;
        Array a{elem, {}};
        a.items.reserve(static_cast<std::size_t>(count));
        for (std::uint64_t i = 0; i < count; ++i) a.items.push_back(read_value(elem, depth + 1, key));
        return {ValueType::ARRAY, std::move(a)};
    }

    void read_metadata(Model& m, std::uint64_t n_kv) {
        std::unordered_set<std::string> seen;
        for (std::uint64_t i = 0; i < n_kv; ++i) {
            const std::uint64_t at = c_.pos();
            std::string key = c_.read_string(fmt::format("key of metadata entry {}", i));
            if (!seen.insert(key).second) c_.fail(at, fmt::format("duplicate metadata key '{}'", key));
            const std::uint64_t type_at = c_.pos();
            const auto raw_type = c_.read<std::uint32_t>(fmt::format("type of '{}'", key));
            if (!valid_value_type(raw_type)) {
                c_.fail(type_at, fmt::format("metadata '{}' has unknown value type {}", key, raw_type));
            }
            const std::uint64_t value_at = c_.pos();
            Value v = read_value(static_cast<ValueType>(raw_type), 0, key);
            if (key == "general.alignment") {
                const auto a = v.as_uint();
                if (v.type != ValueType::UINT32) {
                    c_.fail(type_at,
                            fmt::format("general.alignment must be uint32, found {}", to_string(v.type)));
                }
                if (*a == 0 || (*a & (*a - 1)) != 0) {
                    c_.fail(value_at, fmt::format("general.alignment {} is not a power of two", *a));
                }
                m.alignment = *a;
            }
            m.metadata.append(std::move(key), std::move(v));
        }
    }

    void read_tensor_infos(Model& m, std::uint64_t n_tensors) {
        std::unordered_set<std::string> seen;
        m.tensors.reserve(static_cast<std::size_t>(n_tensors));
        offset_at_.reserve(static_cast<std::size_t>(n_tensors));
        for (std::uint64_t i = 0; i < n_tensors; ++i) {
            const std::uint64_t at = c_.pos();
            TensorInfo t;
            t.name = c_.read_string(fmt::format("name of tensor {}", i));
            if (t.name.size() > limits_.max_tensor_name) {
                c_.fail(at, fmt::format("tensor {} name has {} bytes, the engine allows at most {}", i,
                                        t.name.size(), limits_.max_tensor_name));
            }
            if (!seen.insert(t.name).second) c_.fail(at, fmt::format("duplicate tensor name '{}'", t.name));
            const std::uint64_t dims_at = c_.pos();
            const auto n_dims = c_.read<std::uint32_t>(fmt::format("dimension count of '{}'", t.name));
            if (n_dims > kMaxDims) {
                c_.fail(dims_at, fmt::format("tensor '{}' has {} dimensions, at most {} allowed", t.name,
                                             n_dims, kMaxDims));
            }
            std::uint64_t n_elements = 1;
            for (std::uint32_t d = 0; d < n_dims; ++d) {
                const std::uint64_t dim_at = c_.pos();
                const auto ne = c_.read<std::uint64_t>(fmt::format("dimension {} of '{}'", d, t.name));
                if (ne > kInt64Max) {
                    c_.fail(dim_at,
                            fmt::format("tensor '{}' dimension {} is {}, larger than int64", t.name, d, ne));
                }
                if (ne != 0 && n_elements > kInt64Max / ne) {
                    c_.fail(dim_at,
                            fmt::format("tensor '{}' element count overflows int64 at dimension {} ({})",
                                        t.name, d, ne));
                }
                n_elements *= ne;
                t.dims.push_back(ne);
            }
            const std::uint64_t type_at = c_.pos();
            const auto raw_type = c_.read<std::uint32_t>(fmt::format("type of '{}'", t.name));
            const TypeTraits* tr = find_type(raw_type);
            if (!tr)
                c_.fail(type_at, fmt::format("tensor '{}' has unknown ggml type id {}", t.name, raw_type));
            t.type = tr->type;
            const std::uint64_t row = t.dims.empty() ? 1 : t.dims[0];
            if (row % tr->block_size != 0) {
                c_.fail(type_at,
                        fmt::format("tensor '{}' of type {} has {} elements per row, not a multiple of the "
                                    "block size {}",
                                    t.name, tr->name, row, tr->block_size));
            }
            if (!bytes_for(t.type, n_elements)) {
                c_.fail(type_at,
                        fmt::format("tensor '{}' of {} elements of type {}: size in bytes overflows 64 bits",
                                    t.name, n_elements, tr->name));
            }
            offset_at_.push_back(c_.pos());
            t.offset = c_.read<std::uint64_t>(fmt::format("data offset of '{}'", t.name));
            m.tensors.push_back(std::move(t));
        }
    }

    void check_tensor_data(Model& m) {
        const std::uint64_t end_of_infos = c_.pos();
        // The data section starts at the next multiple of the alignment (the pad can not overflow: the
        // position is at most the file size and the alignment a uint32).
        std::uint64_t data_offset = (end_of_infos + m.alignment - 1) / m.alignment * m.alignment;
        if (m.tensors.empty()) {
            m.data_offsets.push_back(std::min(data_offset, c_.size()));
            return;
        }
        if (data_offset > c_.size()) {
            c_.fail(end_of_infos,
                    fmt::format("data section would start at {} (aligned to {}), past the end of the "
                                "{}-byte file",
                                data_offset, m.alignment, c_.size()));
        }
        m.data_offsets.push_back(data_offset);
        const std::uint64_t data_size = c_.size() - data_offset;
        std::uint64_t expected = 0;
        for (std::size_t i = 0; i < m.tensors.size(); ++i) {
            const TensorInfo& t = m.tensors[i];
            const std::uint64_t at = offset_at_[i];
            if (t.offset % m.alignment != 0) {
                c_.fail(at, fmt::format("tensor '{}' data offset {} is not aligned to {}", t.name, t.offset,
                                        m.alignment));
            }
            const auto bytes = bytes_for(t.type, t.n_elements());  // checked while reading the info
            if (t.offset > data_size || *bytes > data_size - t.offset) {
                c_.fail(at,
                        fmt::format("tensor '{}' data [{}, +{}) lies past the end of the data section ({} "
                                    "bytes from file offset {})",
                                    t.name, t.offset, *bytes, data_size, data_offset));
            }
            if (t.offset != expected) {
                c_.fail(at,
                        fmt::format("tensor '{}' data offset {}, expected {} (llama.cpp requires tensors in "
                                    "file order, each padded to the alignment {})",
                                    t.name, t.offset, expected, m.alignment));
            }
            // Cannot overflow: offset + bytes <= data_size, and padding stays below the file size +
            // alignment.
            expected = (t.offset + *bytes + m.alignment - 1) / m.alignment * m.alignment;
        }
    }

    Cursor c_;
    std::string_view name_;
    ReadLimits limits_;
    std::uint64_t values_ = 0;
    std::vector<std::uint64_t> offset_at_;  // file offset of each tensor's offset field, for errors
};

// "dir/name-00002-of-00003.gguf" → ("dir/name", 2, 3)
struct SplitName {
    std::string prefix;
    std::uint64_t no = 0;
    std::uint64_t count = 0;
};
std::optional<SplitName> parse_split_name(const std::filesystem::path& p) {
    static const std::regex re(R"(^(.*)-([0-9]{5})-of-([0-9]{5})\.gguf$)");
    std::smatch m;
    const std::string s = p.string();
    if (!std::regex_match(s, m, re)) return std::nullopt;
    return SplitName{m[1].str(), std::stoull(m[2].str()), std::stoull(m[3].str())};
}

std::string split_path(const std::string& prefix, std::uint64_t no, std::uint64_t count) {
    return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, no, count);
}

}  // namespace

FormatError::FormatError(std::string file, std::uint64_t offset, std::string detail)
    : std::runtime_error(fmt::format("{}: at byte offset {}: {}", file, offset, detail)),
      file_(std::move(file)),
      offset_(offset),
      detail_(std::move(detail)) {}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "cannot open " + path.string());
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        throw std::system_error(e, std::generic_category(), "cannot stat " + path.string());
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw std::system_error(EINVAL, std::generic_category(), path.string() + " is not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            throw std::system_error(e, std::generic_category(), "cannot map " + path.string());
        }
        data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping stays valid without the descriptor
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

MappedFile::~MappedFile() {
    release();
}

void MappedFile::release() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

Model parse(std::span<const std::byte> bytes, std::string_view name, ReadLimits limits) {
    return Parser(bytes, name, limits).run();
}

std::span<const std::byte> GgufFile::tensor_data(const TensorInfo& t) const {
    // The reader has checked that every tensor lies inside its file.
    const auto bytes = maps.at(t.file_index).bytes();
    return bytes.subspan(model.data_offsets.at(t.file_index) + t.offset, t.n_bytes());
}

GgufFile open_file(const std::filesystem::path& path, ReadLimits limits) {
    GgufFile f;
    f.maps.emplace_back(path);
    Model first = parse(f.maps.back().bytes(), path.string(), limits);
    const Value* count_v = first.metadata.find("split.count");
    const std::uint64_t count = count_v ? count_v->as_uint().value_or(0) : 1;
    if (count_v && count == 0)
        throw FormatError(path.string(), 0, "split.count is 0 or not an unsigned integer");
    if (count <= 1) {
        f.model = std::move(first);
        return f;
    }
    const auto name = parse_split_name(path);
    if (!name || name->count != count) {
        throw FormatError(
            path.string(), 0,
            fmt::format("split.count is {} but the file name does not end in -NNNNN-of-{:05d}.gguf", count,
                        count));
    }
    // Re-open in order, starting from the first part (which holds the model's metadata).
    f.maps.clear();
    std::vector<Model> parts;
    for (std::uint64_t i = 0; i < count; ++i) {
        const std::string p = split_path(name->prefix, i + 1, count);
        try {
            f.maps.emplace_back(p);
        } catch (const std::system_error& e) {
            throw FormatError(p, 0,
                              fmt::format("part {} of {} of split model {} is missing: {}", i + 1, count,
                                          path.string(), e.what()));
        }
        parts.push_back(parse(f.maps.back().bytes(), p, limits));
        const Model& part = parts.back();
        const auto no = part.metadata.get_uint("split.no");
        const auto cnt = part.metadata.get_uint("split.count");
        if (no != i || cnt != count) {
            throw FormatError(p, 0,
                              fmt::format("split.no {} / split.count {} do not match part {} of {}",
                                          no ? std::to_string(*no) : "absent",
                                          cnt ? std::to_string(*cnt) : "absent", i, count));
        }
    }
    Model m;
    m.version = parts[0].version;
    m.metadata = std::move(parts[0].metadata);
    m.alignment = parts[0].alignment;
    std::unordered_set<std::string> seen;
    for (std::uint32_t i = 0; i < parts.size(); ++i) {
        Model& part = parts[i];
        m.files.push_back(part.files.at(0));
        m.data_offsets.push_back(part.data_offsets.at(0));
        m.file_size += part.file_size;
        for (TensorInfo& t : part.tensors) {
            if (!seen.insert(t.name).second) {
                throw FormatError(part.files.at(0), 0,
                                  fmt::format("tensor '{}' appears in more than one part", t.name));
            }
            t.file_index = i;
            m.tensors.push_back(std::move(t));
        }
    }
    if (const auto total = m.metadata.get_uint("split.tensors.count"); total && *total != m.tensors.size()) {
        throw FormatError(m.files[0], 0,
                          fmt::format("split.tensors.count is {} but the {} parts hold {} tensors", *total,
                                      count, m.tensors.size()));
    }
    f.model = std::move(m);
    return f;
}

Model read_model(const std::filesystem::path& path, ReadLimits limits) {
    return open_file(path, limits).model;
}

Model for_planning(Model m) {
    Metadata slim;
    for (auto& [key, value] : m.metadata.entries()) {
        const Array* items = value.as_array();
        if (!key.starts_with("tokenizer.") || !items) {
            slim.append(key, value);
        } else if (key == "tokenizer.ggml.tokens") {
            slim.append(key, Value::u64(items->items.size()));
        }
    }
    m.metadata = std::move(slim);
    return m;
}

}  // namespace loch::gguf
