// Writer → reader round trips: every value type, nested arrays, v2, sparse files, tensor data, splits.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <fstream>

#include "gguf/gguf_test_util.hpp"
#include "gguf/reader.hpp"
#include "gguf/writer.hpp"

namespace loch::gguf {
namespace {

using test::small_model;

Model all_value_types() {
    Model m;
    auto& md = m.metadata;
    md.set("u8", {ValueType::UINT8, std::uint64_t{255}});
    md.set("i8", {ValueType::INT8, std::int64_t{-128}});
    md.set("u16", {ValueType::UINT16, std::uint64_t{65535}});
    md.set("i16", {ValueType::INT16, std::int64_t{-32768}});
    md.set("u32", Value::u32(4000000000u));
    md.set("i32", Value::i32(-2000000000));
    md.set("f32", Value::f32(0.5f));
    md.set("bool", Value::boolean(true));
    md.set("str", Value::str(std::string("h\0llo \xc3\xa9", 8)));
    md.set("u64", Value::u64(18446744073709551615ull));
    md.set("i64", {ValueType::INT64, std::int64_t{-9223372036854775807ll - 1}});
    md.set("f64", {ValueType::FLOAT64, 1e300});
    md.set("arr.str", Value::array(ValueType::STRING, {Value::str("a"), Value::str(""), Value::str("ccc")}));
    md.set("arr.i32", Value::array(ValueType::INT32, {Value::i32(-1), Value::i32(7)}));
    md.set("arr.bool", Value::array(ValueType::BOOL, {Value::boolean(false), Value::boolean(true)}));
    md.set("arr.empty", Value::array(ValueType::FLOAT32, {}));
    md.set("arr.nested",
           Value::array(ValueType::ARRAY,
                        {Value::array(ValueType::UINT8, {{ValueType::UINT8, std::uint64_t{1}}}),
                         Value::array(ValueType::STRING, {Value::str("x")}),
                         Value::array(ValueType::ARRAY, {Value::array(ValueType::INT16, {})})}));
    return m;
}

void expect_same_value(const Value& a, const Value& b, const std::string& key) {
    ASSERT_EQ(a.type, b.type) << key;
    if (a.type == ValueType::ARRAY) {
        const Array* x = a.as_array();
        const Array* y = b.as_array();
        ASSERT_TRUE(x && y) << key;
        ASSERT_EQ(x->element_type, y->element_type) << key;
        ASSERT_EQ(x->items.size(), y->items.size()) << key;
        for (std::size_t i = 0; i < x->items.size(); ++i) expect_same_value(x->items[i], y->items[i], key);
        return;
    }
    EXPECT_EQ(a.data, b.data) << key;
}

TEST(GgufRoundTrip, EveryValueTypeIncludingNestedArrays) {
    const Model m = all_value_types();
    const auto bytes = serialize(m);
    const Model r = parse(bytes, "mem");
    EXPECT_EQ(r.version, 3u);
    ASSERT_EQ(r.metadata.entries().size(), m.metadata.entries().size());
    for (std::size_t i = 0; i < m.metadata.entries().size(); ++i) {
        EXPECT_EQ(r.metadata.entries()[i].key, m.metadata.entries()[i].key);
        expect_same_value(r.metadata.entries()[i].value, m.metadata.entries()[i].value,
                          m.metadata.entries()[i].key);
    }
    EXPECT_EQ(*r.metadata.find("str")->as_string(), std::string("h\0llo \xc3\xa9", 8));
    EXPECT_EQ(r.metadata.get_float("f32"), 0.5);
    // Written back byte-exact: the reader keeps on-disk types.
    EXPECT_EQ(serialize(r), bytes);
}

TEST(GgufRoundTrip, TensorsLayoutAndData) {
    const Model m = small_model();
    const Layout lay = layout(m);
    // token_embd 640 F16 = 1280 bytes; Q4_K 1024 elements = 4 blocks = 576 bytes; 64 F32 = 256 bytes.
    ASSERT_EQ(lay.tensor_offsets, (std::vector<std::uint64_t>{0, 1280, 1280 + 576}));
    EXPECT_EQ(lay.data_offset % 32, 0u);
    EXPECT_EQ(lay.file_size, lay.data_offset + 1280 + 576 + 256);

    const auto fill = [](const TensorInfo& t, std::uint64_t off, std::span<std::byte> out) {
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = std::byte(static_cast<unsigned char>(t.name.size() + off + i));
    };
    const auto bytes = serialize(m, fill);
    ASSERT_EQ(bytes.size(), lay.file_size);
    const Model r = parse(bytes);
    ASSERT_EQ(r.tensors.size(), 3u);
    EXPECT_EQ(r.data_offsets, std::vector<std::uint64_t>{lay.data_offset});
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(r.tensors[i].name, m.tensors[i].name);
        EXPECT_EQ(r.tensors[i].dims, m.tensors[i].dims);
        EXPECT_EQ(r.tensors[i].type, m.tensors[i].type);
        EXPECT_EQ(r.tensors[i].offset, lay.tensor_offsets[i]);
    }
    const auto& q = r.tensors[1];
    EXPECT_EQ(q.n_bytes(), 576u);
    EXPECT_EQ(bytes[lay.data_offset + q.offset + 5],
              std::byte(static_cast<unsigned char>(q.name.size() + 5)));
    EXPECT_EQ(r.parameter_count(), 640u + 1024 + 64);
    EXPECT_EQ(r.tensor_bytes(), 1280u + 576 + 256);
}

TEST(GgufRoundTrip, Deterministic) {
    EXPECT_EQ(serialize(small_model()), serialize(small_model()));
}

TEST(GgufRoundTrip, CustomAlignment) {
    Model m = small_model();
    m.alignment = 128;
    EXPECT_THROW(serialize(m), std::invalid_argument);  // general.alignment missing
    m.metadata.set("general.alignment", Value::u32(128));
    const Model r = parse(serialize(m));
    EXPECT_EQ(r.alignment, 128u);
    EXPECT_EQ(r.data_offsets[0] % 128, 0u);
    EXPECT_EQ(r.tensors[2].offset, 1920u);  // 1280 + 576 = 1856, padded to a multiple of 128
}

TEST(GgufRoundTrip, WriterRejectsBadModels) {
    Model m = small_model();
    m.tensors[1].dims = {100, 4};  // Q4_K rows must be multiples of 256
    EXPECT_THROW(serialize(m), std::invalid_argument);
    Model v;
    v.metadata.set("x", {ValueType::UINT8, std::uint64_t{256}});
    EXPECT_THROW(serialize(v), std::invalid_argument);
    Model a;
    a.metadata.set("x", Value::array(ValueType::UINT32, {Value::str("no")}));
    EXPECT_THROW(serialize(a), std::invalid_argument);
}

TEST(GgufRoundTrip, VersionTwoReads) {
    auto bytes = serialize(small_model());
    test::poke<std::uint32_t>(bytes, 4, 2);
    const Model r = parse(bytes);
    EXPECT_EQ(r.version, 2u);
    EXPECT_EQ(r.tensors.size(), 3u);
}

TEST(GgufRoundTrip, SparseFileOnDisk) {
    test::TempDir dir;
    Model m = small_model();
    m.tensors.push_back({"big.weight", {4096, 65536}, GgmlType::F32, 0, 0});  // 1 GiB of zeros
    const auto path = dir.path() / "sparse.gguf";
    const std::uint64_t size = write_file(path, m);
    EXPECT_EQ(std::filesystem::file_size(path), size);
    EXPECT_GT(size, 1ull << 30);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512, 1ull << 20) << "tensor data should be a hole";
    const GgufFile f = open_file(path);
    EXPECT_EQ(f.model.file_size, size);
    EXPECT_EQ(f.model.files, std::vector<std::string>{path.string()});
    const auto data = f.tensor_data(*f.model.find_tensor("big.weight"));
    EXPECT_EQ(data.size(), 1ull << 30);
    EXPECT_EQ(data[12345], std::byte{0});
}

