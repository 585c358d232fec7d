// gguf/reader — reads GGUF v2/v3 files (memory-mapped) into a gguf::Model, split files as one model.
//
// Everything in a file is outside input: every count, length, offset and size is bounds- and
// overflow-checked before use, and an array or string can never claim more bytes than remain, so a hostile
// file cannot make the reader allocate more than a small multiple of its own size. A file the pinned
// llama.cpp would reject (tensor offsets out of order, names of 64+ bytes, more than 4 dims) is rejected
// here too. Every problem is a FormatError naming the file, the byte offset and what was wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/model.hpp"

namespace loch::gguf {

class FormatError : public std::runtime_error {
  public:
    FormatError(std::string file, std::uint64_t offset, std::string detail);
    const std::string& file() const { return file_; }
    std::uint64_t offset() const { return offset_; }
    const std::string& detail() const { return detail_; }

  private:
    std::string file_;
    std::uint64_t offset_;
    std::string detail_;
};

// Limits that keep memory bounded on hostile input; real models stay far below them.
inline constexpr std::uint32_t kMaxArrayDepth = 8;                           // nested arrays
inline constexpr std::uint64_t kMaxMetadataValues = std::uint64_t{1} << 24;  // all array items of a file
inline constexpr std::uint64_t kMaxTensorNameBytes = 63;                     // GGML_MAX_NAME - 1
inline constexpr std::uint32_t kMaxDims = 4;                                 // GGML_MAX_DIMS
// stable-diffusion.cpp builds ggml with GGML_MAX_NAME 128: its checkpoints carry longer tensor names
// ("model.diffusion_model.output_blocks.11.1.transformer_blocks.0.attn1.to_out.0.weight").
inline constexpr std::uint64_t kMaxSdCppTensorNameBytes = 127;

struct ReadLimits {
    std::uint64_t max_tensor_name = kMaxTensorNameBytes;  // the engine's GGML_MAX_NAME - 1
};

// A read-only memory mapping of a whole file, unmapped on destruction. Throws std::system_error.
class MappedFile {
  public:
    explicit MappedFile(const std::filesystem::path& path);
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::filesystem::path& path() const { return path_; }

  private:
    void release() noexcept;

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// Parses one complete GGUF file held in memory; `name` is used in error messages and Model::files.
// Split keys are kept as metadata but other parts are not looked for. This is the fuzzer's entry point.
Model parse(std::span<const std::byte> bytes, std::string_view name = "<memory>", ReadLimits limits = {});

// A model together with the mappings of its files, for access to tensor data.
struct GgufFile {
    Model model;
    std::vector<MappedFile> maps;  // index = TensorInfo::file_index

    std::span<const std::byte> tensor_data(const TensorInfo& t) const;
};

// Opens a file; when it is one part of a split model (`NAME-0000K-of-0000N.gguf` with split.count = N),
// every part is opened and checked (split.no, split.count, split.tensors.count, no duplicate tensors), and
// the result is one model: metadata from the first part, tensors from all, file_size summed.
GgufFile open_file(const std::filesystem::path& path, ReadLimits limits = {});
Model read_model(const std::filesystem::path& path, ReadLimits limits = {});

// The model as the planner needs it, small enough to keep for as long as the config is served: the
// tokenizer's arrays (vocabulary, merges, scores: megabytes on a 150k-token vocabulary) are left out, and
// `tokenizer.ggml.tokens` holds the tokens' count in their place (plan::shape_of reads either). Not a
// model to write back.
Model for_planning(Model m);

}  // namespace loch::gguf
