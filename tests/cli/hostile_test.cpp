// Hostile input to the tool (issue 15): bad bytes, huge numbers, odd ids and
// huge outputs are bad input (exit 1, or a one-line error from `serve`, which
// goes on), never an internal error (exit 3).
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace cli_testing;
using json = nlohmann::json;

namespace {

/// Each line of `out` parsed as JSON (strict UTF-8); fails on one that is not.
std::vector<json> json_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    CHECK_MESSAGE(!j.is_discarded(), "not one line of JSON: ", line);
    lines.push_back(std::move(j));
  }
  return lines;
}

std::string error_of(const json& reply) {
  return reply.contains("error") && reply["error"].is_string() ? reply["error"].get<std::string>()
                                                               : std::string();
}

}  // namespace

TEST_CASE("serve: hostile lines are answered on one line each, and the session goes on") {
  // Before: 1e400 and a non-UTF-8 byte ended the process with exit 3 and a
  // multi-line JSON object; trial_id 1.5 was taken as 1 and -1 as 2^64-1.
  const auto r = tessel("serve fixtures/small.tsl --no-db --seed 1 < fixtures/hostile.jsonl");
  CHECK(r.code == 0);
  const auto replies = json_lines(r.out);
  REQUIRE(replies.size() == 10);
  CHECK(replies[0]["ok"] == false);
  CHECK(error_of(replies[0]).find("not a JSON object") != std::string::npos);  // 1e400
  for (const auto& reply :
       replies)  // the parser's tag "[json.exception.parse_error.101]" is dropped
    CHECK(error_of(reply).find("json.exception") == std::string::npos);
  CHECK(replies[1]["ok"] == false);  // a bad byte
  CHECK(replies[2]["space"]["valid_configs"] == 78);
  CHECK(error_of(replies[3]).find("\"trial_id\" must be a whole number") != std::string::npos);
  CHECK(error_of(replies[4]).find("\"trial_id\" must be a whole number") != std::string::npos);
  CHECK(error_of(replies[5]).find("\"n\" must be from 0 to 10000") != std::string::npos);
  CHECK(error_of(replies[6]).find("'cost.run_s' must be a number >= 0") != std::string::npos);
  CHECK(error_of(replies[7]).find("nests at most 64 levels") != std::string::npos);
  CHECK(error_of(replies[8]).find("unknown trial id 1") != std::string::npos);  // none asked
  CHECK(replies[9]["ok"] == true);
}

TEST_CASE("serve: a space whose text holds a non-UTF-8 byte is described, bytes replaced") {
  const auto r = tessel(
      "serve fixtures/non_utf8.tsl --no-db < fixtures/serve_script.jsonl");  // starts with space
  CHECK(r.code == 0);
  const auto replies = json_lines(r.out);
  REQUIRE(!replies.empty());
  CHECK(replies[0]["space"]["constraints"][0]["message"] == "caf\xef\xbf\xbd");  // U+FFFD
}

TEST_CASE("mcp: a line past 16 MiB and a request nested 100,000 deep get errors, and it goes on") {
  // Before: mcp read whole lines with std::getline (no bound) and parsed them
  // without a depth limit.
  const std::string input = work_folder + "/mcp_hostile_" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream in(input, std::ios::binary);
    in << std::string((std::size_t{16} << 20) + 10, 'x') << '\n'
       << std::string(100000, '[') << std::string(100000, ']') << '\n'
       << R"({"jsonrpc":"2.0","id":7,"method":"ping"})" << '\n';
  }
  const auto r = tessel("mcp fixtures/small.tsl --no-db < '" + input + "'");
  CHECK(r.code == 0);
  const auto replies = json_lines(r.out);
  REQUIRE(replies.size() == 3);
  CHECK(replies[0]["error"]["code"] == -32600);
  CHECK(replies[0]["error"]["message"].get<std::string>().find("at most 16777216 bytes") !=
        std::string::npos);
  CHECK(replies[1]["error"]["message"].get<std::string>().find("nests at most 64") !=
        std::string::npos);
  CHECK(replies[2]["id"] == 7);
  CHECK(replies[2].contains("result"));
}

