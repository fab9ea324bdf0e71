// The cpu backend's compile cache and the files a compile read: a kernel
// that includes a header of its own folder, the header edited, broken,
// removed and put back between evaluations, and the loader's own build. A
// cached build is reused only while every file its compile read is what it
// was (docs/cpu.md, "What is measured": the compile cache).
#include "cache_fixtures.hpp"
#include "temp_folder.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;
using namespace tessel::testing;

}  // namespace

TEST_CASE("cpu cache: an edited, broken or removed header of the kernel is compiled again") {
  const testing::temp_folder folder("tessel-cpu-header");
  write(folder.path() / "scaled.cpp", scaled_kernel);
  write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
  const auto s = one_config_space();
  const auto c = s.from_json(R"({"us": 1})");
  cpu_backend b(scaled_options(folder.path()));
  b.prepare(s);
  const auto evaluate = [&](status expected, int cached) {
    const auto m = b.evaluate(s, c);
    INFO(m.message);
    CHECK(m.status == expected);
    CHECK(m.metrics.at("compile_cached") == cached);
    CHECK((m.cost.compile_s > 0) == (cached == 0));  // a hit runs no compiler
    return m;
  };

  (void)evaluate(status::ok, 0);
  SUBCASE("an unchanged header is a hit, even touched") {
    (void)evaluate(status::ok, 1);
    write(folder.path() / "scale.hpp",
          "#define TESSEL_TEST_SCALE 2.0f\n");  // same bytes, new times
    (void)evaluate(status::ok, 1);
  }
  SUBCASE("an edited header is compiled again: y = 3 x is caught") {
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 3.0f\n");
    (void)evaluate(status::incorrect, 0);
    (void)evaluate(status::incorrect, 1);
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");  // and back
    (void)evaluate(status::ok, 0);
  }
  SUBCASE("a broken header is a compile error, cached until it is fixed") {
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\nint broken_here = ;\n");
    const auto m = evaluate(status::compile_error, 0);
    CHECK(m.message.find("scale.hpp") != std::string::npos);
    (void)evaluate(status::compile_error, 1);
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
    (void)evaluate(status::ok, 0);
  }
  SUBCASE("a removed header is a compile error naming it, never the stale build") {
    fs::remove(folder.path() / "scale.hpp");
    const auto m = evaluate(status::compile_error, 0);
    CHECK(m.message.find("scale.hpp") != std::string::npos);
    (void)evaluate(status::compile_error, 0);  // no dependency list: not cached
    // Put back as it was: every file of the first build is again what it read.
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
    (void)evaluate(status::ok, 1);
  }
}

TEST_CASE("cpu cache: a reference's edited header is compiled again") {
  const testing::temp_folder folder("tessel-cpu-reference");
  write(folder.path() / "scaled.cpp", scaled_kernel);
  write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
  auto o = scaled_options(folder.path());
  o.kernel = kernels_dir + "/kernels.cpp:twice";  // y = 2 x against y = SCALE x
  o.reference = (folder.path() / "scaled.cpp").string() + ":scaled";
  const auto s = one_config_space();
  const auto c = s.from_json(R"({"us": 1})");
  const auto evaluate = [&] {
    cpu_backend b(o);
    b.prepare(s);
    return b.evaluate(s, c);
  };
  CHECK(evaluate().status == status::ok);
  // The reference built from the old header would still say 2 x.
  write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 3.0f\n");
  const auto m = evaluate();
  INFO(m.message);
  CHECK(m.status == status::incorrect);
}

TEST_CASE("cpu cache: the loader is rebuilt when a header it read is not what it was") {
  const testing::temp_folder cache("tessel-cpu-loader");
  auto o = scaled_options(cache.path());
  o.kernel = kernels_dir + "/kernels.cpp:twice";
  o.cache_dir = (cache.path() / "cache").string();
  const auto s = one_config_space();
  cpu_backend(o).prepare(s);
  const auto manifest = only_file(o.cache_dir, "loader-", ".manifest");
  auto text = read_file(manifest);
  const auto loader = named_by(manifest);  // the build the manifest is of
  REQUIRE(fs::is_regular_file(loader));
  const auto line = text.find("/tessel/loop_rule.hpp\n");
  REQUIRE(line != std::string::npos);
  const auto start = text.rfind('\n', line) + 1;
  struct stat before {};
  REQUIRE(::stat(loader.c_str(), &before) == 0);

  cpu_backend(o).prepare(s);  // every file as it was: the same build
  struct stat same {};
  REQUIRE(::stat(loader.c_str(), &same) == 0);
  CHECK(same.st_ino == before.st_ino);

  // As if another process had written another loop_rule.hpp after this
  // build read it: the manifest's hash no longer matches what is there.
  text[start] = text[start] == '0' ? '1' : '0';
  write(manifest, text);
  cpu_backend(o).prepare(s);
  struct stat after {};
  REQUIRE(::stat(loader.c_str(), &after) == 0);
  CHECK(after.st_ino != before.st_ino);  // built again (the same files: the same name)
}

TEST_CASE("cpu cache: backends building the same loader and kernel at once leave one of each") {
  const testing::temp_folder folder("tessel-cpu-parallel");
  write(folder.path() / "scaled.cpp", scaled_kernel);
  write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
  auto o = scaled_options(folder.path());
  o.cache_dir = (folder.path() / "cache").string();
  const auto s = one_config_space();
  const auto c = s.from_json(R"({"us": 1})");
  std::vector<measurement> got(3);
  {
    std::vector<std::jthread> threads;
    for (auto& m : got)
      threads.emplace_back([&o, &s, &c, &m] {
        cpu_backend b(o);
        b.prepare(s);  // the loader and the reference, in a fresh cache
        m = b.evaluate(s, c);
      });
  }
  for (const auto& m : got) CHECK(m.status == status::ok);
  cpu_backend b(o);
  b.prepare(s);
  CHECK(b.evaluate(s, c).metrics.at("compile_cached") == 1);
  // Every manifest names a file that is there; no temporary is left.
  std::size_t manifests = 0;
  for (const auto& dir : {fs::path(o.cache_dir), fs::path(o.cache_dir) / "build"})
    for (const auto& e : fs::directory_iterator(dir)) {
      const auto name = e.path().filename().string();
      INFO(name);
      CHECK(!name.ends_with(".tmp"));
      CHECK(!name.ends_with(".d"));
      if (!name.ends_with(".manifest")) continue;
      ++manifests;
      CHECK(fs::is_regular_file(named_by(e.path())));
    }
  CHECK(manifests == 3);  // the loader, the kernel's config, the reference
}
