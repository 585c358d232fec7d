// Every class of malformed input is a FormatError that names the byte offset of the problem.
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf_test_util.hpp"
#include "gguf/reader.hpp"
#include "gguf/writer.hpp"

namespace loch::gguf {
namespace {

// Builds GGUF bytes by hand, field by field, so that each field can be wrong.
class Raw {
  public:
    Raw(std::uint64_t n_tensors, std::uint64_t n_kv, std::uint32_t version = 3) {
        for (char c : std::string_view("GGUF")) b.push_back(std::byte(c));
        u32(version).u64(n_tensors).u64(n_kv);
    }
    Raw& u32(std::uint32_t v) { return test::append(b, v), *this; }
    Raw& u64(std::uint64_t v) { return test::append(b, v), *this; }
    Raw& str(std::string_view s) { return test::append_str(b, s), *this; }
    Raw& kv_u32(std::string_view key, std::uint32_t v) { return str(key).u32(4).u32(v); }
    Raw& tensor(std::string_view name, std::vector<std::uint64_t> dims, std::uint32_t type,
                std::uint64_t offset) {
        str(name).u32(static_cast<std::uint32_t>(dims.size()));
        for (auto d : dims) u64(d);
        return u32(type).u64(offset);
    }
    Raw& pad(std::size_t align) {
        b.resize((b.size() + align - 1) / align * align);
        return *this;
    }
    Raw& zeros(std::size_t n) {
        b.resize(b.size() + n);
        return *this;
    }
    std::size_t pos() const { return b.size(); }
    std::vector<std::byte> b;
};

// Parses and returns the FormatError; fails the test when parsing succeeds or throws something else.
FormatError parse_error(const std::vector<std::byte>& bytes) {
    try {
        parse(bytes, "bad.gguf");
    } catch (const FormatError& e) {
        return e;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a FormatError: " << e.what();
        return FormatError("", 0, "");
    }
    ADD_FAILURE() << "malformed input accepted";
    return FormatError("", 0, "");
}

void expect_error(const std::vector<std::byte>& bytes, std::uint64_t offset, std::string_view words) {
    const FormatError e = parse_error(bytes);
    EXPECT_EQ(e.offset(), offset) << e.what();
    EXPECT_NE(e.detail().find(words), std::string::npos) << e.what();
    EXPECT_EQ(e.file(), "bad.gguf");
    EXPECT_NE(std::string(e.what()).find("offset " + std::to_string(offset)), std::string::npos) << e.what();
}

TEST(GgufMalformed, TruncatedHeader) {
    expect_error({}, 0, "truncated header");
    Raw r(0, 0);
    for (std::size_t n : {4u, 6u, 8u, 15u, 23u}) {
        std::vector<std::byte> cut(r.b.begin(), r.b.begin() + n);
        const FormatError e = parse_error(cut);
        EXPECT_NE(e.detail().find("truncated"), std::string::npos) << e.what();
        EXPECT_EQ(e.offset(), n < 8 ? 4u : n < 16 ? 8u : 16u) << e.what();
    }
}

TEST(GgufMalformed, BadMagicAndVersions) {
    Raw r(0, 0);
    r.b[3] = std::byte{'L'};
    expect_error(r.b, 0, "bad magic");
    expect_error(Raw(0, 0, 1).b, 4, "v1 is not supported");
    expect_error(Raw(0, 0, 4).b, 4, "unsupported GGUF version 4");
    expect_error(Raw(0, 0, 0x03000000).b, 4, "big-endian");
}

TEST(GgufMalformed, HugeCounts) {
    expect_error(Raw(0, 1ull << 62).b, 16, "metadata count");
    expect_error(Raw(1ull << 40, 0).b, 8, "tensor count");
    Raw arr(0, 1);
    arr.str("a").u32(9).u32(0 /* uint8 */);
    const std::size_t count_at = arr.pos();
    arr.u64(1ull << 40).zeros(64);
    expect_error(arr.b, count_at, "claims 1099511627776 items");
    Raw strs(0, 1);
    strs.str("s").u32(9).u32(8 /* string */);
    const std::size_t scount_at = strs.pos();
    strs.u64(100).zeros(100 * 8 - 1);  // 100 strings need at least 800 bytes
    expect_error(strs.b, scount_at, "more than the 799 bytes left");
}

TEST(GgufMalformed, StringPastEnd) {
    Raw key(0, 1);
    key.u64(1000).zeros(5);
    expect_error(key.b, 24, "claims 1000 bytes, only 5 left");
    Raw val(0, 1);
    val.str("k").u32(8);
    const std::size_t at = val.pos();
    val.u64(~0ull).zeros(3);
    expect_error(val.b, at, "string value of 'k' claims 18446744073709551615 bytes");
    Raw name(1, 0);
    const std::size_t name_at = name.pos();
    name.u64(64).zeros(30);
    expect_error(name.b, name_at, "name of tensor 0");
}

TEST(GgufMalformed, TensorDataPastEnd) {
    auto bytes = serialize(test::small_model());
    bytes.resize(bytes.size() - 100);
    const std::string_view name = "output_norm.weight";
    const auto it = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(name.data()),
                                reinterpret_cast<const std::byte*>(name.data()) + name.size());
    ASSERT_NE(it, bytes.end());
    const std::size_t offset_field = static_cast<std::size_t>(it - bytes.begin()) + name.size() + 4 + 8 + 4;
    expect_error(bytes, offset_field, "'output_norm.weight' data [1856, +256) lies past the end");

