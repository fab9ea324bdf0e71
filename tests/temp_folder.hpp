// A private folder for a test, removed with all it holds when the test is
// done: what every test that writes files uses instead of a fixed name under
// the temporary directory (which ctest -j, or two checkouts on one machine,
// would share).
#pragma once

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

#ifdef _WIN32
#include <process.h>
#else
#include <unistd.h>
#endif

namespace tessel::testing {

/// A fresh empty folder under the system's temporary directory (TMPDIR),
/// named `<prefix>-<pid>-<n>-<random>` with n counting the folders this
/// process made: unique across processes and within one, and made with
/// create_directory, so a name already taken is never reused. Removed with its
/// contents when it goes out of scope (errors ignored). Not copyable or
/// movable: one owner removes it.
class temp_folder {
 public:
  explicit temp_folder(std::string_view prefix = "tessel-test") {
    static std::atomic<unsigned> made{0};
    std::random_device device;
    const auto base = std::filesystem::temp_directory_path();
    do {
      path_ = base / (std::string(prefix) + "-" + std::to_string(pid()) + "-" +
                      std::to_string(made++) + "-" + std::to_string(device()));
    } while (!std::filesystem::create_directory(path_));
  }
  ~temp_folder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// path() / name (not created).
  [[nodiscard]] std::filesystem::path file(const std::string& name) const { return path_ / name; }

 private:
  static long pid() {
#ifdef _WIN32
    return _getpid();
#else
    return ::getpid();
#endif
  }

  std::filesystem::path path_;
};

}  // namespace tessel::testing