TEST_CASE("serve: a failure to start is one line of JSON on stdout") {
  const auto r = tessel("serve fixtures/syntax_error.tsl --no-db < /dev/null");
  CHECK(r.code == 1);
  const auto replies = json_lines(r.out);
  REQUIRE(replies.size() == 1);
  CHECK(replies[0]["ok"] == false);
}

TEST_CASE("check --json: a message with a non-UTF-8 byte is valid JSON, exit 0") {
  // Before: exit 3 ("invalid UTF-8 byte").
  const auto r = tessel("check fixtures/non_utf8.tsl --json");
  CHECK(r.code == 0);
  const auto out = json::parse(r.out, nullptr, false);
  REQUIRE(!out.is_discarded());
  CHECK(out["constraints"][0]["message"] == "caf\xef\xbf\xbd");
}

TEST_CASE("check: a --set value with a non-UTF-8 byte is bad input, exit 1") {
  const auto r = tessel("check fixtures/small.tsl --json --set \"N=$(printf 'caf\\351')\"");
  CHECK(r.code == 1);
  const auto out = json::parse(r.out, nullptr, false);
  REQUIRE(!out.is_discarded());
  CHECK(out["ok"] == false);
}

TEST_CASE(
    "numeric options: a negative, overflowing or non-finite value is a usage error naming it") {
  // Before: CLI11 wrapped "-1" around to 2^64 - 1 (--budget -1 ran without end,
  // --seed -1 recorded seed 18446744073709551615), saturated 2^64 to 2^64 - 1,
  // read "010" as octal 8 evaluations, and --time -5 was refused as "study_spec.budget.wall_s".
  const std::string tune = "tune ../../examples/rmsnorm.tsl --backend sim --no-db -q ";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {tune + "--budget -1",
       "--budget: expected an integer from 0 to 18446744073709551615, got '-1'"},
      {tune + "--budget 18446744073709551616", "--budget: expected an integer"},
      {tune + "--seed -1", "--seed: expected an integer"},
      {tune + "--budget 010",
       "--budget: expected an integer from 0 to 18446744073709551615, got '010'"},
      {tune + "--jobs -1", "--jobs: expected an integer"},
      {tune + "--patience -3", "--patience: expected an integer"},
      {tune + "--time -5", "--time: must be a finite number >= 0, got '-5'"},
      {tune + "--time nan", "--time: must be a finite number >= 0, got 'nan'"},
      {tune + "--cost-budget inf", "--cost-budget: must be a finite number >= 0"},
      {tune + "--target-objective nan", "--target-objective: must be a finite number, got 'nan'"},
      {tune + "--min-gain inf", "--min-gain: must be a finite number >= 0, got 'inf'"},
      {"serve fixtures/small.tsl --no-db --budget -1 < /dev/null", "--budget: expected an integer"},
      {"serve fixtures/small.tsl --no-db --token-price nan < /dev/null",
       "--token-price: must be a finite number >= 0"},
      {"check fixtures/small.tsl --sample -1", "--sample: expected an integer"},
      {"show no.db --top -1", "--top: expected an integer"},
  };
  for (const auto& one : bad) {  // no structured binding: clang 14 cannot capture one
    const auto r = tessel(one.first);
    CHECK_MESSAGE(r.code == 2, one.first);
    CHECK_MESSAGE(contains(r.err, one.second), one.first, ": ", r.err);
  }
}

TEST_CASE("an unknown command is named, with a hint") {
  // Before: "A subcommand is required".
  auto r = tessel("tunee fixtures/small.tsl");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "unknown command 'tunee'; did you mean 'tune'?"));
  r = tessel("frobnicate");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "unknown command 'frobnicate'"));
}

