// engines/command — the generic adapter: any OpenAI-compatible server started from an argv template.
// Placeholders {host} {port} {model_path} {model_name} {ctx} {parallel} are replaced inside each argument;
// "{{" / "}}" are literal braces. No shell ever sees the result: each template entry is one argv entry.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "engines/spec.hpp"

namespace loch::engines {

// Throws std::invalid_argument naming an unknown placeholder or an unbalanced brace.
std::string expand_placeholders(std::string_view tmpl, const std::map<std::string, std::string>& values);

// The placeholder names a template may use.
const std::vector<std::string>& command_placeholders();

std::vector<std::string> command_argv(const config::ModelConfig& model, const LaunchOptions& launch);

}  // namespace loch::engines
