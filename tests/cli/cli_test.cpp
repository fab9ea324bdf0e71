// The `tessel` tool as a user runs it: exit codes, key output, and golden
// outputs where they are stable. Commands run from tests/cli/ so paths in the
// output are the relative ones given (fixtures/small.tsl).
// TESSEL_UPDATE_GOLDEN=1 rewrites tests/cli/golden/ from the current output.
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace cli_testing;

namespace {

/// Compares with tests/cli/golden/NAME, or rewrites it under TESSEL_UPDATE_GOLDEN.
void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(TESSEL_CLI_TESTS_DIR) + "/golden/" + name;
  if (std::getenv("TESSEL_UPDATE_GOLDEN") != nullptr) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  INFO("golden file ", path, " (TESSEL_UPDATE_GOLDEN=1 rewrites it)");
  CHECK(read_text(path) == actual);
}

/// The text output with the one unstable line, the construction time, masked.
std::string mask_time(const std::string& text) {
  return std::regex_replace(text, std::regex("construction  [^\n]*"), "construction  <time>");
}

nlohmann::ordered_json json_of(const result& r) {
  INFO("stdout: ", r.out);
  REQUIRE(nlohmann::ordered_json::accept(r.out));
  return nlohmann::ordered_json::parse(r.out);
}

}  // namespace

TEST_CASE("--version prints the project version") {
  const auto r = tessel("--version");
  CHECK(r.code == 0);
  CHECK(r.out == std::string("tessel ") + TESSEL_PROJECT_VERSION + "\n");
}

TEST_CASE("--help lists the subcommands and the exit codes") {
  const auto r = tessel("--help");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "Usage: tessel"));
  CHECK(contains(r.out, "check"));
  CHECK(contains(r.out, "--version"));
  CHECK(contains(r.out, "Exit codes"));
}

TEST_CASE("check --help shows every option with its default") {
  const auto r = tessel("check --help");
  CHECK(r.code == 0);
  CHECK(contains(r.out, "Usage: tessel check"));
  for (const char* option :
       {"FILE", "--space", "--target", "--set", "--sample", "--seed", "--json"}) {
    INFO(option);
    CHECK(contains(r.out, option));
  }
  CHECK(contains(r.out, "=trn2"));
}

TEST_CASE(
    "every subcommand's --help: each option is in docs/cli.md, each value named as the rest") {
  // Before: tune's --cost-rule, --no-baseline and --replay-space were in no
  // section of cli.md, which the README calls "every command and option", and
  // a dozen values read UINT, TEXT or FLOAT where the others read N, S, SECONDS
  // (and model's --no-gate read "--no-gate{false}").
  const std::string doc = read_text(std::string(TESSEL_CLI_TESTS_DIR) + "/../../docs/cli.md");
  REQUIRE(!doc.empty());
  const auto top = tessel("--help");
  REQUIRE(top.code == 0);
  const std::string listed = top.out.substr(top.out.find("Subcommands:"));
  const std::regex command_line("\n  ([a-z-]+) ");
  int commands = 0;
  for (std::sregex_iterator c(listed.begin(), listed.end(), command_line), end; c != end; ++c) {
    const std::string name = (*c)[1];
    ++commands;
    CHECK_MESSAGE(contains(doc, "tessel " + name), "cli.md has no `tessel ", name, "`");
    const auto help = tessel(name + " --help");
    REQUIRE(help.code == 0);
    const std::regex option("\n  (?:-[a-z],)?(--[a-z][a-z0-9-]*)( [A-Z_|=.]+)?");
    for (std::sregex_iterator o(help.out.begin(), help.out.end(), option); o != end; ++o) {
      const std::string flag = (*o)[1];
      if (flag == "--help") continue;
      INFO("tessel ", name, " ", flag);
      CHECK(std::regex_search(doc, std::regex(flag + "(?![a-z0-9-])")));
    }
    for (const char* kind : {" UINT", " INT", " TEXT", " FLOAT"}) {
      INFO("tessel ", name, " --help names a value", kind);
      CHECK(!contains(help.out, std::string(kind) + " "));
      CHECK(!contains(help.out, std::string(kind) + "="));
      CHECK(!contains(help.out, std::string(kind) + ":"));
    }
    CHECK(!contains(help.out, "{false}"));  // CLI11's spelling of a negated flag
    CHECK(!contains(help.out, "=["));       // and of a list's default
  }
  CHECK(commands >= 14);
}