TEST_CASE("a misspelt option is named, with the nearest option of that command") {
  // Before: "The following arguments were not expected: 3 --budjet".
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tune fixtures/small.tsl --backend sim --budjet 3 --no-db",
       "tessel tune: unknown option '--budjet'; did you mean '--budget'?\n"},
      {"check fixtures/small.tsl --sampel=2",
       "tessel check: unknown option '--sampel'; did you mean '--sample'?\n"},
      {"show --frobnicate x.db", "tessel show: unknown option '--frobnicate'\n"},  // none near
      {"tune fixtures/small.tsl -x", "tessel tune: unknown option '-x'\n"},  // short: no guess
      // before the command: it was "A subcommand is required"
      {"--bogus", "tessel: unknown option '--bogus' (a command's options follow it"},
      {"--budget 3 tune fixtures/small.tsl", "tessel: unknown option '--budget'"},
      {"show a.db extra_positional", "not expected: extra_positional"},  // no option: CLI11's
  };
  for (const auto& one : cases) {  // no structured binding: doctest captures it (clang-14)
    const auto r = tessel(one.first);
    CHECK(r.code == 2);
    CHECK_MESSAGE(contains(r.err, one.second), one.first, ": ", r.err);
    CHECK(contains(r.err, "Run with --help for more information."));
  }
}

TEST_CASE("a file that never ends (/dev/zero) is refused after 16 MiB, as FILE and as --config @") {
  // Before: read whole, without bound (1.6 GB after two seconds). Run under
  // a limit on memory and time so that a regression fails instead of hanging.
  const auto limited = [](const std::string& args) {
    return tessel_limited(args, /*memory_kib=*/1 << 20, /*seconds=*/60);
  };
  auto r = limited("check /dev/zero");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "'/dev/zero' holds more than 16777216 bytes"));
  r = limited("tune /dev/zero --backend sim --no-db");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "'/dev/zero' holds more than 16777216 bytes"));
  r = limited("explain ../../examples/rmsnorm.tsl --config @/dev/zero");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--config: '/dev/zero' holds more than 16777216 bytes"));
  const std::string model = work_folder + "/zero_model_" + std::to_string(::getpid()) + ".tsl";
  std::ofstream(model) << "model m {\n  kernel k {\n    space \"/dev/zero\"\n    calls 1\n  }\n}\n";
  r = limited("model '" + model + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "/dev/zero: error: the text is 16777217 bytes; at most 16777216 are read"));
}

TEST_CASE("a regular file past 16 MiB is refused by its size, before it is read, everywhere") {
  // Before: only FILE was; --config @PATH and a model file were read first
  // (16 MiB + 1), then refused as "holds more than".
  const std::string big = work_folder + "/big_" + std::to_string(::getpid()) + ".tsl";
  std::ofstream{big};
  std::filesystem::resize_file(big, (std::uintmax_t{16} << 20) + 1);  // sparse: nothing written
  const std::string refused = "'" + big + "' is 16777217 bytes; at most 16777216 are read";
  auto r = tessel("check '" + big + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "tessel: error: " + refused));
  r = tessel("explain ../../examples/rmsnorm.tsl --config '@" + big + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "tessel: error: --config: " + refused));
  r = tessel("model '" + big + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, big + ": error: " + refused));
  std::filesystem::remove(big);
}

TEST_CASE("a space of more than 2^64 configs names its file") {
  // Before: ": error: space 's' has more than 2^64 valid configs" (no file).
  const std::string path = work_folder + "/huge_space_" + std::to_string(::getpid()) + ".tsl";
  {
    std::ofstream out(path);
    out << "space s {\n";
    for (int i = 0; i < 70; ++i) out << "  param p" << i << " : {1, 2}\n";
    out << "}\n";
  }
  const auto r = tessel("check '" + path + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, path + ": error: space 's' has more than 2^64 valid configs"));
}

TEST_CASE("--backend sim:KEY=VALUE,... takes settings, as calibrate's printed advice writes it") {
  // Before: the whole argument was the workload's name: "unknown workload
  // 'target=trn2,model=analytic'", for the line `tessel calibrate` prints.
  const std::string tune = "tune ../../examples/rmsnorm.tsl --no-db -q --budget 2 ";
  auto r = tessel(tune + "--backend sim:target=trn2,model=analytic,set.dma_issue_ns=978.5");
  CHECK(r.code == 0);
  r = tessel(tune + "--backend sim:rmsnorm,model=analytic");
  CHECK(r.code == 0);
  r = tessel(tune + "--backend sim:target=trn2 --backend-set target=trn1");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "backend sim: setting target given twice"));
  r = tessel(tune + "--backend sim:target=trn2,frob=1");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "unknown setting 'frob'"));
}

