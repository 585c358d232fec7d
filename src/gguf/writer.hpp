// gguf/writer — serializes a gguf::Model as a GGUF v3 file that the pinned llama.cpp loads.
//
// Layout is llama.cpp's: header, metadata, tensor infos, padding to `alignment`, then each tensor's data in
// order, each padded to `alignment` (tensor offsets are assigned here, the ones in the Model are ignored).
// Tensor data come from a callback in chunks, or are left out: the file is then extended with ftruncate,
// which makes a sparse file of zeros (valid data for every float and quantized type), so a 70B-shaped
// model costs only its header on disk. Output is deterministic: same Model and data ⇒ same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

#include "gguf/model.hpp"

namespace loch::gguf {

// Fills `out` with bytes [offset, offset + out.size()) of tensor `t`'s data. Called in tensor order, with
// chunks of at most kWriteChunkBytes, ascending offsets.
using TensorDataFn = std::function<void(const TensorInfo& t, std::uint64_t offset, std::span<std::byte> out)>;
inline constexpr std::size_t kWriteChunkBytes = std::size_t{4} << 20;

struct Layout {
    std::uint64_t data_offset = 0;              // where the data section starts (aligned)
    std::uint64_t file_size = 0;                // total bytes of the file
    std::vector<std::uint64_t> tensor_offsets;  // relative to data_offset, one per tensor
};

// Throws std::invalid_argument when the model cannot be written: a tensor whose row is not a multiple of
// its type's block size, a metadata value that does not fit its declared type, an array item whose type
// differs from the array's, or an alignment that is not a power of two or disagrees with general.alignment
// (which must be present as uint32 when alignment is not the default 32).
Layout layout(const Model& model);
// Sets each tensor's offset to the one the writer will use (handy for models built in memory).
void assign_offsets(Model& model);

// Whole file in memory (tests, fuzz seeds, small models); `data` empty ⇒ zeros.
std::vector<std::byte> serialize(const Model& model, const TensorDataFn& data = {});
// Header and metadata only, padded to the data section (Layout::data_offset bytes).
std::vector<std::byte> serialize_header(const Model& model);

// Writes the file and returns its size. Without `data` the tensor data are a sparse hole of zeros.
// I/O failures throw std::system_error naming the path.
std::uint64_t write_file(const std::filesystem::path& path, const Model& model,
                         const TensorDataFn& data = {});

}  // namespace loch::gguf
