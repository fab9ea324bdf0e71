// The cpu backend end to end: real compiles with the system compiler, real
// loader processes, the gate, racing. Kernels are tiny (tests/cpu/kernels/)
// and built at -O1 into one cache for the whole run, so the compiler's time
// stays small.
#include <tessel/backends.hpp>
#include <tessel/cpu.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include "test_kernel.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace tessel;

const std::string kernels_dir = std::string(TESSEL_SOURCE_DIR) + "/tests/cpu/kernels";
const std::string cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);

space spin_space() {
  return parse_space(R"(
space spin {
  const N = 4096
  param us : {50, 100, 1000} = 100
}
)");
}

config spin_config(const space& s, int us) {
  return s.from_json(fmt::format(R"({{"us": {}}})", us));
}

cpu_options user_kernel(const std::string& function) {
  auto o = testing::kernel_options(kernels_dir + "/kernels.cpp:" + function,
                                   kernels_dir + "/reference.cpp:twice_reference");
  o.gate_settings.secret = 29;
  o.gate_settings.suite = {distribution::normal, distribution::uniform, distribution::shifted};
  return o;
}

measurement evaluate_one(const std::string& function, int us = 50) {
  const auto s = spin_space();
  cpu_backend b(user_kernel(function));
  b.prepare(s);
  return b.evaluate(s, spin_config(s, us));
}

}  // namespace

TEST_CASE("cpu: a kernel is compiled with its knobs, gated and timed; the build is cached") {
  const auto s = spin_space();
  cpu_backend b(user_kernel("spin"));
  b.prepare(s);
  const auto m = b.evaluate(s, spin_config(s, 100));
  INFO(m.message);
  REQUIRE(m.status == status::ok);
  CHECK(m.samples.size() >= 3);
  CHECK(m.metrics.at("ci_low_s") <= m.objective);
  CHECK(m.objective <= m.metrics.at("ci_high_s"));
  CHECK(m.objective >= 100e-6);  // TESSEL_US = 100 reached the kernel
  CHECK(m.objective < 5e-3);
  CHECK(m.metrics.at("iters_per_sample") >= 1);
  CHECK(m.cost.gate_s > 0);
  CHECK(m.cost.run_s > 0);
  CHECK(m.message.find("racing stopped: ") != std::string::npos);
  const auto again = b.evaluate(s, spin_config(s, 100));
  CHECK(again.status == status::ok);
  CHECK(again.metrics.at("compile_cached") == 1);
  CHECK(again.cost.compile_s == 0);
}

TEST_CASE("cpu: racing stops a clearly slower config early; remeasure takes every sample") {
  const auto s = spin_space();
  auto o = user_kernel("spin");
  o.racing = {3, 12, 0.0, 0.02, 5.0};
  cpu_backend b(o);
  b.prepare(s);
  const auto fast = b.evaluate(s, spin_config(s, 50));
  REQUIRE(fast.status == status::ok);
  const auto slow = b.evaluate(s, spin_config(s, 1000));
  INFO(slow.message);
  REQUIRE(slow.status == status::ok);
  CHECK(slow.samples.size() == 3);
  CHECK(slow.message.find("slower_than_incumbent") != std::string::npos);
  const auto full = *b.remeasure(s, spin_config(s, 1000));
  CHECK(full.status == status::ok);
  CHECK(full.samples.size() == 12);
}

TEST_CASE("cpu: a kernel that does not compile is compile_error with the compiler's message") {
  const auto s = spin_space();
  auto o = user_kernel("broken");
  o.kernel = kernels_dir + "/broken.cpp:broken";
  cpu_backend b(o);
  b.prepare(s);
  const auto m = b.evaluate(s, spin_config(s, 50));
  CHECK(m.status == status::compile_error);
  CHECK(m.message.find("undeclared_helper") != std::string::npos);
  CHECK(m.message.find("error") != std::string::npos);
  CHECK(m.cost.run_s == 0);
  // The verdict is cached like a build: the compiler is not asked again.
  const auto again = b.evaluate(s, spin_config(s, 50));
  CHECK(again.status == status::compile_error);
  CHECK(again.metrics.at("compile_cached") == 1);
}

