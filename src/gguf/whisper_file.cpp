// The whisper.cpp model format: read (bounds-checked) and write (sparse zeros).
#include "gguf/whisper_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "gguf/reader.hpp"

namespace loch::gguf {

namespace {

constexpr std::uint32_t kGgmlMagic = 0x67676d6c;  // GGML_FILE_MAGIC, "ggml"
constexpr std::uint32_t kQuantVersionFactor = 1000;
constexpr std::uint32_t kFftBins = 201;
constexpr std::int32_t kTextTokens = 50257;  // GPT-2's vocabulary, the text tokens of every Whisper release
                                             // // WHISPER_N_FFT / 2 + 1, what the converters write
// Bounds that no real model comes near; they keep a hostile header from asking for absurd work.
constexpr std::int32_t kMaxDim = 1 << 20;
constexpr std::uint32_t kMaxNameBytes = 255;
constexpr std::uint32_t kMaxTensors = 1 << 16;

class GgmlCursor {
  public:
    GgmlCursor(std::span<const std::byte> b, std::string_view name) : b_(b), name_(name) {}
    std::size_t at() const { return at_; }
    std::size_t left() const { return b_.size() - at_; }
    bool done() const { return at_ == b_.size(); }
    [[noreturn]] void fail(const std::string& what) const {
        throw FormatError(std::string(name_), at_, what);
    }
    template <class T>
    T read(const char* what) {
        if (left() < sizeof(T)) fail(fmt::format("file ends inside {}", what));
        T v;
        std::memcpy(&v, b_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return v;
    }
    std::span<const std::byte> take(std::uint64_t n, const char* what) {
        if (n > left()) fail(fmt::format("{} claims {} bytes, only {} remain", what, n, left()));
        auto s = b_.subspan(at_, static_cast<std::size_t>(n));
        at_ += static_cast<std::size_t>(n);
        return s;
    }

  private:
    std::span<const std::byte> b_;
    std::string_view name_;
    std::size_t at_ = 0;
};

void put32(std::vector<std::byte>& out, std::uint32_t v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out.insert(out.end(), p, p + 4);
}

// The file as pieces: bytes to write, then a hole of zeros (a tensor's data).
struct Piece {
    std::vector<std::byte> bytes;
    std::uint64_t zeros = 0;
};

std::vector<Piece> pieces(const WhisperHparams& hp, bool with_tensors) {
    std::vector<Piece> out(1);
    auto& head = out.front().bytes;
    put32(head, kGgmlMagic);
    for (std::int32_t v :
         {hp.n_vocab, hp.n_audio_ctx, hp.n_audio_state, hp.n_audio_head, hp.n_audio_layer, hp.n_text_ctx,
          hp.n_text_state, hp.n_text_head, hp.n_text_layer, hp.n_mels, hp.ftype})
        put32(head, static_cast<std::uint32_t>(v));
    put32(head, static_cast<std::uint32_t>(hp.n_mels));
    put32(head, kFftBins);
    out.front().zeros = std::uint64_t{4} * static_cast<std::uint64_t>(hp.n_mels) * kFftBins;
    // The text tokens (GPT-2's count): the 256 single bytes, then " w<id>" words. whisper.cpp looks some up
    // by their text (" " for its blank suppression) and names the special tokens above them itself.
    Piece vocab;
    const auto n_text = static_cast<std::uint32_t>(std::min(hp.n_vocab, kTextTokens));
    put32(vocab.bytes, n_text);
    for (std::uint32_t i = 0; i < n_text; ++i) {
        const std::string tok = i < 256 ? std::string(1, static_cast<char>(i)) : fmt::format(" w{}", i);
        put32(vocab.bytes, static_cast<std::uint32_t>(tok.size()));
        const auto* t = reinterpret_cast<const std::byte*>(tok.data());
        vocab.bytes.insert(vocab.bytes.end(), t, t + tok.size());
    }
    out.push_back(std::move(vocab));
    if (!with_tensors) return out;
    for (const auto& t : whisper_tensors(hp)) {
        Piece p;
        put32(p.bytes, static_cast<std::uint32_t>(t.ne.size()));
        put32(p.bytes, static_cast<std::uint32_t>(t.name.size()));
        put32(p.bytes, static_cast<std::uint32_t>(t.type));
        for (auto d : t.ne) put32(p.bytes, static_cast<std::uint32_t>(d));
        const auto* n = reinterpret_cast<const std::byte*>(t.name.data());
        p.bytes.insert(p.bytes.end(), n, n + t.name.size());
        p.zeros = t.bytes;
        out.push_back(std::move(p));
    }
    return out;
}

}  // namespace

std::optional<GgmlType> whisper_weight_type(std::int32_t ftype) {
    if (ftype < 0) return std::nullopt;
    switch (static_cast<std::uint32_t>(ftype) % kQuantVersionFactor) {
        case 0:
            return GgmlType::F32;
        case 1:
            return GgmlType::F16;
        case 2:
            return GgmlType::Q4_0;
        case 3:
            return GgmlType::Q4_1;
        case 7:
            return GgmlType::Q8_0;
        case 8:
            return GgmlType::Q5_0;
        case 9:
            return GgmlType::Q5_1;
        case 10:
            return GgmlType::Q2_K;
        case 11:
            return GgmlType::Q3_K;
        case 12:
            return GgmlType::Q4_K;
        case 13:
            return GgmlType::Q5_K;
        case 14:
            return GgmlType::Q6_K;
        case 24:
            return GgmlType::BF16;
        default:
            return std::nullopt;
    }
}

std::optional<std::int32_t> whisper_ftype_of(GgmlType t) {
    for (std::int32_t f = 0; f < 30; ++f)
        if (whisper_weight_type(f) == t) return f == 0 || f == 1 ? f : f + 2 * kQuantVersionFactor;
    return std::nullopt;
}

std::string_view whisper_size_name(const WhisperHparams& hp) {
    switch (hp.n_audio_layer) {
        case 4:
            return "tiny";
        case 6:
            return "base";
        case 12:
            return "small";
        case 24:
            return "medium";
        case 32:
            return "large";
        default:
            return "unknown";
    }
}

bool whisper_multilingual(const WhisperHparams& hp) {
    return hp.n_vocab >= 51865;
}

std::vector<WhisperTensor> whisper_tensors(const WhisperHparams& hp) {
    const auto wtype = whisper_weight_type(hp.ftype);
    if (!wtype) throw std::invalid_argument(fmt::format("whisper.cpp refuses ftype {}", hp.ftype));
    const GgmlType vtype = *wtype == GgmlType::F32 ? GgmlType::F32 : GgmlType::F16;  // convolutions
    std::vector<WhisperTensor> out;
    const auto add = [&](std::string name, GgmlType type, std::vector<std::int64_t> ne) {
        std::uint64_t n = 1;
        for (auto d : ne) n *= static_cast<std::uint64_t>(d);
        const auto bytes = bytes_for(type, n);
        if (!bytes || ne.front() % traits(type).block_size != 0)
            throw std::invalid_argument(fmt::format("tensor {}: a row of {} does not fit {} blocks", name,
                                                    ne.front(), traits(type).name));
        out.push_back({std::move(name), type, std::move(ne), *bytes, 0});
    };
    const std::int64_t as = hp.n_audio_state, ts = hp.n_text_state;
    const auto F32 = GgmlType::F32;
    add("encoder.positional_embedding", F32, {as, hp.n_audio_ctx});
    add("encoder.conv1.weight", vtype, {3, hp.n_mels, as});
    add("encoder.conv1.bias", F32, {1, as});
    add("encoder.conv2.weight", vtype, {3, as, as});
    add("encoder.conv2.bias", F32, {1, as});
    add("encoder.ln_post.weight", F32, {as});
    add("encoder.ln_post.bias", F32, {as});
    // One attention + MLP block; `cross` adds the decoder's cross-attention.
    const auto block = [&](const std::string& p, std::int64_t s, bool cross) {
        add(p + "mlp_ln.weight", F32, {s});
        add(p + "mlp_ln.bias", F32, {s});
        add(p + "mlp.0.weight", *wtype, {s, 4 * s});
        add(p + "mlp.0.bias", F32, {4 * s});
        add(p + "mlp.2.weight", *wtype, {4 * s, s});
        add(p + "mlp.2.bias", F32, {s});
        for (const std::string a : {"attn", "cross_attn"}) {
            if (a == "cross_attn" && !cross) continue;
            add(p + a + "_ln.weight", F32, {s});
            add(p + a + "_ln.bias", F32, {s});
            add(p + a + ".query.weight", *wtype, {s, s});
            add(p + a + ".query.bias", F32, {s});
            add(p + a + ".key.weight", *wtype, {s, s});
            add(p + a + ".value.weight", *wtype, {s, s});
            add(p + a + ".value.bias", F32, {s});
            add(p + a + ".out.weight", *wtype, {s, s});
            add(p + a + ".out.bias", F32, {s});
        }
    };
    for (int i = 0; i < hp.n_audio_layer; ++i) block(fmt::format("encoder.blocks.{}.", i), as, false);
    add("decoder.positional_embedding", F32, {ts, hp.n_text_ctx});
    add("decoder.token_embedding.weight", *wtype, {ts, hp.n_vocab});
    add("decoder.ln.weight", F32, {ts});
    add("decoder.ln.bias", F32, {ts});
    for (int i = 0; i < hp.n_text_layer; ++i) block(fmt::format("decoder.blocks.{}.", i), ts, true);
    return out;
}

bool is_whisper_file(std::span<const std::byte> head) {
    std::uint32_t m = 0;
    if (head.size() < 4) return false;
    std::memcpy(&m, head.data(), 4);
    return m == kGgmlMagic;
}

WhisperFile parse_whisper(std::span<const std::byte> bytes, std::string_view name) {
    GgmlCursor c(bytes, name);
    WhisperFile f;
    f.name = std::string(name);
    f.file_size = bytes.size();
    if (c.read<std::uint32_t>("the magic") != kGgmlMagic) c.fail("not a whisper.cpp model (bad magic)");
    auto& hp = f.hp;
    for (std::int32_t* v :
         {&hp.n_vocab, &hp.n_audio_ctx, &hp.n_audio_state, &hp.n_audio_head, &hp.n_audio_layer,
          &hp.n_text_ctx, &hp.n_text_state, &hp.n_text_head, &hp.n_text_layer, &hp.n_mels}) {
        *v = c.read<std::int32_t>("the hyper-parameters");
        if (*v <= 0 || *v > kMaxDim) c.fail(fmt::format("a hyper-parameter of {} is out of range", *v));
    }
    hp.ftype = c.read<std::int32_t>("ftype");
    if (!whisper_weight_type(hp.ftype))
        c.fail(fmt::format("ftype {} is not one whisper.cpp reads", hp.ftype));
    if (hp.n_text_state != hp.n_audio_state)
        c.fail(fmt::format("n_text_state {} differs from n_audio_state {} (whisper.cpp asserts they match)",
                           hp.n_text_state, hp.n_audio_state));
    f.mel_filters = c.read<std::uint32_t>("the filter bank's n_mel");
    f.fft_bins = c.read<std::uint32_t>("the filter bank's n_fft");
    c.take(std::uint64_t{4} * f.mel_filters * f.fft_bins, "the filter bank");
    f.vocab_tokens = c.read<std::uint32_t>("the vocabulary size");
    for (std::uint32_t i = 0; i < f.vocab_tokens; ++i)
        c.take(c.read<std::uint32_t>("a token's length"), "a token");
    while (!c.done()) {
        if (f.tensors.size() >= kMaxTensors) c.fail("more tensors than any whisper model has");
        WhisperTensor t;
        const auto n_dims = c.read<std::int32_t>("a tensor's n_dims");
        const auto length = c.read<std::int32_t>("a tensor's name length");
        const auto ttype = c.read<std::int32_t>("a tensor's type");
        if (n_dims < 1 || n_dims > 4) c.fail(fmt::format("a tensor has {} dims (1-4)", n_dims));
        if (length < 1 || static_cast<std::uint32_t>(length) > kMaxNameBytes)
            c.fail(fmt::format("a tensor name of {} bytes", length));
        const TypeTraits* tt = ttype >= 0 ? find_type(static_cast<std::uint32_t>(ttype)) : nullptr;
        if (!tt) c.fail(fmt::format("unknown tensor type {}", ttype));
        t.type = tt->type;
        std::uint64_t n = 1;
        for (int i = 0; i < n_dims; ++i) {
            const auto d = c.read<std::int32_t>("a tensor's dims");
            if (d < 1 || d > kMaxDim * 64) c.fail(fmt::format("a tensor dimension of {}", d));
            t.ne.push_back(d);
            if (static_cast<std::uint64_t>(d) > (std::uint64_t{1} << 40) / n)
                c.fail("a tensor of more than 2^40 elements");
            n *= static_cast<std::uint64_t>(d);
        }
        const auto nm = c.take(static_cast<std::uint64_t>(length), "a tensor's name");
        t.name.assign(reinterpret_cast<const char*>(nm.data()), nm.size());
        const auto b = bytes_for(t.type, n);
        if (!b) c.fail(fmt::format("tensor '{}': {} elements are not whole {} blocks", t.name, n, tt->name));
        t.bytes = *b;
        t.data_offset = c.at();
        c.take(t.bytes, "a tensor's data");
        f.tensors.push_back(std::move(t));
    }
    return f;
}

WhisperFile read_whisper(const std::filesystem::path& path) {
    MappedFile m(path);
    return parse_whisper(m.bytes(), path.string());
}

std::vector<std::byte> serialize_whisper(const WhisperHparams& hp, bool with_tensors) {
    std::vector<std::byte> out;
    for (const auto& p : pieces(hp, with_tensors)) {
        out.insert(out.end(), p.bytes.begin(), p.bytes.end());
        out.resize(out.size() + static_cast<std::size_t>(p.zeros), std::byte{0});
    }
    return out;
}

std::uint64_t write_whisper(const std::filesystem::path& path, const WhisperHparams& hp, bool with_tensors) {
    const auto all = pieces(hp, with_tensors);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const auto fail = [&](const char* what) {
        const int e = errno;
        if (fd >= 0) ::close(fd);
        throw std::system_error(e, std::generic_category(), fmt::format("{}: {}", path.string(), what));
    };
    if (fd < 0) fail("cannot create");
    std::uint64_t at = 0;
    for (const auto& p : all) {
        std::size_t done = 0;
        while (done < p.bytes.size()) {
            const auto n =
                ::pwrite(fd, p.bytes.data() + done, p.bytes.size() - done, static_cast<off_t>(at + done));
            if (n <= 0) fail("cannot write");
            done += static_cast<std::size_t>(n);
        }
        at += p.bytes.size() + p.zeros;  // the zeros stay a hole
    }
    if (::ftruncate(fd, static_cast<off_t>(at)) != 0) fail("cannot extend");
    if (::close(fd) != 0) throw std::system_error(errno, std::generic_category(), path.string() + ": close");
    return at;
}

}  // namespace loch::gguf
