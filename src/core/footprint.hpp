// core/footprint — what a model needs on each device it may run on: the vocabulary shared by the engine kinds
// (which estimate it) and the broker (which reserves it). Every figure carries its source (core/memory.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.hpp"

namespace loch {

// What the model would need on one allowed device, and how that splits (for "what would help").
struct Need {
    std::string device;
    std::uint64_t bytes = 0;
    std::uint64_t weights_bytes = 0;  // model tensors on this device
    std::uint64_t kv_bytes = 0;       // KV cache for ctx × slots
    std::uint64_t ctx = 0;            // total context (all slots)
    std::uint32_t slots = 1;
    std::uint32_t layers = 0;  // repeating layers (for the CPU-layers hint)
    Source source = Source::formula;
    std::string why;  // how `bytes` was decided (the reservation rule's candidates)
    // What the engine also keeps in the host's RAM when it runs on this (discrete) device: components its
    // flags keep on the CPU (sd.offload_to_cpu, clip_on_cpu, vae_on_cpu). Booked on `cpu` beside `bytes`
    // under the same holder, and admitted with it: a GPU engine that loads 24 GiB into RAM must not start
    // beside a CPU model that needs that RAM. 0 on the CPU itself and on unified devices (one pool: in
    // `bytes`).
    std::uint64_t host_bytes = 0;
    std::string host_why;
};

struct Footprint {
    std::vector<Need> needs;  // one per allowed device, preference order
    Source source = Source::formula;
    std::string detail;  // how it was obtained, or why a better source was not used
};

// The reservation rule's arithmetic for one device (pure; unit-tested): the largest candidate wins and
// names its source; `detail` lists them all.
struct Candidate {
    std::string what;  // "formula", "dry run + overhead", "measured peak"
    MemoryFigure figure;
};
MemoryFigure largest_of(const std::vector<Candidate>& candidates);

}  // namespace loch
