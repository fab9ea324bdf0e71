// The cpu backend's compile cache and the files a compile read: a kernel
// that includes a header of its own folder, the header edited, broken,
// removed and put back between evaluations, and the loader's own build. A
// cached build is reused only while every file its compile read is what it
// was (docs/cpu.md, "What is measured": the compile cache). Over its size
// limit, the least recently used builds go, never one in use.
#include <tessel/backends.hpp>

#include "cache_fixtures.hpp"
#include "cpu/toolchain.hpp"
#include "temp_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <sys/stat.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;
using namespace tessel::testing;

/// Sets every manifest's mtime in `build` (its last use) back by `by`.
void set_back(const fs::path& build, fs::file_time_type::duration by) {
  for (const auto& e : fs::directory_iterator(build))
    if (e.path().extension() == ".manifest")
      fs::last_write_time(e.path(), fs::last_write_time(e.path()) - by);
}

/// A file's mtime and ctime, in ns.
std::pair<std::int64_t, std::int64_t> stamps(const fs::path& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  const auto ns = [](const timespec& t) {
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  };
  return {ns(st.st_mtim), ns(st.st_ctim)};
}

/// "1, 2, ..., n".
std::string values_up_to(int n) {
  std::string out = "1";
  for (int i = 2; i <= n; ++i) out += fmt::format(", {}", i);
  return out;
}

/// The scaled kernel with configs us = 1..`configs` and the reference, in
/// a cache of its own whose builds folder is `build`.
struct limit_fixture {
  testing::temp_folder folder;
  space s;
  cpu_options o;
  fs::path build;
  limit_fixture(std::string_view name, int configs)
      : folder(name),
        s(parse_space(
            fmt::format("space s {{ const N = 4096 param us : {{{}}} }}", values_up_to(configs)))),
        o(scaled_options(folder.path())) {
    write(folder.path() / "scaled.cpp", scaled_kernel);
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
    o.cache_dir = (folder.path() / "cache").string();
    build = fs::path(o.cache_dir) / "build";
  }
  [[nodiscard]] config us(int value) const {
    return s.from_json(fmt::format(R"({{"us": {}}})", value));
  }
  /// The bytes in the builds folder.
  [[nodiscard]] std::uintmax_t bytes() const {
    std::uintmax_t total = 0;
    for (const auto& e : fs::directory_iterator(build)) total += fs::file_size(e.path());
    return total;
  }
  /// The manifest of the reference (`is_reference`) or of the one config
  /// built: the reference's unit is the one that builds no config (the
  /// loader's unit is here too, its manifest in the cache's root).
  [[nodiscard]] fs::path manifest(bool is_reference) const {
    fs::path found;
    for (const auto& e : fs::directory_iterator(build)) {
      const auto named = fs::path(e.path()).replace_extension(".manifest");
      if (e.path().extension() == ".cpp" && fs::exists(named) &&
          (read_file(e.path()).find("// no config") != std::string::npos) == is_reference)
        found = named;
    }
    REQUIRE(fs::exists(found));
    return found;
  }
};

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

