// The compile cache is a folder the kernel can write (docs/gate.md, "The
// compile cache is the user's folder"): a build, the loader, the
// reference's build or tessel's header overwritten between two evaluations
// or studies is noticed and never run, what runs is a sealed copy of the
// checked bytes, and the cache does not keep what no manifest names
// (docs/cpu.md, "How the cache decides").
#include "as_user.hpp"
#include "cache_fixtures.hpp"
#include "cpu/cache_files.hpp"
#include "temp_folder.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/// scaled_fixture in a folder every user may read, its reference there too.
struct shared_fixture : scaled_fixture {
  shared_fixture() {
    write(folder.path() / "reference.cpp", read_file(kernels_dir + "/reference.cpp"));
    o.reference = (folder.path() / "reference.cpp").string() + ":twice_reference";
    fs::permissions(folder.path(), fs::perms::all);
  }
};

/// For a forked child: 0 when f's study is ok, else 11 and its message on
/// stderr after `what`.
int study_exit_code(const scaled_fixture& f, const char* what) {
  const auto m = f.study();
  if (!m.ok()) std::fprintf(stderr, "%s: %s\n", what, m.message.c_str());
  return m.ok() ? 0 : 11;
}

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

namespace {

/// A kernel (or reference) that says where its code and its process's
/// program come from, as its failure: "library=PATH exe=PATH".
constexpr std::string_view where_source = R"(#include <tessel/cpu_kernel.hpp>
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
)";

/// A study whose kernel (`kernel`) or reference runs where_source: its
/// measurement, failed with where_source's message.
measurement where_study(const scaled_fixture& f, bool kernel) {
  write(f.folder.path() / "where.cpp", where_source);
  auto o = f.o;
  const auto where = (f.folder.path() / "where.cpp").string() + ":where";
  o.kernel = kernel ? where : kernels_dir + "/kernels.cpp:twice";
  if (!kernel) o.reference = where;
  cpu_backend b(o);
  b.prepare(f.s);
  return b.evaluate(f.s, f.c);
}

}  // namespace

TEST_CASE("cpu cache: the loader, the reference and the kernel run from sealed copies") {
  scaled_fixture f;
  bool kernel = false;
  SUBCASE("the reference") { kernel = false; }
  // Until session 17 the kernel's own build was loaded from the cache.
  SUBCASE("the kernel") { kernel = true; }
  const auto m = where_study(f, kernel);
  INFO(m.message);
  REQUIRE(m.status != status::ok);
  CHECK(m.message.find("library=/proc/self/fd/") != std::string::npos);
  CHECK(m.message.find("exe=/memfd:tessel-build") != std::string::npos);
  CHECK(m.message.find(f.o.cache_dir) == std::string::npos);
}

TEST_CASE("cpu cache: a kernel's build swapped in the cache after its lookup is never loaded") {
  // The kernel computes y = 2 x, then replaces every config's build in the
  // cache (a unit that is not the reference's, "// no config") with bytes
  // that are no library, as a kernel of another config running beside it
  // could between this config's lookup and its loads. Until session 17 the
  // next gate run loaded the swapped file ("cannot load the kernel").
  scaled_fixture f;
  write(f.folder.path() / "swapper.cpp", R"(#include <tessel/cpu_kernel.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
void swapper(const tessel::cpu::kernel_args& a) {
  namespace fs = std::filesystem;
  const float* x = a.in(0).as<float>();
  float* y = a.out(0).as<float>();
  for (std::int64_t i = 0; i < a.in(0).elements(); ++i) y[i] = 2 * x[i];
  const fs::path build = fs::path(std::getenv("TESSEL_TEST_CACHE")) / "build";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(build, ec)) {
    const auto name = e.path().filename().string();
    if (e.path().extension() != ".so" || name.find('-') == std::string::npos) continue;
    std::ifstream unit(build / (name.substr(0, name.rfind('-')) + ".cpp"));
    const std::string text((std::istreambuf_iterator<char>(unit)), {});
    if (text.empty() || text.find("// no config") != std::string::npos) continue;
    std::ofstream(e.path().string() + ".swap") << "not a library";
    fs::rename(e.path().string() + ".swap", e.path(), ec);
  }
}
)");
  f.o.kernel = (f.folder.path() / "swapper.cpp").string() + ":swapper";
  f.o.environment["TESSEL_TEST_CACHE"] = f.o.cache_dir;
  // A kernel of the cache's own user, as any of a tessel that is not root:
  // a root tessel's kernel (nobody, docs/cpu.md "The kernel's user") cannot
  // write root's cache at all.
  f.o.kernel_user = "root";
  cpu_backend b(f.o);
  b.prepare(f.s);
  const auto m = b.evaluate(f.s, f.c);
  INFO(m.message);
  CHECK(m.status == status::ok);
  // The next lookup finds the swapped build, and builds it again.
  const auto next = b.evaluate(f.s, f.c);
  INFO(next.message);
  CHECK(next.status == status::ok);
  CHECK(next.metrics.at("compile_cached") == 0);
  CHECK(next.message.find("did not hold the bytes its manifest recorded") != std::string::npos);
}

