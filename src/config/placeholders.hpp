// config/placeholders — THE grammar of a command template's placeholders, shared by the config check (at
// load time, with the entry's position) and the command kind (at launch). {host} {port} {model_path}
// {model_name} {ctx} {parallel} are replaced inside an argument; "{{" and "}}" are literal braces.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace loch::config {

// The names a template may use.
const std::vector<std::string>& command_placeholders();

// Throws std::invalid_argument naming an unknown placeholder or an unbalanced brace. A value is inserted
// as it is: it is never scanned for placeholders itself.
std::string expand_placeholders(std::string_view tmpl, const std::map<std::string, std::string>& values);

}  // namespace loch::config