TEST(GgufRoundTrip, FileWithDataMatchesInMemory) {
    test::TempDir dir;
    const auto fill = [](const TensorInfo&, std::uint64_t off, std::span<std::byte> out) {
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = std::byte(static_cast<unsigned char>((off + i) * 7));
    };
    const auto path = dir.path() / "m.gguf";
    write_file(path, small_model(), fill);
    std::ifstream in(path, std::ios::binary);
    std::vector<char> disk((std::istreambuf_iterator<char>(in)), {});
    const auto mem = serialize(small_model(), fill);
    ASSERT_EQ(disk.size(), mem.size());
    EXPECT_EQ(std::memcmp(disk.data(), mem.data(), mem.size()), 0);
}

// Writes a model split like llama.cpp's gguf-split: metadata in the first part, split.* keys in all.
std::vector<std::filesystem::path> write_split(const std::filesystem::path& dir, const Model& whole,
                                               std::uint16_t count, std::int32_t tensors_count_key = -1) {
    std::vector<std::filesystem::path> paths;
    for (std::uint16_t i = 0; i < count; ++i) {
        Model part;
        if (i == 0) part.metadata = whole.metadata;
        part.metadata.set("split.no", {ValueType::UINT16, std::uint64_t{i}});
        part.metadata.set("split.count", {ValueType::UINT16, std::uint64_t{count}});
        part.metadata.set(
            "split.tensors.count",
            Value::i32(tensors_count_key >= 0 ? tensors_count_key : static_cast<int>(whole.tensors.size())));
        for (std::size_t t = i; t < whole.tensors.size(); t += count)
            part.tensors.push_back(whole.tensors[t]);
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.gguf", i + 1, count);
        paths.push_back(dir / name);
        write_file(paths.back(), part);
    }
    return paths;
}

