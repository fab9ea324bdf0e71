// The compile cache is a folder the kernel can write (docs/gate.md, "The
// compile cache is the user's folder"): a build, the loader, the
// reference's build or tessel's header overwritten between two evaluations
// or studies is noticed and never run, what runs is a sealed copy of the
// checked bytes, and the cache does not keep what no manifest names
// (docs/cpu.md, "How the cache decides").
#include "as_user.hpp"
#include "cache_fixtures.hpp"
#include "temp_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;
using namespace tessel::testing;

/// Bytes that are no library or program: run, they would fail the trial.
constexpr std::string_view poison = "#!/bin/sh\nexit 3\n not an ELF file\n";

/// Every file under `dir` whose path ends with `suffix`.
std::vector<fs::path> files_ending(const fs::path& dir, std::string_view suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().string().ends_with(suffix)) out.push_back(e.path());
  return out;
}

struct scaled_fixture {
  temp_folder folder{"tessel-cpu-poison"};
  space s = one_config_space();
  config c = s.from_json(R"({"us": 1})");
  cpu_options o;
  scaled_fixture() {
    write(folder.path() / "scaled.cpp", scaled_kernel);
    write(folder.path() / "scale.hpp", "#define TESSEL_TEST_SCALE 2.0f\n");
    o = scaled_options(folder.path());
    o.cache_dir = (folder.path() / "cache").string();
  }
  /// A study: a backend prepared and one evaluation.
  measurement study() const {
    cpu_backend b(o);
    b.prepare(s);
    return b.evaluate(s, c);
  }
};

}  // namespace

TEST_CASE("cpu cache: a build overwritten in the cache is built again, never run") {
  scaled_fixture f;
  cpu_backend b(f.o);
  b.prepare(f.s);
  REQUIRE(b.evaluate(f.s, f.c).status == status::ok);
  REQUIRE(b.evaluate(f.s, f.c).metrics.at("compile_cached") == 1);
  // Another config's process (or one of an earlier study) writes this
  // config's build: a hit would run it.
  const auto manifests = files_ending(fs::path(f.o.cache_dir) / "build", ".manifest");
  REQUIRE(manifests.size() == 2);  // the kernel's config and the reference
  for (const auto& m : manifests) write(named_by(m), poison);
  const auto m = b.evaluate(f.s, f.c);
  INFO(m.message);
  CHECK(m.status == status::ok);
  CHECK(m.metrics.at("compile_cached") == 0);
  CHECK(m.message.find("compile cache: ") != std::string::npos);
  CHECK(m.message.find("did not hold the bytes its manifest recorded") != std::string::npos);
  CHECK(b.evaluate(f.s, f.c).metrics.at("compile_cached") == 1);  // the new build is kept
}

TEST_CASE("cpu cache: a loader or reference build overwritten between studies is built again") {
  scaled_fixture f;
  REQUIRE(f.study().status == status::ok);
  const auto cache = fs::path(f.o.cache_dir);
  const auto loader = named_by(only_file(cache, "loader-", ".manifest"));
  std::vector<fs::path> builds{loader};
  for (const auto& m : files_ending(cache / "build", ".manifest")) builds.push_back(named_by(m));
  REQUIRE(builds.size() == 3);  // the loader, the kernel's config, the reference
  SUBCASE("the loader") { builds = {loader}; }
  SUBCASE("the loader, the reference and the kernel") {}
  for (const auto& path : builds) write(path, poison);
  const auto m = f.study();
  INFO(m.message);
  CHECK(m.status == status::ok);
  CHECK(m.message.find("compile cache: " + loader.string() + " did not hold the bytes") !=
        std::string::npos);
  for (const auto& path : builds) CHECK(read_file(path) != poison);
  CHECK(f.study().message.find("compile cache") == std::string::npos);  // mended for good
}