TEST_CASE("cpu: a crashing kernel is runtime_error, and the next config is still measured") {
  const auto m = evaluate_one("crash");
  CHECK(m.status == status::runtime_error);
  CHECK(m.message.find("SIGSEGV") != std::string::npos);
  CHECK(m.cost.run_s == 0);  // never timed
  CHECK(evaluate_one("spin").status == status::ok);
}

TEST_CASE("cpu: a hanging kernel is killed after the timeout") {
  const auto s = spin_space();
  auto o = user_kernel("hang");
  o.run_timeout_s = 1;
  o.kill_grace_s = 0.2;
  cpu_backend b(o);
  b.prepare(s);
  const auto m = b.evaluate(s, spin_config(s, 50));
  CHECK(m.status == status::timeout);
  CHECK(m.message.find("ran past 1 s") != std::string::npos);
  CHECK(m.cost.gate_s < 10);
}

TEST_CASE("cpu: a wrong kernel is caught by the gate and never timed") {
  const auto m = evaluate_one("wrong");
  CHECK(m.status == status::incorrect);
  CHECK(m.message.find("y") != std::string::npos);
  CHECK(m.cost.run_s == 0);
  CHECK(m.samples.empty());
}

TEST_CASE("cpu: a kernel that skips work once it is timed is suspicious") {
  const auto m = evaluate_one("lazy");
  CHECK(m.status == status::suspicious);
  CHECK(m.message.find("computes differently when it is timed") != std::string::npos);
}

TEST_CASE(
    "cpu: a kernel's exception is runtime_error with its message; its stdout forges nothing") {
  const auto thrown = evaluate_one("throws");
  CHECK(thrown.status == status::runtime_error);
  CHECK(thrown.message.find("no such luck") != std::string::npos);
  const auto chatty = evaluate_one("chatty");
  REQUIRE(chatty.status == status::ok);
  CHECK(chatty.objective > 1e-9);  // not the 1e-12 it printed
}

TEST_CASE("cpu: a noisy kernel is measured within its interval") {
  // 200 us, jitter, and one call in three 600 us late: each sample is one
  // call, so a third of the samples are outliers. The median stays near
  // 200 us inside its interval while the mean is pulled far above it.
  const auto s = spin_space();
  auto o = user_kernel("noisy");
  o.min_sample_s = 1e-9;  // one call per sample
  o.racing = {5, 40, 0.0, 0.01, 10.0};
  cpu_backend b(o);
  b.prepare(s);
  const auto m = b.evaluate(s, spin_config(s, 50));
  INFO(m.message);
  REQUIRE(m.status == status::ok);
  CHECK(m.metrics.at("iters_per_sample") == 1);
  CHECK(m.samples.size() > 5);  // the outliers keep the interval wide: racing goes on
  const double low = m.metrics.at("ci_low_s"), high = m.metrics.at("ci_high_s");
  CHECK(low <= m.objective);
  CHECK(m.objective <= high);
  CHECK(m.objective >= 200e-6);
  CHECK(m.objective < 400e-6);
  const double mean = std::accumulate(m.samples.begin(), m.samples.end(), 0.0) /
                      static_cast<double>(m.samples.size());
  CHECK(mean > m.objective * 1.15);
}

