#include "backend_fixtures.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

using namespace tessel;

TEST_CASE("registry: replay and command by scheme") {
  const auto dir = testing::temporary_directory();
  const auto path = (dir / "tiny.json").string();
  {
    std::ofstream out(path);
    out << R"({"tune_params_keys": ["x"], "tune_params": {"x": [1, 2]}, "cache": {"1": {"x": 1, "time": 3.5}}})";
  }
  const auto replay =
      make_backend("replay:" + path, {{"concurrency", "8"}, {"count_framework_time", "yes"}});
  CHECK(replay->name() == "replay:" + path);
  CHECK(replay->concurrency() == 8);
  REQUIRE(dynamic_cast<replay_backend*>(replay.get()) != nullptr);
  CHECK(dynamic_cast<replay_backend&>(*replay).table().optimum() == 3.5);
  std::filesystem::remove_all(dir);

  const auto command =
      make_backend("command:sh -c 'echo 1'", {{"timeout", "2.5"}, {"env.FOO", "bar"}});
  CHECK(command->name() == "command:sh -c 'echo 1'");
  const auto s = testing::small_space();
  CHECK(command->evaluate(s, *s.configs().begin()).objective == 1);
}

TEST_CASE("registry: unknown schemes and settings are errors that list what is known") {
  CHECK_THROWS_WITH_AS(
      make_backend("nope:x"),
      doctest::Contains("unknown backend 'nope' in 'nope:x' (known: command, cpu, replay"), error);
  CHECK_THROWS_WITH_AS(
      make_backend("command:true", {{"timeuot", "1"}}),
      "backend command: unknown setting 'timeuot' (settings: concurrency, env.NAME, "
      "estimated_cost, gate_flops, gate_inputs, gate_min_bytes, gate_outputs, gate_reference, "
      "gate_secret, kill_grace, max_repeats, min_repeats, race_margin, race_seconds, target_ci, "
      "timeout, tolerance_scale, workdir)",
      error);
  CHECK_THROWS_WITH_AS(make_backend("command:true", {{"timeout", "soon"}}),
                       "backend command: setting timeout must be a number, got 'soon'", error);
  CHECK_THROWS_AS(make_backend("replay:"), error);
  CHECK_THROWS_AS(make_backend("command:"), error);
}

TEST_CASE("registry: other modules add schemes") {
  register_backend("test_scheme", [](std::string_view argument, const backend_settings&) {
    return std::make_shared<callback_backend>(
        [value = std::stod(std::string(argument))](const config&) { return value; });
  });
  const auto schemes = backend_schemes();
  CHECK(std::find(schemes.begin(), schemes.end(), "test_scheme") != schemes.end());
  const auto s = testing::small_space();
  CHECK(make_backend("test_scheme:4.5")->evaluate(s, *s.configs().begin()).objective == 4.5);
  CHECK_THROWS_AS(
      register_backend("a:b", [](std::string_view, const backend_settings&) { return nullptr; }),
      error);
}

TEST_CASE("registry: a value the backend's options refuse names the setting; C++ keeps the field") {
  CHECK_THROWS_WITH_AS(make_backend("command:true", {{"timeout", "-1"}}),
                       "backend command: setting timeout must be >= 0 (0: no limit), got -1",
                       options_error);
  CHECK_THROWS_WITH_AS(make_backend("sim:target=trn9"),
                       doctest::Contains("backend sim: setting target: unknown target 'trn9'"),
                       options_error);
  sim_options o;
  o.target = "trn9";
  CHECK_THROWS_WITH_AS(o.validate(), doctest::Contains("sim_options.target: unknown target 'trn9'"),
                       options_error);
  command_options c;
  c.timeout_s = -1;
  CHECK_THROWS_WITH_AS(
      c.validate(), "command_options::timeout_s must be >= 0 (0: no limit), got -1", options_error);
}

TEST_CASE("with_typed_name: the field an options_error names, as the person typed it") {
  CHECK(with_typed_name("study::options::jobs = 100000: must be at most 4096",
                        "study::options::jobs", "--jobs",
                        " ") == "--jobs 100000: must be at most 4096");
  CHECK(with_typed_name("sim_options.target: unknown target 'x'", "sim_options.target",
                        "backend sim: setting target",
                        "=") == "backend sim: setting target: unknown target 'x'");
  CHECK(with_typed_name("command_options::timeout_s must be >= 0", "command_options::timeout_s",
                        "backend command: setting timeout",
                        "=") == "backend command: setting timeout must be >= 0");
  CHECK(with_typed_name("a = 1: b", "a", "k", "=") == "k=1: b");
  CHECK(!with_typed_name("study::options::jobs_x: no", "study::options::jobs", "--jobs", " "));
  CHECK(!with_typed_name("study::options::window = 5: no", "study::options::jobs", "--jobs", " "));
}