TEST_CASE("cpu cache: tessel's header overwritten in the cache is written again before a compile") {
  scaled_fixture f;
  f.o.kernel = kernels_dir + "/kernels.cpp:twice";  // no header of its own
  const auto s = parse_space("space s { const N = 4096 param us : {1, 2} }");
  cpu_backend b(f.o);
  b.prepare(s);
  REQUIRE(b.evaluate(s, s.from_json(R"({"us": 1})")).status == status::ok);
  const auto headers = files_ending(f.o.cache_dir, "include/tessel/cpu_kernel.hpp");
  REQUIRE(headers.size() == 1);
  const auto kept = read_file(headers[0]);
  // A kernel rewrites the header every config includes: the next config's
  // compile would build what it wrote.
  write(headers[0], "#error poisoned\n" + kept);
  const auto m = b.evaluate(s, s.from_json(R"({"us": 2})"));
  INFO(m.message);
  CHECK(m.status == status::ok);
  CHECK(m.metrics.at("compile_cached") == 0);
  CHECK(m.message.find("tessel's own " + headers[0].string() + " did not hold what tessel wrote") !=
        std::string::npos);
  CHECK(read_file(headers[0]) == kept);
  // The first config's build read the header as it was: still a hit.
  CHECK(b.evaluate(s, s.from_json(R"({"us": 1})")).metrics.at("compile_cached") == 1);
}

TEST_CASE("cpu cache: the loader and the reference run from sealed copies of the checked bytes") {
  scaled_fixture f;
  // The reference says where its code and its process's program come from.
  write(f.folder.path() / "where.cpp", R"(#include <tessel/cpu_kernel.hpp>
#include <dlfcn.h>
#include <unistd.h>
#include <stdexcept>
#include <string>
void where(const tessel::cpu::kernel_args&) {
  Dl_info info{};
  ::dladdr(reinterpret_cast<void*>(&where), &info);
  char exe[4096] = {};
  const auto n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  throw std::runtime_error(std::string("library=") + info.dli_fname +
                           " exe=" + std::string(exe, n > 0 ? static_cast<std::size_t>(n) : 0));
}
)");
  f.o.kernel = kernels_dir + "/kernels.cpp:twice";
  f.o.reference = (f.folder.path() / "where.cpp").string() + ":where";
  const auto m = f.study();
  INFO(m.message);
  REQUIRE(m.status != status::ok);
  CHECK(m.message.find("library=/proc/self/fd/") != std::string::npos);
  CHECK(m.message.find("exe=/memfd:tessel-build") != std::string::npos);
  CHECK(m.message.find(f.o.cache_dir) == std::string::npos);
}

TEST_CASE("cpu cache: a user who is not root runs the sealed copies too") {
  // A user's runs are in a user namespace of their own (docs/backends.md, "A
  // PID namespace per run"), from which tessel's /proc/PID/fd cannot be
  // opened: each run inherits the sealed copies' descriptors and opens them
  // as its own (/proc/self/fd/N). Before, every loader run of a user who is
  // not root failed to exec. A forked child gives up root (the tests run as
  // root here) and makes itself dumpable again, as a user's own process is;
  // everything it reads is in a folder it may read.
  if (::geteuid() != 0) {
    MESSAGE("skipped: not root, so not able to become another user");
    return;
  }
  scaled_fixture f;
  write(f.folder.path() / "reference.cpp", read_file(kernels_dir + "/reference.cpp"));
  f.o.reference = (f.folder.path() / "reference.cpp").string() + ":twice_reference";
  fs::permissions(f.folder.path(), fs::perms::all);
  CHECK(exit_code_as_user(nobody, [&f] {
          const auto m = f.study();
          if (!m.ok()) std::fprintf(stderr, "as nobody: %s\n", m.message.c_str());
          return m.ok() ? 0 : 11;
        }) == 0);
}

TEST_CASE("cpu cache: a build a manifest no longer names is removed") {
  scaled_fixture f;
  cpu_backend b(f.o);
  b.prepare(f.s);
  const auto build = fs::path(f.o.cache_dir) / "build";
  const auto outcomes = [&] {
    return files_ending(build, ".so").size() + files_ending(build, ".compile_error").size();
  };
  REQUIRE(b.evaluate(f.s, f.c).status == status::ok);
  REQUIRE(outcomes() == 2);  // the kernel's config and the reference
  for (const auto* scale : {"3.0f", "2.0f\nint broken_here = ;", "4.0f", "2.0f"}) {
    write(f.folder.path() / "scale.hpp", fmt::format("#define TESSEL_TEST_SCALE {}\n", scale));
    const auto m = b.evaluate(f.s, f.c);
    INFO(scale, ": ", m.message);
    CHECK(m.metrics.at("compile_cached") == 0);
    CHECK(outcomes() == 2);  // the old build (or message) went with its manifest
  }
}