TEST_CASE("cpu cache: over its limit, the least recently used builds go, never one in use") {
  limit_fixture f("tessel-cpu-limit", 3);
  const auto& s = f.s;
  auto& o = f.o;
  const auto us = [&f](int value) { return f.us(value); };
  const auto cached = [](cpu_backend& b, const space& sp, const config& c) {
    const auto m = b.evaluate(sp, c);
    INFO(m.message);
    CHECK(m.status == status::ok);
    CHECK(m.message.find("compile cache") == std::string::npos);
    return m.metrics.at("compile_cached");
  };
  {  // the default limit (1 GiB) keeps all: the reference and configs 1 and 2
    cpu_backend b(o);
    b.prepare(s);
    REQUIRE(cached(b, s, us(1)) == 0);
    REQUIRE(cached(b, s, us(2)) == 0);
  }
  const auto reference = f.manifest(true);
  // A hit records its use only on a manifest last used over 5 minutes ago
  // (the order's grain): all were, an hour ago.
  set_back(f.build, std::chrono::hours(1));
  // Room for what is there and not one build more.
  o.cache_limit_mb = static_cast<double>(f.bytes() + 1024) / (1024 * 1024);
  cpu_backend b(o);
  b.prepare(s);  // the reference: a hit, the least recently used from here on, and in use
  CHECK(cached(b, s, us(2)) == 1);
  CHECK(cached(b, s, us(1)) == 1);  // now 2 is the least recently used not in use
  CHECK(cached(b, s, us(3)) == 0);  // over the limit: 2 goes
  CHECK(f.bytes() <= static_cast<std::uintmax_t>(o.cache_limit_mb * 1024 * 1024));
  CHECK(cached(b, s, us(1)) == 1);
  CHECK(cached(b, s, us(3)) == 1);
  CHECK(cached(b, s, us(2)) == 0);
  // The reference, the oldest but in use all along, was never removed.
  CHECK(fs::exists(reference));
}

TEST_CASE("cpu cache: a reference's build the guard put back is never removed by the limit") {
  limit_fixture f("tessel-cpu-guard-lock", 2);
  f.o.cache_limit_mb = 1.0 / 1024;  // 1 KiB: every key not in use is to go
  cpu_backend b(f.o);
  b.prepare(f.s);
  const auto reference = f.manifest(true);
  const auto library = named_by(reference);
  const auto bytes = read_file(library);
  // A kernel's process writes the reference's build (in place: the file
  // its sealed copy locked). Config 1's compile trims first (the reference
  // in use, kept); its gate run's guard puts the build back, a new file.
  write(library, "not the reference");
  const auto first = b.evaluate(f.s, f.us(1));
  INFO(first.message);
  REQUIRE(first.status == status::ok);
  CHECK(read_file(library) == bytes);
  // Config 2's compile trims again: the put-back build is in use too (the
  // guard holds its lock), so the reference's key stays, build and all.
  const auto second = b.evaluate(f.s, f.us(2));
  INFO(second.message);
  CHECK(second.status == status::ok);
  CHECK(fs::exists(reference));
  CHECK(fs::exists(library));
  CHECK(fs::exists(fs::path(reference).replace_extension(".cpp")));
}

TEST_CASE("cpu cache: what the guard kept beside a build goes with it over the limit") {
  // Before: BUILD.changed-PID-N, the bytes a run wrote over the reference's
  // build that its guard kept, stayed in the builds folder for good,
  // counted against the limit, as did one whose build was gone.
  limit_fixture f("tessel-cpu-guard-asides", 1);
  f.o.cache_limit_mb = 1.0 / 1024;  // 1 KiB: every key not in use is to go
  const auto kept = [&f] {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(f.build))
      if (e.path().filename().string().find(".changed-") != std::string::npos)
        out.push_back(e.path());
    return out;
  };
  fs::path reference;
  {
    cpu_backend b(f.o);
    b.prepare(f.s);
    reference = f.manifest(true);
    write(named_by(reference), "not the reference");  // a run's write, put back by the guard
    const auto m = b.evaluate(f.s, f.us(1));
    INFO(m.message);
    REQUIRE(m.status == status::ok);
  }
  REQUIRE(kept().size() == 1);
  write(f.build / "gone-0123.so.changed-1-1", "the aside of a build already removed");
  // A built-in kernel's compile in the same cache trims: the reference,
  // no longer in use, goes with what was kept beside it.
  const auto gemm = parse_space(
      "space g { const kernel = gemm const M = 8 const N = 8 "
      "const K = 8 param mr : {2} }");
  cpu_options o;
  o.flags = "-O1";
  o.cache_dir = f.o.cache_dir;
  o.cache_limit_mb = f.o.cache_limit_mb;
  o.cpus = "off";
  cpu_backend b(o);
  b.prepare(gemm);
  const auto m = b.evaluate(gemm, gemm.from_json(R"({"mr": 2})"));
  INFO(m.message);
  CHECK(m.status == status::ok);
  CHECK(!fs::exists(reference));
  CHECK(kept().empty());
}

