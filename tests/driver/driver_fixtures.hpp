// What the driver's tests share: a small space, a scratch folder for study files.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace tessel::testing {

/// tests/cli/fixtures/small.tsl: 78 valid configs at N = 64.
inline std::string small_tsl() {
  return std::string(TESSEL_SOURCE_DIR) + "/tests/cli/fixtures/small.tsl";
}

/// A fresh folder under the system's temporary directory, removed with its
/// contents when the scratch goes out of scope.
class scratch {
 public:
  scratch() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("tessel_driver_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  [[nodiscard]] std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace tessel::testing
