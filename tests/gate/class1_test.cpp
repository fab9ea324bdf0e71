// class1_test.cpp: issue 25, class 1: the gated command knows it is being
// gated. The gate used to tell a command its gate runs (TESSEL_GATE=1, a
// folder named tessel-gate-...) and to believe the time of one unchecked run
// after them, negative times included. Now every run of a gated command is
// the same to it (arguments, environment, stdin, a fresh private folder of
// the same shape) and every run is judged and timed; a time that is not
// positive or beats the machine's floor is suspicious. The program is
// tests/gate/programs/gate_program.cpp.
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include <unistd.h>

namespace {

using tessel::status;

tessel::space small_space() {
  return tessel::parse_space(
      "space t { const M = 48  const K = 40  const N = 32  param tile : {1, 2} "
      "let flops = 2 * M * N * K }");
}

std::shared_ptr<tessel::backend> gated(const std::string& mode,
                                       const std::string& output_type = "fp32",
                                       const std::string& flops = "") {
  tessel::backend_settings settings{
      {"gate_inputs", "A:MxK,B:KxN"},
      {"gate_outputs", "C:MxN:" + output_type},
      {"gate_reference", fmt::format("{} reference", TESSEL_GATE_PROGRAM)},
      {"gate_secret", "25"},
      {"timeout", "20"}};
  if (!flops.empty()) settings["gate_flops"] = flops;
  return tessel::make_backend(fmt::format("command:{} {}", TESSEL_GATE_PROGRAM, mode), settings);
}

tessel::measurement evaluate(const std::string& mode, const std::string& output_type = "fp32",
                             const std::string& flops = "") {
  const auto s = small_space();
  const auto b = gated(mode, output_type, flops);
  b->prepare(s);
  return b->evaluate(s, s.from_json(R"({"tile": 2})"));
}

}  // namespace

TEST_CASE("class 1: honest gated commands pass, every run timed (atomics, bf16 outputs)") {
  for (const auto& [mode, type] : {std::pair{"honest", "fp32"}, std::pair{"bf16", "bf16"}}) {
    CAPTURE(mode);
    const tessel::measurement m = evaluate(mode, type, "flops");
    INFO(m.message);
    CHECK(m.status == status::ok);
    CHECK(m.objective > 0);
    // every suite once, then 2 to 6 repeats, every run judged; one sample per
    // run on inputs the program had not been given (a repeat could be memoised)
    CHECK(m.metrics.at("gate_runs") >= 18);
    CHECK(m.metrics.at("gate_runs") <= 22);
    CHECK(m.samples.size() == 16);
    CHECK(m.cost.run_s > 0);
  }
}

TEST_CASE("class 1: a command honest only when told it is gated is caught") {
  // TESSEL_GATE is never set now: it computes zeros on every run.
  const tessel::measurement m = evaluate("env_sniff");
  INFO(m.message);
  CHECK((m.status == status::suspicious || m.status == status::incorrect));
  CHECK(m.samples.empty());
}

TEST_CASE("class 1: a command that tells gate runs by its input folder's name is caught") {
  const tessel::measurement m = evaluate("dir_sniff");
  INFO(m.message);
  CHECK((m.status == status::suspicious || m.status == status::incorrect));
  CHECK(m.samples.empty());
}

TEST_CASE("class 1: a command honest for as many runs as the gate used to make is caught") {
  const tessel::measurement m = evaluate("counter");
  std::remove(("/tmp/tessel-gate-program-" + std::to_string(::getpid())).c_str());
  INFO(m.message);
  CHECK((m.status == status::suspicious || m.status == status::incorrect));
  CHECK(m.samples.empty());
}

TEST_CASE("class 1: a negative, zero or impossibly small time is suspicious") {
  for (const char* mode : {"negative", "zero_time"}) {
    CAPTURE(mode);
    const tessel::measurement m = evaluate(mode);
    INFO(m.message);
    CHECK(m.status == status::suspicious);
    CHECK(m.message.find("not a finite positive number") != std::string::npos);
  }
  // 1e-12 s: below the floor with the FLOPs declared, and with the bytes alone
  for (const char* flops : {"flops", ""}) {
    CAPTURE(flops);
    const tessel::measurement m = evaluate("too_fast", "fp32", flops);
    INFO(m.message);
    CHECK(m.status == status::suspicious);
    CHECK(m.message.find("faster than the roofline bound") != std::string::npos);
  }
}

TEST_CASE("class 1: a gated command must write its outputs on every run") {
  // The old protocol: outputs only under TESSEL_GATE, a time otherwise.
  const auto s = small_space();
  const auto b =
      tessel::make_backend("command:sh -c 'echo 1.5'",
                           {{"gate_inputs", "A:MxK,B:KxN"},
                            {"gate_outputs", "C:MxN"},
                            {"gate_reference", fmt::format("{} reference", TESSEL_GATE_PROGRAM)},
                            {"gate_secret", "25"}});
  b->prepare(s);
  const tessel::measurement m = b->evaluate(s, s.from_json(R"({"tile": 1})"));
  CHECK(m.status == status::runtime_error);
  CHECK(m.message.starts_with("run 1 of "));
  CHECK(m.message.find("it wrote no C.npy (a gated command writes its outputs on every run)") !=
        std::string::npos);
}