TEST(GgufRoundTrip, SplitFilesReadAsOneModel) {
    test::TempDir dir;
    const Model whole = small_model();
    const auto paths = write_split(dir.path(), whole, 3);
    for (const auto& given : paths) {  // any part opens the whole model
        const GgufFile f = open_file(given);
        EXPECT_EQ(f.model.architecture(), "llama");
        ASSERT_EQ(f.model.tensors.size(), 3u);
        EXPECT_EQ(f.model.files.size(), 3u);
        std::uint64_t total = 0;
        for (const auto& p : paths) total += std::filesystem::file_size(p);
        EXPECT_EQ(f.model.file_size, total);
        const TensorInfo* q = f.model.find_tensor("blk.0.attn_q.weight");
        ASSERT_NE(q, nullptr);
        EXPECT_EQ(q->file_index, 1u);
        EXPECT_EQ(f.tensor_data(*q).size(), 576u);
        EXPECT_EQ(f.model.parameter_count(), whole.parameter_count());
    }
}

TEST(GgufRoundTrip, SplitProblemsAreFormatErrors) {
    {
        test::TempDir dir;
        const auto paths = write_split(dir.path(), small_model(), 3);
        std::filesystem::remove(paths[2]);
        try {
            open_file(paths[0]);
            FAIL() << "missing part accepted";
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find("part 3 of 3"), std::string::npos) << e.what();
        }
    }
    {
        test::TempDir dir;
        const auto paths = write_split(dir.path(), small_model(), 2, 7);
        try {
            open_file(paths[1]);
            FAIL() << "wrong split.tensors.count accepted";
        } catch (const FormatError& e) {
            EXPECT_NE(std::string(e.what()).find("split.tensors.count is 7"), std::string::npos) << e.what();
        }
    }
    {
        test::TempDir dir;
        const auto paths = write_split(dir.path(), small_model(), 2);
        const auto renamed = dir.path() / "model.gguf";
        std::filesystem::rename(paths[0], renamed);
        EXPECT_THROW(open_file(renamed), FormatError);  // split.count 2 but no -of- name
    }
}

TEST(GgufRoundTrip, MissingFileIsSystemError) {
    EXPECT_THROW(open_file("/nonexistent/loch/model.gguf"), std::system_error);
}

}  // namespace
}  // namespace loch::gguf
