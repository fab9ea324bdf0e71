// Gated `command:`: the command's outputs on hidden inputs are compared with a
// reference command's before its time counts.
#include <tessel/backends.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

namespace {

using namespace tessel;

const std::string source_dir = TESSEL_SOURCE_DIR;
const std::string test_python = TESSEL_TEST_PYTHON;
const std::string script = source_dir + "/tests/trainium/gated_matmul.py";

space tile_space() {
  return parse_space("space t { const M = 64  const K = 32  param tile : {1, 2, 4} }");
}

std::shared_ptr<backend> gated(const std::string& mode) {
  backend_settings settings{{"gate_inputs", "A:MxK,B:Kx48"},
                            {"gate_outputs", "C:Mx48"},
                            {"gate_reference", fmt::format("{} {} reference", test_python, script)},
                            {"gate_secret", "77"},
                            {"timeout", "20"}};
  return make_backend(fmt::format("command:{} {} {}", test_python, script, mode), settings);
}

}  // namespace

TEST_CASE("gated command: an honest command passes the gate and records its time") {
  if (test_python.empty()) return;
  const auto s = tile_space();
  const auto b = gated("honest");
  b->prepare(s);
  const auto m = b->evaluate(s, s.from_json(R"({"tile": 2})"));
  INFO(m.message);
  CHECK(m.status == status::ok);
  CHECK(m.objective == doctest::Approx(1.5));
  CHECK(m.cost.gate_s > 0);
}

TEST_CASE("gated command: wrong outputs never record a time") {
  if (test_python.empty()) return;
  const auto s = tile_space();
  for (const char* mode : {"zeros", "skip"}) {
    CAPTURE(mode);
    const auto b = gated(mode);
    b->prepare(s);
    const auto m = b->evaluate(s, s.from_json(R"({"tile": 4})"));
    INFO(m.message);
    CHECK((m.status == status::incorrect || m.status == status::suspicious));
    CHECK(m.samples.empty());
    CHECK(m.objective == 0);
  }
}

TEST_CASE("gated command: the settings come together or not at all") {
  const auto s = tile_space();
  const auto b = make_backend("command:true", {{"gate_outputs", "C:4x4"}});
  CHECK_THROWS_WITH_AS(b->prepare(s), doctest::Contains("gate_reference"), tessel::error);
  const auto bad = make_backend(
      "command:true",
      {{"gate_outputs", "C:Qx4"}, {"gate_inputs", "A:4x4"}, {"gate_reference", "true"}});
  CHECK_THROWS_WITH_AS(bad->prepare(s), doctest::Contains("dimension 'Q'"), tessel::error);
}
