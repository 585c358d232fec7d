// broker/device_book — what the broker knows of each device besides its memory (the ledger keeps that): how
// the engines' runtimes number it (the last probe's placement), its driver's version, whether a load or a
// footprint's dry run is in flight there (one at a time per device: both allocate on it), and which model
// holds it alone (an exclusive model, while it runs a request). The broker asks; only it changes them.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engines/run.hpp"

namespace loch::broker {

class DeviceBook {
  public:
    // What a probe said of `device`: its placement for the engines (as its backend numbers it), its driver.
    void observe_placement(const std::string& device, engines::Placement where) {
        placements_[device] = std::move(where);
    }
    void observe_driver(const std::string& device, const std::string& driver) { drivers_[device] = driver; }
    // The probe's placement, else the one a device id implies without a probe (broker/never_fits.hpp).
    engines::Placement placement_of(const std::string& device) const;
    const engines::Placement* probed_placement(const std::string& device) const;
    std::string driver_of(const std::string& device) const;  // empty when never probed

    // Loads and dry runs in flight.
    void begin_loading(const std::string& device) { loading_.insert(device); }
    void end_loading(const std::string& device) { loading_.erase(device); }
    bool loading(const std::string& device) const { return loading_.contains(device); }
    bool any_loading() const { return !loading_.empty(); }
    std::vector<std::string> loading() const { return {loading_.begin(), loading_.end()}; }

    // Exclusive models: `model` holds `device` alone until it lets go of it.
    void lock(const std::string& device, const std::string& model) { locks_[device] = model; }
    void unlock(const std::string& device, const std::string& model);  // only if `model` holds it
    std::optional<std::string> holder(const std::string& device) const;
    const std::map<std::string, std::string>& locks() const { return locks_; }

  private:
    std::map<std::string, engines::Placement> placements_;  // device → as the last probe numbered it
    std::map<std::string, std::string> drivers_;            // device → its driver's version, where probed
    std::set<std::string> loading_;
    std::map<std::string, std::string> locks_;  // device → the exclusive model holding it
};

}  // namespace loch::broker