TEST_CASE("cpu cache: a build that is not kept leaves nothing behind") {
  // A compiler that leaves no dependency list (as when a file it read was
  // edited while it ran): its builds are used for their evaluation only.
  scaled_fixture f;
  const auto compiler = f.folder.path() / "forgetful-c++";
  write(compiler, R"(#!/bin/sh
c++ "$@"; rc=$?
previous=
for a in "$@"; do [ "$previous" = -MF ] && rm -f "$a"; previous=$a; done
exit $rc
)");
  fs::permissions(compiler, fs::perms::owner_all);
  f.o.compiler = compiler.string();
  cpu_backend b(f.o);
  b.prepare(f.s);
  for (int i = 0; i < 2; ++i) {
    const auto m = b.evaluate(f.s, f.c);
    INFO(m.message);
    CHECK(m.status == status::ok);
    CHECK(m.metrics.at("compile_cached") == 0);
  }
  for (const auto& e : fs::recursive_directory_iterator(f.o.cache_dir)) {
    INFO(e.path());
    CHECK(!e.path().string().ends_with(".so"));
    CHECK(e.path().string().find("uncached") == std::string::npos);
  }
  // What an earlier version left unkept: removed once its process is gone.
  const auto build = fs::path(f.o.cache_dir) / "build";
  const auto gone = build / "0123.999999999-0.uncached.so";
  const auto running = build / fmt::format("0123.{}-0.uncached.so", ::getpid());
  write(gone, "an old build");
  write(running, "an old build in use");
  cpu_backend(f.o).prepare(f.s);
  CHECK(!fs::exists(gone));
  CHECK(fs::exists(running));
}

TEST_CASE("cpu cache: another version's headers in the same cache are left as they are") {
  scaled_fixture f;
  const auto cache = fs::path(f.o.cache_dir);
  // What an older tessel wrote (include/), and a newer one beside it.
  const std::vector<fs::path> others{
      cache / "include/tessel/cpu_kernel.hpp",
      cache / "embedded-0123456789abcdef/include/tessel/cpu_kernel.hpp"};
  for (const auto& path : others) {
    fs::create_directories(path.parent_path());
    write(path, "// another version's header\n");
  }
  REQUIRE(f.study().status == status::ok);
  for (const auto& path : others) CHECK(read_file(path) == "// another version's header\n");
  const auto ours = files_ending(cache, "include/tessel/cpu_kernel.hpp");
  CHECK(ours.size() == 3);
  const auto m = f.study();
  CHECK(m.metrics.at("compile_cached") == 1);
}

TEST_CASE("cpu cache: a compile during which tessel's header changed is compiled again") {
  // A compiler beside which something rewrites tessel's header once it has
  // started (as a kernel running beside the compile could): once, or always.
  scaled_fixture f;
  const auto once = f.folder.path() / "changed-once";
  const auto racing_compiler = [&](bool always) {
    const auto path = f.folder.path() / (always ? "always-c++" : "once-c++");
    write(path, fmt::format(R"(#!/bin/sh
include=
for a in "$@"; do case $a in -I*) include=${{a#-I}};; esac; done
case " $* " in *" -shared "*)
  if [ ! -e '{}' ] || [ {} = 1 ]; then
    touch '{}'; sleep 0.05; echo '// changed' >> "$include/tessel/cpu_kernel.hpp"
  fi;;
esac
exec c++ "$@"
)",
                            once.string(), always ? 1 : 0, once.string()));
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  };
  SUBCASE("once: the compile is run again, on the header tessel wrote") {
    f.o.compiler = racing_compiler(false);
    const auto m = f.study();
    INFO(m.message);
    CHECK(m.status == status::ok);
    CHECK(m.message.find("tessel's own files were changed while the compiler ran; compiled "
                         "again") != std::string::npos);
    CHECK(fs::exists(once));
  }
  SUBCASE("always: the build is refused, saying why") {
    f.o.compiler = racing_compiler(true);
    CHECK_THROWS_WITH(f.study(), doctest::Contains("changed while the compiler ran, twice"));
  }
}