TEST_CASE("cpu: every built-in kernel passes the gate at a small shape") {
  struct one {
    const char* text;
    const char* config;
  };
  const one cases[] = {
      {"space g { const kernel = gemm const M = 37 const N = 70 const K = 45 param mr : {2, 4} "
       "param vec : {4, 8} param pack_a : bool }",
       R"({"mr": 2, "vec": 8, "pack_a": false})"},
      {"space g { const kernel = gemm const dtype = bf16 const M = 33 const N = 48 const K = 64 "
       "param mr : {4} }",
       R"({"mr": 4})"},
      {"space r { const kernel = rmsnorm const R = 9 const D = 300 param accs : {1, 2} }",
       R"({"accs": 2})"},
      {"space s { const kernel = softmax const R = 9 const D = 300 param online : bool param "
       "fast_exp : bool }",
       R"({"online": true, "fast_exp": true})"},
      {"space c { const kernel = conv2d const H = 20 const W = 45 const R = 3 const S = 5 param "
       "rows : {1, 2} }",
       R"({"rows": 2})"},
  };
  for (const auto& c : cases) {
    const auto s = parse_space(c.text);
    cpu_options o;
    o.flags = "-O1 -march=native";
    o.cache_dir = cache_dir;
    o.cpus = "off";
    o.racing = {2, 3, 0.0, 0.02, 1.0};
    o.gate_settings.secret = 7;
    cpu_backend b(o);
    b.prepare(s);
    const auto m = b.evaluate(s, s.from_json(c.config));
    INFO(c.text, ": ", m.message);
    CHECK(m.status == status::ok);
    CHECK(m.metrics.at("gbytes_per_s") > 0);
    CHECK(b.name() == "cpu:" + s.def().symbols.at(0));
  }
}

TEST_CASE("cpu: a kernel or reference path that is not a source file is named, never waited on") {
  const auto s = spin_space();
  const auto dir = fs::temp_directory_path() / fmt::format("tessel-cpu-paths-{}", ::getpid());
  fs::create_directories(dir / "folder.cpp");
  const auto fifo = dir / "fifo.cpp";  // nothing ever writes to it
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto o = user_kernel("spin");
  o.kernel = (dir / "folder.cpp").string() + ":spin";
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(s),
                       doctest::Contains("folder.cpp' is a directory, not a file"), error);
  o.kernel = fifo.string() + ":spin";
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(s), doctest::Contains("is not a regular file"),
                       error);
  o = user_kernel("spin");
  o.reference = (dir / "missing.cpp").string() + ":twice_reference";
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(s),
                       doctest::Contains("missing.cpp': No such file or directory"), error);
  fs::remove_all(dir);
}

TEST_CASE("cpu: misuse is named before tuning starts") {
  const auto gemm =
      parse_space("space g { const kernel = gemm const M = 8 const N = 8 param a : {1} }");
  cpu_options o;
  o.cache_dir = cache_dir;
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(gemm),
                       "backend cpu: the gemm kernel needs `const K = ...` in the space", error);
  const auto none = parse_space("space n { param a : {1} }");
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(none),
                       doctest::Contains("space 'n' names no kernel (`const kernel = gemm`)"),
                       error);
  o.builtin = "fft";
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(none),
                       doctest::Contains("no built-in kernel 'fft' (built-in kernels: conv2d, "
                                         "gemm, rmsnorm, softmax;"),
                       error);
  CHECK_THROWS_WITH_AS(make_backend("cpu:kernel=k.cpp:f,inputs=x:4,outputs=y:4"),
                       doctest::Contains("a kernel file needs a reference=FILE.cpp:FUNCTION"),
                       options_error);
  CHECK_THROWS_WITH_AS(make_backend("cpu:gemm,cpus=3-1"),
                       doctest::Contains("is not auto, all, off or a CPU list"), options_error);
  CHECK_THROWS_WITH_AS(make_backend("cpu:gemm,colour=blue"),
                       doctest::Contains("backend cpu: unknown setting 'colour'"), error);
  CHECK_THROWS_WITH_AS(make_backend("cpu:gemm,set.M=big"),
                       "backend cpu: setting set.M must be an integer, got 'big'", error);
  auto b = make_backend("cpu:gemm,set.Q=4");
  CHECK_THROWS_WITH_AS(b->prepare(gemm), "backend cpu: set.Q: space 'g' has no integer constant Q",
                       error);
  o.builtin.clear();
  o.compiler = "no-such-compiler-29";
  CHECK_THROWS_WITH_AS(cpu_backend(o).prepare(gemm),
                       doctest::Contains("backend cpu: no C++ compiler found"), error);
}