    Raw huge(1, 0);
    const std::size_t at = huge.tensor("t", {8}, 0, 0).pos() - 8;
    huge.pad(32).zeros(16);
    expect_error(huge.b, at, "past the end");
    Raw wrap(1, 0);  // offset + size wraps around 2^64
    const std::size_t wat = wrap.tensor("t", {8}, 0, ~0ull - 31).pos() - 8;
    wrap.pad(32).zeros(64);
    expect_error(wrap.b, wat, "past the end");
}

TEST(GgufMalformed, UnknownTypeIds) {
    Raw t(1, 0);
    const std::size_t at = t.str("t").u32(1).u64(32).pos();
    t.u32(4).u64(0).pad(32).zeros(64);
    expect_error(t.b, at, "unknown ggml type id 4");
    Raw v(0, 1);
    const std::size_t vat = v.str("k").pos();
    v.u32(13).u32(0);
    expect_error(v.b, vat, "unknown value type 13");
    Raw a(0, 1);
    const std::size_t aat = a.str("k").u32(9).pos();
    a.u32(77).u64(0);
    expect_error(a.b, aat, "unknown element type 77");
}

TEST(GgufMalformed, OverflowingDims) {
    Raw r(1, 0);
    r.str("t").u32(3).u64(1ull << 31).u64(1ull << 31);
    const std::size_t at = r.pos();
    r.u64(4).u32(0).u64(0).pad(32);
    expect_error(r.b, at, "element count overflows int64 at dimension 2");
    Raw neg(1, 0);
    const std::size_t nat = neg.str("t").u32(1).pos();
    neg.u64(~0ull).u32(0).u64(0).zeros(8);
    expect_error(neg.b, nat, "larger than int64");
    Raw bytes(1, 0);  // 2^62 elements of f64 fit int64 but not 64-bit bytes
    const std::size_t type_at = bytes.str("t").u32(2).u64(1ull << 31).u64(1ull << 31).pos();
    bytes.u32(28).u64(0).pad(32);
    expect_error(bytes.b, type_at, "size in bytes overflows 64 bits");
    Raw many(1, 0);
    const std::size_t mat = many.str("t").pos();
    many.u32(5).zeros(40);
    expect_error(many.b, mat, "5 dimensions");
}

TEST(GgufMalformed, MisalignedAndOutOfOrder) {
    Raw r(1, 0);
    const std::size_t at = r.tensor("t", {8}, 0, 16).pos() - 8;
    r.pad(32).zeros(64);
    expect_error(r.b, at, "data offset 16 is not aligned to 32");
    Raw gap(2, 0);
    gap.tensor("a", {8}, 0, 0);
    const std::size_t gat = gap.tensor("b", {8}, 0, 64).pos() - 8;
    gap.pad(32).zeros(128);
    expect_error(gap.b, gat, "data offset 64, expected 32");
    Raw rows(1, 0);
    const std::size_t rat = rows.str("q").u32(1).u64(100).pos();
    rows.u32(12).u64(0);
    expect_error(rows.b, rat, "not a multiple of the block size 256");
}

TEST(GgufMalformed, BadAlignmentKey) {
    Raw zero(0, 1);
    zero.str("general.alignment").u32(4);
    const std::size_t at = zero.pos();
    zero.u32(48);
    expect_error(zero.b, at, "48 is not a power of two");
    Raw type(0, 1);
    const std::size_t tat = type.str("general.alignment").pos();
    type.u32(10).u64(32);
    expect_error(type.b, tat, "must be uint32");
}

TEST(GgufMalformed, DuplicatesNamesAndNesting) {
    Raw dup(0, 2);
    dup.kv_u32("k", 1);
    const std::size_t at = dup.pos();
    dup.kv_u32("k", 2);
    expect_error(dup.b, at, "duplicate metadata key 'k'");
    Raw dt(2, 0);
    dt.tensor("t", {8}, 0, 0);
    const std::size_t dat = dt.pos();
    dt.tensor("t", {8}, 0, 32).pad(32).zeros(64);
    expect_error(dt.b, dat, "duplicate tensor name 't'");
    Raw longname(1, 0);
    longname.tensor(std::string(64, 'x'), {8}, 0, 0).pad(32).zeros(32);
    expect_error(longname.b, 24, "64 bytes, the engine allows at most 63");
    Raw deep(0, 1);
    deep.str("k").u32(9);
    for (int i = 0; i < 9; ++i) deep.u32(9).u64(1);
    deep.u32(0).u64(0);
    const FormatError e = parse_error(deep.b);
    EXPECT_NE(e.detail().find("nests deeper than 8"), std::string::npos) << e.what();
}

TEST(GgufMalformed, EveryTruncationOfAValidFileFailsCleanly) {
    Model m = test::small_model();
    m.metadata.set("arr", Value::array(ValueType::STRING, {Value::str("a"), Value::str("bc")}));
    const auto bytes = serialize(m);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_THROW(parse(cut), FormatError) << "prefix of " << n << " bytes";
    }
    EXPECT_NO_THROW(parse(bytes));
}

}  // namespace
}  // namespace loch::gguf
