#include "backend_fixtures.hpp"

#include <tessel/backends.hpp>
#include <tessel/error.hpp>
#include <tessel/settings.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace tessel;

TEST_CASE("registry: replay and command by scheme") {
  const testing::temp_folder folder;
  const auto& dir = folder.path();
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
                       "backend command: setting timeout=-1: must be >= 0 (0: no limit)",
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
  CHECK_THROWS_WITH_AS(c.validate(), "command_options::timeout_s = -1: must be >= 0 (0: no limit)",
                       options_error);
}

TEST_CASE("registry: the racing settings every timing backend shares name the setting") {
  // One list (the racing fields relative to their owner) serves command, cpu and trainium.
  CHECK_THROWS_WITH_AS(make_backend("command:true", {{"race_margin", "-1"}}),
                       "backend command: setting race_margin: must be >= 0", options_error);
  CHECK_THROWS_WITH_AS(make_backend("command:true", {{"min_repeats", "5"}, {"max_repeats", "3"}}),
                       "backend command: setting max_repeats: must be >= min_repeats",
                       options_error);
  CHECK_THROWS_WITH_AS(make_backend("cpu", {{"target_ci", "inf"}}),
                       "backend cpu: setting target_ci: must be >= 0", options_error);
  CHECK_THROWS_WITH_AS(make_backend("cpu", {{"race_seconds", "-1"}}),
                       "backend cpu: setting race_seconds: must be >= 0", options_error);
  command_options c;
  c.racing.margin = -1;
  CHECK_THROWS_WITH_AS(c.validate(), "command_options::racing.margin: must be >= 0", options_error);
}

TEST_CASE("options_error: field, value and rule in one format, renamed without parsing") {
  const options_error jobs("study::options::jobs", "100000", "must be at most 4096");
  CHECK(std::string(jobs.what()) == "study::options::jobs = 100000: must be at most 4096");
  CHECK(jobs.field() == "study::options::jobs");
  CHECK(jobs.value() == "100000");
  CHECK(jobs.rule() == "must be at most 4096");
  const auto typed = jobs.renamed("--jobs", " ");
  CHECK(std::string(typed.what()) == "--jobs 100000: must be at most 4096");
  CHECK(typed.field() == "--jobs");
  CHECK(typed.value() == "100000");
  CHECK(typed.rule() == "must be at most 4096");

  const options_error target("sim_options.target", "unknown target 'x'");
  CHECK(std::string(target.what()) == "sim_options.target: unknown target 'x'");
  CHECK(!target.value());
  CHECK(std::string(target.renamed("backend sim: setting target", "=").what()) ==
        "backend sim: setting target: unknown target 'x'");
  CHECK(std::string(options_error("a", "1", "b").renamed("k", "=").what()) == "k=1: b");
  // A rule's words are not parsed: a colon or " = " in them stays where it is.
  CHECK(std::string(options_error("f", "x = 1: y").renamed("g", " ").what()) == "g: x = 1: y");
}

TEST_CASE("options_error: a number's value written as fmt's {} writes it") {
  const auto value = [](const options_error& e) { return e.value().value_or("(none)"); };
  CHECK(value(options_error("f", std::size_t{4097}, "r")) == "4097");
  CHECK(value(options_error("f", -3, "r")) == "-3");
  CHECK(value(options_error("f", std::uint64_t{18446744073709551615U}, "r")) ==
        "18446744073709551615");
  CHECK(value(options_error("f", 0.1, "r")) == "0.1");
  CHECK(value(options_error("f", 2.0, "r")) == "2");
  CHECK(value(options_error("f", 1e300, "r")) == "1e+300");
  CHECK(value(options_error("f", -std::numeric_limits<double>::infinity(), "r")) == "-inf");
  CHECK(value(options_error("f", std::numeric_limits<double>::quiet_NaN(), "r")) == "nan");
  // the message is the text form's, byte for byte
  CHECK(
      std::string(options_error("study::options::jobs", 100000U, "must be at most 4096").what()) ==
      options_error("study::options::jobs", "100000", "must be at most 4096").what());
  command_options c;
  c.timeout_s = -0.25;
  CHECK_THROWS_WITH_AS(c.validate(),
                       "command_options::timeout_s = -0.25: must be >= 0 (0: no limit)",
                       options_error);
}

TEST_CASE("options_error::names: the field itself, or a field relative to its owner") {
  const options_error margin("cpu_options::racing.margin", "must be >= 0");
  CHECK(margin.names("cpu_options::racing.margin"));
  CHECK(margin.names("racing.margin"));
  CHECK(margin.names("margin"));
  CHECK(!margin.names("ing.margin"));  // a whole component, not any ending
  CHECK(!margin.names("racing"));
  CHECK(!margin.names(""));
  CHECK(options_error("study::options::jobs", "no").names("jobs"));
  CHECK(!options_error("study::options::jobs_x", "no").names("study::options::jobs"));
  CHECK(!options_error("study::options::window", "5", "no").names("study::options::jobs"));
}