TEST_CASE("a control character in a .tsl is shown escaped, never written to the terminal") {
  // Before: "found '\0'" and the source line were written with the NUL itself.
  const std::string path = work_folder + "/nul_" + std::to_string(::getpid()) + ".tsl";
  {
    std::ofstream out(path, std::ios::binary);
    out << "space s {\n  param a : {1, 2}" << '\0' << "\x1b[2J\n}\n";
  }
  const auto r = tessel("check '" + path + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err,
                 ":2:19: error: expected a statement (param, const, let, require, when) or "
                 "'}', found '\\x00'"));
  CHECK(contains(r.err, "  param a : {1, 2}??[2J\n"));
  CHECK(r.err.find('\0') == std::string::npos);
  CHECK(r.err.find('\x1b') == std::string::npos);
}

TEST_CASE("output that cannot be written (a full disk) is an error, not exit 0") {
  // Before: stdout is buffered, the write failed at exit unseen, and
  // `tessel export DB > out.csv` on a full disk exited 0 with nothing written.
  const std::string err = work_folder + "/full_" + std::to_string(::getpid()) + ".err";
  const auto to_full = [&](const std::string& args) {
    const int status = std::system(("cd '" + std::string(TESSEL_CLI_TESTS_DIR) + "' && '" +
                                    TESSEL_CLI_PATH + "' " + args + " >/dev/full 2>'" + err + "'")
                                       .c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(err));
  };
  for (const std::string args : {"check fixtures/small.tsl", "check fixtures/small.tsl --json"}) {
    const auto got = to_full(args);
    const int code = got.first;
    const std::string text = got.second;
    CHECK_MESSAGE(code == 1, args);
    CHECK_MESSAGE(contains(text, "tessel: error: cannot write the output to stdout"), args, ": ",
                  text);
  }
  CHECK(to_full("check fixtures/empty.tsl").first == 1);  // exit 1 already: kept
}

TEST_CASE("--fidelity-set without --fidelity, --backend-set without --backend: bad input") {
  // Before: the settings were dropped without a word and the run went on (exit 0).
  auto r = tessel(
      "tune ../../examples/rmsnorm.tsl --backend sim --no-db -q --budget 2 --fidelity-set z=1");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--fidelity-set z=...: multi-fidelity settings need --fidelity"));
  r = tessel("serve fixtures/small.tsl --no-db --backend-set timeout=5 < /dev/null");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--backend-set timeout=...: there is no --backend to apply it to"));
  r = tessel(
      "tune ../../examples/rmsnorm.tsl --fidelity sim --fidelity sim --no-db -q --budget 2 "
      "--backend-set model=analytic");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "--backend-set model=...: with --fidelity, give each level its settings"));
  r = tessel("check fixtures/small.tsl --backend-set model=analytic");
  CHECK(r.code == 2);
  CHECK(contains(r.err, "--backend-set requires --backend"));
}

TEST_CASE("a failing command candidate's stderr is stored without escapes or control characters") {
  // Before: its colours, a window title (ESC ] ... BEL), BEL and CR were stored
  // as written, and `tessel export` and `report` handed them on to a terminal.
  const std::string db = work_folder + "/ansi_" + std::to_string(::getpid()) + ".db";
  auto r =
      tessel("tune fixtures/small.tsl --backend command:fixtures/ansi.sh --budget 1 -q --db '" +
             db + "' --overwrite");
  REQUIRE_MESSAGE(r.code == 0, r.err);
  r = tessel("export '" + db + "' --format json");
  REQUIRE(r.code == 0);
  const auto trials = json_lines(r.out);
  REQUIRE(trials.size() == 1);
  CHECK(trials[0]["status"] == "runtime_error");
  CHECK(trials[0]["message"] ==
        "exited with code 1\nstderr:\nerror: tile too large?\nline two\tend?");
}

