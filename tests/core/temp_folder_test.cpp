// tests/temp_folder.hpp, the private folder every test that writes files
// uses: fresh, empty and distinct for each one made, removed with what it
// holds when it goes.
#include "temp_folder.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using tessel::testing::temp_folder;
namespace fs = std::filesystem;

TEST_CASE("temp_folder: each is a fresh empty folder of its own, under TMPDIR, named by prefix") {
  std::set<fs::path> seen;
  {
    const temp_folder a, b("tessel-temp-folder-test");
    for (const auto* f : {&a, &b}) {
      CHECK(fs::is_directory(f->path()));
      CHECK(fs::is_empty(f->path()));
      CHECK(fs::equivalent(f->path().parent_path(), fs::temp_directory_path()));
      CHECK(f->file("x") == f->path() / "x");
      seen.insert(f->path());
    }
    CHECK(a.path() != b.path());
    CHECK(a.path().filename().string().starts_with("tessel-test-"));
    CHECK(b.path().filename().string().starts_with("tessel-temp-folder-test-"));
    std::ofstream(a.file("file")) << "bytes";
    fs::create_directories(a.file("sub/deeper"));
    std::ofstream(a.file("sub/deeper/file")) << "bytes";
  }
  for (const auto& p : seen) CHECK(!fs::exists(p));  // removed, contents and all
}
