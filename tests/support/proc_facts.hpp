// support/proc_facts — what /proc says of another process, for tests that check loch cleaned up after itself:
// whether it still lives (a zombie counts as gone) and how many descriptors it holds.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace loch::test {

inline bool process_alive(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) return false;
    const auto close = text.rfind(')');  // the state follows the command's closing parenthesis
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

inline int open_fds(int pid) {
    int n = 0;
    for ([[maybe_unused]] const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        ++n;
    return n;
}

}  // namespace loch::test
