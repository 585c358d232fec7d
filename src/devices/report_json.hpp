// devices/report_json — the JSON shape of `loch devices --json` (and of the broker's /devices endpoint):
// exact bytes with their source for every figure, {"unknown": "<why>"} for figures that could not be read.
#pragma once

#include <nlohmann/json.hpp>

#include "devices/device.hpp"

namespace loch::devices {

nlohmann::json to_json(const ProbedFigure& f);
nlohmann::json to_json(const Device& d);
nlohmann::json to_json(const SystemInfo& s);
nlohmann::json to_json(const DeviceReport& r);

}  // namespace loch::devices
