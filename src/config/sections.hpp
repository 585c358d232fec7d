// config/sections — the config's small sections, each walked into its own struct (unknown keys, ranges and
// their problems reported by the walker like everywhere else): the queue limits, the client timeouts, the
// restart policy, slot saving, one device's settings, and the model settings `defaults:` and a model entry
// share. The loader (config/loader.cpp) walks the top level and the models and calls these.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config.hpp"
#include "config/walker.hpp"

namespace loch::config {

void walk_queue(Walker& w, const YAML::Node& node, const std::string& path, QueueLimits& q);
void walk_stored_responses(Walker& w, const YAML::Node& node, const std::string& path, StoredResponses& r);
void walk_client_timeouts(Walker& w, const YAML::Node& node, const std::string& path, ClientTimeouts& t);
// Also checks backoff_max ≥ backoff_initial.
void walk_restart(Walker& w, const YAML::Node& node, const std::string& path, RestartConfig& r);
void walk_slot_save(Walker& w, const YAML::Node& node, const std::string& path, SlotSaveConfig& s);
// One entry of `devices:` (reserve, budget, margin, backend); records the entry's line.
void walk_device(Walker& w, const YAML::Node& node, const std::string& path, DeviceConfig& d);
// The keys `defaults:` and a model entry share (devices, priority, keep_alive, watchdog, memory, …), each
// parsing into `m`; both must outlive the handlers.
Walker::Keys model_setting_keys(Walker& w, ModelConfig& m);

}  // namespace loch::config
