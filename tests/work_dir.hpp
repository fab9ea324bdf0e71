// Where a test writes what the build gave it a folder for (the cpu tests'
// compile caches, the cli tests' work folder): that folder in the build tree,
// or, when TESSEL_TEST_WORK_DIR is set, the folder of the same path under it.
// The non-root pass of scripts/test (scripts/test_nonroot, docs/testing.md)
// sets it: its user may read root's build tree but not write in it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

// Not in namespace tessel: the cli tests name the tool's runner `tessel(...)`
// and see no namespace of that name.
namespace test_dirs {

/// `built_in`, an absolute path the build chose; or, when TESSEL_TEST_WORK_DIR
/// is set and not empty, that path under it ($TESSEL_TEST_WORK_DIR/home/u/
/// tessel/build/ci/tests/cpu/cpu-cache), created if missing. Throws
/// std::filesystem::filesystem_error when it cannot be created.
inline std::string work_dir(const std::string& built_in) {
  namespace fs = std::filesystem;
  const char* root = std::getenv("TESSEL_TEST_WORK_DIR");  // NOLINT(concurrency-mt-unsafe)
  if (root == nullptr || *root == 0) return built_in;
  const auto dir = fs::path(root) / fs::path(built_in).relative_path();
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace test_dirs
