// Test helpers: the committed sysroot fixtures (tests/data/sysroots/<name>) and scratch copies of them that a
// test can alter file by file. Shared by tests/devices and tests/doctor.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace loch::testing {

inline std::filesystem::path sysroot_fixture(std::string_view name) {
    return std::filesystem::path(LOCH_TEST_DATA_DIR) / "sysroots" / std::string(name);
}

// A private copy of a fixture tree under the temp dir, removed at the end of the test.
class ScratchSysroot {
  public:
    explicit ScratchSysroot(std::string_view fixture) {
        static int counter = 0;
        dir_ = std::filesystem::temp_directory_path() /
               ("loch-sysroot-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(dir_);
        std::filesystem::copy(sysroot_fixture(fixture), dir_, std::filesystem::copy_options::recursive);
    }
    ~ScratchSysroot() {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    ScratchSysroot(const ScratchSysroot&) = delete;
    ScratchSysroot& operator=(const ScratchSysroot&) = delete;

    const std::filesystem::path& path() const { return dir_; }
    void write(std::string_view abs_path, std::string_view content) const {
        const auto p = dir_ / std::filesystem::path(std::string(abs_path.substr(1)));
        std::filesystem::create_directories(p.parent_path());
        std::ofstream(p, std::ios::binary) << content;
    }
    void remove(std::string_view abs_path) const {
        std::filesystem::remove_all(dir_ / std::filesystem::path(std::string(abs_path.substr(1))));
    }

  private:
    std::filesystem::path dir_;
};

}  // namespace loch::testing
