// broker/remembered — footprints remembered across restarts: the highest memory measured for one model on
// one device, per (model, its launch — settings and files —, the engine's build, the device's driver), kept
// in <state_dir>/footprints.json. At the next admission it is a candidate of the reservation rule with
// source `measured-earlier`: a server that grew to 9 GiB yesterday is reserved 9 GiB before it grows again.
// A changed setting, model file, engine binary or driver is another key (the old figure says nothing of it).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.hpp"

namespace loch::broker {

// What a remembered figure is for. Files are named by path, size and modification time.
struct FootprintKey {
    std::string model, device, kind;
    std::vector<std::string> argv;      // the launch with port 0 (settings, paths), secrets are not in it
    std::filesystem::path model_file;   // the model's path
    std::filesystem::path engine_file;  // the engine's program
    std::string driver;                 // the device's driver version; empty where unknown
};
// The key as one readable line (the JSON file's keys).
std::string key_text(const FootprintKey& k);

class RememberedFootprints {
  public:
    // `file` empty: kept in memory only. A missing or damaged file starts empty (with a warning).
    explicit RememberedFootprints(std::filesystem::path file = {});
    std::optional<MemoryFigure> get(const FootprintKey& k) const;  // Source::measured_earlier
    // Keeps `f` when it is higher; writes the file when it grew by 1 MiB or more (atomically: tmp + rename).
    void raise(const FootprintKey& k, const MemoryFigure& f);
    std::size_t size() const { return figures_.size(); }

  private:
    void save();
    std::filesystem::path file_;
    std::map<std::string, MemoryFigure> figures_;  // by key_text
    std::map<std::string, std::uint64_t> saved_;   // what the file holds
};

}  // namespace loch::broker
