// doctor/finding_lookup — a finding by its id in what `diagnose` said (the doctor suites' one lookup).
#pragma once

#include <string_view>
#include <vector>

#include "doctor/doctor.hpp"

namespace loch::doctor {

inline const Finding* find(const std::vector<Finding>& fs, std::string_view id) {
    for (const auto& f : fs)
        if (f.id == id) return &f;
    return nullptr;
}

}  // namespace loch::doctor