TEST_CASE("cpu cache: far under its limit a compile trims by an estimate, scanning rarely") {
  const testing::temp_folder folder("tessel-cpu-tally");
  detail::toolchain_options o;
  o.flags = {"-O0"};
  o.cache_dir = folder.path() / "cache";
  o.cache_limit_bytes = std::uintmax_t{1} << 20;  // 1 MiB: rescans after 64 KiB of its own
  const auto build = o.cache_dir / "build";
  const detail::toolchain t(o);
  // A unit whose build holds `bytes` bytes of data besides its code.
  const auto unit = [](int n, int bytes) {
    return fmt::format("extern \"C\" {{ const char tally_{0}[{1}] = {{1}}; }}\n", n, bytes);
  };
  const auto size = [&build] {
    std::uintmax_t total = 0;
    for (const auto& e : fs::directory_iterator(build)) total += fs::file_size(e.path());
    return total;
  };
  REQUIRE(t.build(unit(0, 1), {}, {}).status == status::ok);
  CHECK(t.scans() == 1);  // the first compile scans
  // Another process's key, 1 MiB, last used an hour ago: the folder is over.
  const auto other = build / "other.manifest";
  write(other, "tessel cpu build manifest 3\nbuilt other-0.so\n0 0\n");
  write(build / "other-0.so", std::string(std::size_t{1} << 20, 'x'));
  write(build / "other.cpp", "");
  fs::last_write_time(other, fs::last_write_time(other) - std::chrono::hours(1));
  // A small compile: this process's estimate is under the limit and it
  // added less than 64 KiB since its scan, so nothing is scanned: the folder
  // stays over by what the other process added (the stated margin).
  REQUIRE(t.build(unit(1, 1), {}, {}).status == status::ok);
  CHECK(t.scans() == 1);
  CHECK(fs::exists(other));
  CHECK(size() > o.cache_limit_bytes);
  // Then 64 KiB of its own: it scans, and the other's key goes.
  REQUIRE(t.build(unit(2, 70000), {}, {}).status == status::ok);
  CHECK(t.scans() == 2);
  CHECK_FALSE(fs::exists(other));
  CHECK(size() <= o.cache_limit_bytes);
  for (int n = 3; n < 6; ++n) REQUIRE(t.build(unit(n, 1), {}, {}).status == status::ok);
  CHECK(t.scans() == 2);
}

TEST_CASE("cpu cache: a hit writes its manifest's last use only when it is minutes old") {
  limit_fixture f("tessel-cpu-use", 1);
  const auto c = f.us(1);
  cpu_backend b(f.o);
  b.prepare(f.s);
  REQUIRE(b.evaluate(f.s, c).metrics.at("compile_cached") == 0);
  const auto manifest = f.manifest(false);
  // Used just now: a hit leaves the manifest as it is (no write, its ctime
  // kept), so hits cost no write to the file system.
  const auto fresh = stamps(manifest);
  REQUIRE(b.evaluate(f.s, c).metrics.at("compile_cached") == 1);
  CHECK(stamps(manifest) == fresh);
  // Last used an hour ago: the hit sets its use to now.
  set_back(f.build, std::chrono::hours(1));
  const auto old = stamps(manifest);
  REQUIRE(b.evaluate(f.s, c).metrics.at("compile_cached") == 1);
  CHECK(stamps(manifest).first > old.first + std::int64_t{3500} * 1'000'000'000);
}

TEST_CASE("cpu cache: a cache limit below zero is refused, naming the field or the setting") {
  cpu_options o;
  o.cache_limit_mb = -1;
  CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("cpu_options::cache_limit_mb"),
                       options_error);
  CHECK_THROWS_WITH_AS(make_backend("cpu:gemm,cache_limit=-1"),
                       doctest::Contains("cache_limit: must be a number of MiB >= 0"),
                       options_error);
  CHECK_NOTHROW((void)make_backend("cpu:gemm,cache_limit=0"));
}