TEST_CASE("every `tessel COMMAND ... --option` that README.md and docs/ write is an option of it") {
  // Before: bayesian.md and scheduler.md wrote `tessel serve --budget-hint`, a
  // hidden name of before, where --help shows --budget. Quoted text (a
  // command backend's own flags, a message) is not the tool's.
  const std::string root = std::string(TESSEL_CLI_TESTS_DIR) + "/../..";
  std::vector<std::string> files = {root + "/README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(root + "/docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path().string());
  const std::regex use(
      "tessel (check|tune-model|tune|model|worker|serve|mcp|explain|emit|show|export|report|copy|"
      "calibrate)\\b([^`|#\n]*)");
  const std::regex quoted("'[^']*'|\"[^\"]*\"");
  const std::regex flag("(^|[^a-zA-Z0-9_-])(--[a-z][a-z0-9-]*)");
  std::map<std::string, std::string> helps;
  std::size_t checked = 0;
  for (const auto& file : files) {
    const std::string text = read_text(file);
    for (std::sregex_iterator u(text.begin(), text.end(), use), end; u != end; ++u) {
      const std::string command = (*u)[1];
      if (!helps.contains(command)) helps[command] = tessel(command + " --help").out;
      const std::string rest = std::regex_replace((*u)[2].str(), quoted, "''");
      for (std::sregex_iterator f(rest.begin(), rest.end(), flag); f != end; ++f) {
        const std::string option = (*f)[2];
        INFO(file, ": tessel ", command, " ", option);
        CHECK(std::regex_search(helps[command], std::regex(option + "(?![a-z0-9-])")));
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("usage errors exit with 2") {
  CHECK(tessel("").code == 2);                                      // no subcommand
  CHECK(tessel("frobnicate").code == 2);                            // unknown subcommand
  CHECK(tessel("check").code == 2);                                 // FILE missing
  CHECK(tessel("check fixtures/no_such_file.tsl").code == 2);       // FILE does not exist
  CHECK(tessel("check fixtures/small.tsl --bogus").code == 2);      // unknown option
  CHECK(tessel("check fixtures/small.tsl --sample -1").code == 2);  // not a count
  CHECK(tessel("check fixtures/small.tsl --seed -3").code == 2);    // not a 64-bit unsigned
  const auto r = tessel("check fixtures/small.tsl --set N");        // not NAME=VALUE
  CHECK(r.code == 2);
  CHECK(contains(r.err, "NAME=VALUE"));
}

TEST_CASE("check reports a small space exactly (golden)") {
  const auto r = tessel("check fixtures/small.tsl");
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK(contains(r.out, "space         small (fixtures/small.tsl)"));
  CHECK(contains(r.out, "raw size      288\n"));
  CHECK(contains(r.out, "valid         78 (27.1%)"));
  check_golden("check_small.txt", mask_time(r.out));
}

TEST_CASE("check --json carries counts, constraint statistics and samples (golden)") {
  const auto r = tessel("check fixtures/small.tsl --json --sample 4 --seed 11");
  REQUIRE(r.code == 0);
  auto j = json_of(r);
  CHECK(j["ok"] == true);
  CHECK(j["space"] == "small");
  CHECK(j["target"] == "trn2");
  CHECK(j["cartesian_size"] == 288);
  CHECK(j["valid"] == 78);
  REQUIRE(j["parameters"].size() == 5);
  CHECK(j["parameters"][1]["name"] == "unroll");
  CHECK(j["parameters"][1]["domain"] == "1 .. 4");
  CHECK(j["parameters"][1]["default"] == 2);
  CHECK(j["parameters"][4]["conditional"] == true);
  REQUIRE(j["constraints"].size() == 2);
  CHECK(j["constraints"][0]["attached_to"] == "unroll");
  CHECK(j["constraints"][0]["rejected"] == 126);  // 7 (tile, unroll) pairs x 3 bufs x 6
  CHECK(j["constraints"][1]["attached_to"] == "bufs");
  CHECK(j["constraints"][1]["rejected"] == 6);  // tile 64, bufs 3 x 6
  CHECK(j["constraints"][1]["message"] == "buffers must fit");
  CHECK(j["groups"].size() == 2);
  REQUIRE(j["samples"].size() == 4);
  for (const auto& sample : j["samples"]) CHECK(sample.contains("tile"));
  CHECK(j["construction_ms"]["total"].get<double>() >= 0.0);
  j.erase("construction_ms");
  check_golden("check_small.json", j.dump(2) + "\n");
}

TEST_CASE("samples are reproducible from the seed") {
  const auto a = json_of(tessel("check fixtures/small.tsl --json --sample 8 --seed 3"));
  const auto b = json_of(tessel("check fixtures/small.tsl --json --sample 8 --seed 3"));
  const auto c = json_of(tessel("check fixtures/small.tsl --json --sample 8 --seed 4"));
  CHECK(a["samples"] == b["samples"]);
  CHECK(a["samples"] != c["samples"]);
  CHECK(json_of(tessel("check fixtures/small.tsl --json --sample 0"))["samples"].empty());
}

TEST_CASE("--set overrides a const; an unknown name is bad input") {
  const auto r = json_of(tessel("check fixtures/small.tsl --json --set N=32"));
  CHECK(r["constants"]["N"] == 32);
  CHECK(r["valid"] == 54);  // 6 (tile, unroll) pairs x 3 bufs x 3 (engine, fuse)

  const auto unknown = tessel("check fixtures/small.tsl --set NN=32");
  CHECK(unknown.code == 1);
  CHECK(contains(unknown.err, "NN"));
  CHECK(unknown.out.empty());
}

TEST_CASE("--target picks a built-in; an unknown target is bad input") {
  CHECK(json_of(tessel("check fixtures/small.tsl --json --target trn1"))["target"] == "trn1");
  const auto r = tessel("check fixtures/small.tsl --target trn9");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "trn9"));
}

TEST_CASE("--space picks a space of a file with several") {
  const auto first = tessel("check fixtures/two_spaces.tsl");
  CHECK(first.code == 0);
  CHECK(contains(first.out,
                 "space         first (fixtures/two_spaces.tsl; space 1 of 2: first, second)"));
  const auto second = json_of(tessel("check fixtures/two_spaces.tsl --json --space second"));
  CHECK(second["space"] == "second");
  CHECK(second["parameters"][0]["domain"] == "pow2(1 .. 64)");
  CHECK(second["parameters"][1]["domain"] == "perm(m, n, k)");
  CHECK(second["valid"] == 7 * 6 - 2 * 4);  // b in {1, 2} needs k first: 2 of 6 orders
  const auto missing = tessel("check fixtures/two_spaces.tsl --space third");
  CHECK(missing.code == 1);
  CHECK(contains(missing.err, "third"));
}

TEST_CASE("malformed text: every diagnostic, rendered, on stderr") {
  const auto r = tessel("check fixtures/malformed.tsl");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "fixtures/malformed.tsl:5:"));
  CHECK(contains(r.err, "tile_q"));
  CHECK(contains(r.err, "fixtures/malformed.tsl:6:"));
  CHECK(contains(r.err, "sbuf_bites_per_partition"));
  CHECK(contains(r.err, "^"));

  const auto j = json_of(tessel("check fixtures/malformed.tsl --json"));
  CHECK(j["ok"] == false);
  CHECK(j["error"]["kind"] == "diagnostics");
  CHECK(j["error"]["diagnostics"].size() >= 2);
  CHECK(j["error"]["diagnostics"][0]["line"] == 5);
}

TEST_CASE("a syntax error is bad input with a location") {
  const auto r = tessel("check fixtures/syntax_error.tsl");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "fixtures/syntax_error.tsl:"));
  CHECK(contains(r.err, "error"));
}

TEST_CASE("an empty space names the constraint that emptied it and what it rejected") {
  const auto r = tessel("check fixtures/empty.tsl");
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(contains(r.err, "emptied by: "));
  CHECK(contains(r.err, "rejected 8 configs"));

  const auto j = json_of(tessel("check fixtures/empty.tsl --json"));
  CHECK(j["ok"] == false);
  CHECK(j["error"]["kind"] == "empty_space");
  CHECK(j["error"]["rejected"] == 8);
}

TEST_CASE("examples/matmul.tsl checks on every Trainium target") {
  for (const char* target : {"trn1", "trn2"}) {
    const auto r = tessel(std::string("check ../../examples/matmul.tsl --target ") + target);
    CHECK(r.code == 0);
    CHECK(contains(r.out, "space         matmul"));
    CHECK(contains(r.out, std::string("target        ") + target));
    CHECK(contains(r.out, "samples (3, seed 0)"));
  }
}