TEST_CASE("a value the library refuses is named as the option or setting the user typed") {
  // Before: "study::options::jobs = 100000: must be at most 4096 ...", and
  // "sim_options.target: unknown target 'nope'", the library's field names.
  const std::string tune = "tune ../../examples/rmsnorm.tsl --no-db -q --budget 2 ";
  const std::string cpu =
      "tune ../../examples/cpu_gemm.tsl --no-db -q --budget 2 --backend cpu:gemm ";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {tune + "--backend sim --jobs 100000",
       "tessel: error: --jobs 100000: must be at most 4096 (0 = the backend's concurrency)"},
      {tune + "--backend sim --window 5000", "tessel: error: --window 5000: must be at most 4096"},
      {"serve fixtures/small.tsl --no-db --jobs 5000 < /dev/null", "--jobs 5000: must be at most"},
      {tune + "--backend sim:target=nope",
       "tessel: error: backend sim: setting target: unknown target 'nope' (built-in: trn1,"},
      {tune + "--backend sim --backend-set target=nope", "backend sim: setting target: unknown"},
      {tune + "--backend sim:nope", "backend sim: setting workload: unknown workload 'nope'"},
      {tune + "--backend sim:fault=nope", "backend sim: setting fault: unknown fault 'nope'"},
      {"model ../../examples/models/dense_60m.tsl --backend-set target=nope",
       "backend sim: setting target: unknown target 'nope'"},
      {tune + "--fidelity sim --fidelity sim:model=analytic --fidelity-set z=-1",
       "--fidelity-set: setting z=-1: must be finite and >= 0"},
      {"worker postgresql://nobody@127.0.0.1:1/none --heartbeat 5 --lease 2",
       "tessel: error: --lease 2: must be more than the heartbeat (5)"},
      {tune + "--backend command:true --backend-set timeout=-1",
       "backend command: setting timeout=-1: must be >= 0 (0: no limit)"},
      {tune + "--backend command:true --backend-set kill_grace=-1",
       "backend command: setting kill_grace=-1: must be >= 0"},
      {tune + "--backend command:true --backend-set race_margin=-1",
       "backend command: setting race_margin: must be >= 0"},
      {tune + "--backend command:true --backend-set min_repeats=5 --backend-set max_repeats=2",
       "backend command: setting max_repeats: must be >= min_repeats"},
      {cpu + "--backend-set race_seconds=-1", "backend cpu: setting race_seconds: must be >= 0"},
      {tune + "--backend sim --strategy 'bo[initial_draws=0]'",
       "strategy 'bo[initial_draws=0]': initial_draws: must be at least 1 (got 0)"},
      {tune + "--backend sim --strategy 'auto[model.refit_growth=1]'",
       "strategy 'auto[model.refit_growth=1]': model.refit_growth: must be finite and > 1"},
      {cpu + "--backend-set cpus=x",
       "backend cpu: setting cpus: 'x' is not auto, all, off or a CPU list"},
      {cpu + "--backend-set tolerance_scale=0",
       "backend cpu: setting tolerance_scale: must be > 0 and finite (got 0)"},
  };
  for (const auto& one : bad) {  // no structured binding: clang 14 cannot capture one
    const auto r = tessel(one.first);
    CHECK_MESSAGE(r.code == 1, one.first);
    CHECK_MESSAGE(contains(r.err, one.second), one.first, ": ", r.err);
    CHECK_MESSAGE(!contains(r.err, "options"), one.first, ": ", r.err);
  }
  // emit --target: a target the file declares is no built-in the emitter knows.
  const std::string custom = work_folder + "/custom_target_" + std::to_string(::getpid()) + ".tsl";
  {
    std::ofstream out(custom);
    out << "target my_chip : trn2 { }\n"
        << read_text(std::string(TESSEL_CLI_TESTS_DIR) + "/../../examples/sim_matmul.tsl");
  }
  auto emitted = tessel("emit '" + custom + "' --target my_chip --config '{}'");
  CHECK(emitted.code == 1);
  CHECK(contains(emitted.err, "tessel: error: --target: unknown target 'my_chip' (built-in:"));
  emitted = tessel("emit '" + custom + "' --config '{}' --fault nope");
  CHECK(contains(emitted.err, "tessel: error: --fault: unknown fault 'nope'"));
  // --json: the same message in the error object.
  const auto r = tessel(tune + "--backend sim --jobs 100000 --json");
  CHECK(r.code == 1);
  CHECK(contains(r.out, "--jobs 100000: must be at most 4096"));
}