namespace {

/// Makes memfd_create fail (EPERM) in this process and every process it
/// starts, as a container's seccomp filter may: the compile cache then runs
/// private copies (sealed_file's fallback). For a forked child: it cannot
/// be undone. false when the system refuses the filter.
bool refuse_memfd() {
  std::array<sock_filter, 4> filter{{
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  }};
  const sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

}  // namespace

TEST_CASE("cpu cache: where memfd_create is refused, a gated study runs from private copies") {
  // The fallback is reached only when the system refuses memfds (seccomp,
  // no memfd support): a forked child refuses them to itself, then runs a
  // study that says where its code came from and a gated study, as root or
  // as a user who is not (its runs in a user namespace of their own).
  if (!may_become_another_user()) return;
  const shared_fixture f;
  int user = 0;
  SUBCASE("as root") { user = 0; }
  SUBCASE("as nobody") { user = nobody; }
  CHECK(exit_code_as_user(user, [&f] {
          if (!refuse_memfd()) return 12;
          const auto where = where_study(f, true);
          if (where.message.find("library=" + f.o.cache_dir) == std::string::npos ||
              where.message.find("exe=" + f.o.cache_dir) == std::string::npos) {
            std::fprintf(stderr, "not run from private copies: %s\n", where.message.c_str());
            return 13;
          }
          if (const int failed = study_exit_code(f, "with private copies")) return failed;
          return files_ending(f.o.cache_dir, ".copy").empty() ? 0 : 14;  // removed with it
        }) == 0);
}

TEST_CASE("cpu cache: a private copy, where memfds are refused, is read-only once written") {
  // Its owner can still make it writable (docs/cpu.md, "A poisoned cache is
  // not trusted", says what is not guaranteed); a process of the user that
  // opens it to write, as a kernel poisoning builds in place does, is
  // refused. As nobody: root's writes ignore the mode.
  if (!may_become_another_user()) return;
  const temp_folder folder("tessel-cpu-private-copy");
  const auto from = folder.path() / "build.so";
  write(from, "the build's bytes\n");
  fs::permissions(folder.path(), fs::perms::all);
  fs::permissions(from, fs::perms::all);
  CHECK(exit_code_as_user(nobody, [&from] {
          if (!refuse_memfd()) return 12;
          const auto copy = detail::sealed_file::copy_of(from);
          if (!copy || copy->sealed() || copy->bytes() != "the build's bytes\n") return 13;
          struct stat st {};
          if (::stat(copy->path().c_str(), &st) != 0) return 14;
          // r-x for all: a root tessel's kernel, another user, loads its own.
          if ((st.st_mode & 07777) != 0555) {
            std::fprintf(stderr, "the private copy's mode is %o\n", st.st_mode & 07777);
            return 15;
          }
          const int fd = ::open(copy->path().c_str(), O_WRONLY | O_CLOEXEC);
          if (fd >= 0 || errno != EACCES) return 16;
          return 0;
        }) == 0);
}

TEST_CASE("cpu cache: a user who is not root runs the sealed copies too") {
  // A user's runs are in a user namespace of their own (docs/backends.md, "A
  // PID namespace per run"), from which tessel's /proc/PID/fd cannot be
  // opened: each run inherits the sealed copies' descriptors and opens them
  // as its own (/proc/self/fd/N). Before, every loader run of a user who is
  // not root failed to exec. A forked child gives up root (the tests run as
  // root here) and makes itself dumpable again, as a user's own process is;
  // everything it reads is in a folder it may read.
  if (!may_become_another_user()) return;
  const shared_fixture f;
  CHECK(exit_code_as_user(nobody, [&f] { return study_exit_code(f, "as nobody"); }) == 0);
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
}

TEST_CASE("cpu cache: what a process that is gone left in the cache is removed at the next start") {
  // A compile killed with its process leaves its temporaries (*.tmp: the
  // output, a manifest, a unit) and its dependency list (*.d), a run its
  // private copy (*.copy), an earlier version its unkept build
  // (*.uncached.so). Until session 17 only the last were removed.
  scaled_fixture f;
  REQUIRE(f.study().ok());
  const auto cache = fs::path(f.o.cache_dir);
  const auto build = cache / "build";
  std::vector<fs::path> gone, running;
  for (const auto* kind : {"uncached.so", "tmp", "d", "copy"}) {
    gone.push_back(build / fmt::format("0123-4567.so.999999999-0.{}", kind));
    running.push_back(build / fmt::format("0123-4567.so.{}-0.{}", ::getpid(), kind));
  }
  gone.push_back(cache / "loader-0123.manifest.999999999-3.tmp");
  gone.push_back(files_ending(cache, "include/tessel/cpu_kernel.hpp").at(0).string() +
                 ".999999999-7.tmp");
  // Names that only look alike are no one's private names.
  const std::vector<fs::path> others{build / "0123.999999999-0.so", build / "0123.x-0.tmp",
                                     build / "0123.999999999-.tmp", cache / "999999999-0.tmp"};
  for (const auto& path : gone) write(path, "left by a killed process");
  for (const auto& path : running) write(path, "in use");
  for (const auto& path : others) write(path, "someone else's");
  const auto m = f.study();
  INFO(m.message);
  CHECK(m.ok());
  for (const auto& path : gone) CHECK_MESSAGE(!fs::exists(path), path);
  for (const auto& path : running) CHECK_MESSAGE(fs::exists(path), path);
  for (const auto& path : others) CHECK_MESSAGE(fs::exists(path), path);
}

TEST_CASE("cpu cache: a guard's restore file left by a process that is gone is removed") {
  // A guard writes the bytes it puts back to BUILD.restore-PID, then renames
  // them over BUILD: a process killed between the two left it for good (the
  // limit's trim keeps a .restore- file, which a running guard may be about
  // to rename). Now the next start removes it when no process runs as PID,
  // or the one that does started after it was written (the PID used again).
  scaled_fixture f;
  REQUIRE(f.study().ok());
  const auto build = fs::path(f.o.cache_dir) / "build";
  const auto gone = build / "0123-4567.so.restore-999999999";
  const auto reused = build / fmt::format("0123-4567.so.restore-{}", ::getpid());
  const auto running = build / fmt::format("89ab-cdef.so.restore-{}", ::getpid());
  const std::vector<fs::path> others{build / ".restore-999999999",
                                     build / "0123.so.restore-x999999999",
                                     build / "0123.so.restore-"};
  for (const auto& path : {gone, reused, running}) write(path, "the bytes a guard puts back");
  for (const auto& path : others) write(path, "someone else's");
  // Written an hour ago: before this process started.
  fs::last_write_time(reused, fs::file_time_type::clock::now() - std::chrono::hours(1));
  const auto m = f.study();
  INFO(m.message);
  CHECK(m.ok());
  CHECK(!fs::exists(gone));
  CHECK(!fs::exists(reused));
  CHECK(fs::exists(running));
  for (const auto& path : others) CHECK_MESSAGE(fs::exists(path), path);
}

TEST_CASE("cpu cache: as a user who is not root, another user's running process keeps its own") {
  // kill(PID, 0) on another user's process is refused (EPERM), not ESRCH:
  // it runs, and what it named stays; a dead one's still goes.
  if (!may_become_another_user()) return;
  const shared_fixture f;
  CHECK(exit_code_as_user(nobody, [&f] {
          if (const int failed = study_exit_code(f, "as nobody")) return failed;
          const auto build = fs::path(f.o.cache_dir) / "build";
          const auto init = build / "0123-4567.so.1-0.tmp";  // PID 1: root's, running
          const auto gone = build / "0123-4567.so.999999999-0.tmp";
          write(init, "a running process's");
          write(gone, "left by a killed process");
          if (const int failed = study_exit_code(f, "as nobody, again")) return failed;
          return fs::exists(init) && !fs::exists(gone) ? 0 : 15;
        }) == 0);
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
