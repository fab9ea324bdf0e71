// `tessel model` and `tessel tune-model` as a user runs them (docs/models.md):
// the step is the calls-weighted sum of the kernels' times, a kernel's time
// is what `tune` measures for its config, the budget is shared and resumed,
// and both example models run.
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace cli_testing;
using json = nlohmann::json;

namespace {

const std::string examples = std::string(TESSEL_SOURCE_DIR) + "/examples/";

std::string fresh_dir(const std::string& name) {
  const auto path = std::filesystem::path(work_folder) / name;
  std::filesystem::remove_all(path);
  return path.string();
}

}  // namespace

TEST_CASE("model: the step is the calls-weighted sum, each kernel what tune measures") {
  const auto r = tessel("model fixtures/two_kernels.tsl --json");
  REQUIRE(r.code == 0);
  const auto out = json::parse(r.out).at("targets").at(0);
  const auto& kernels = out.at("kernels");
  REQUIRE(kernels.size() == 2);
  double sum = 0;
  for (const auto& k : kernels) {
    CHECK(k.at("step_s").get<double>() ==
          doctest::Approx(k.at("calls").get<double>() * k.at("per_call_s").get<double>()));
    sum += k.at("step_s").get<double>();
    double split = 0;
    for (const auto& [name, s] : k.at("by_category_s").items()) split += s.get<double>();
    CHECK(split == doctest::Approx(k.at("step_s").get<double>()));
  }
  CHECK(out.at("step_s").get<double>() == doctest::Approx(sum));
  CHECK(out.at("by_group_s").at("rows").get<double>() ==
        doctest::Approx(kernels.at(0).at("step_s").get<double>()));
  // the norm at its default config is the baseline a tune of its space measures
  const auto tuned = tessel(
      "tune ../../examples/sim_rmsnorm.tsl --backend sim --set rows=1024 --set hidden=512 "
      "--budget 1 --no-db --json --quiet");
  REQUIRE(tuned.code == 0);
  CHECK(kernels.at(0).at("per_call_s").get<double>() ==
        json::parse(tuned.out).at("summary").at("best_objective").get<double>());
}

TEST_CASE("model: the tables, groups and a comparison of two targets") {
  const auto r = tessel("model fixtures/two_kernels.tsl --target trn2 --target trn2_lnc2");
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "model two (fixtures/two_kernels.tsl) on trn2, backend sim: 2 kernels"));
  CHECK(contains(r.out, "on trn2_lnc2"));
  CHECK(contains(r.out, "by category: matmul"));
  CHECK(contains(r.out, "by group: "));
  CHECK(contains(r.out, "shortest step: "));
  CHECK(contains(r.out, "per physical core"));
}

TEST_CASE("model: a bad model file is a located error, exit 1") {
  const auto dir = fresh_dir("bad_model");
  std::filesystem::create_directories(dir);
  const auto file = dir + "/bad.tsl";
  {
    std::ofstream out(file);
    out << "model m {\n  kernel k { space \"nowhere.tsl\" calls 2 }\n}\n";
  }
  const auto r = tessel("model '" + file + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.err, "bad.tsl:2:14: error: kernel 'k': cannot read '"));
  CHECK(contains(r.err, "nowhere.tsl': No such file or directory"));
  // A folder where the space file should be: said as such, not "cannot read".
  std::filesystem::create_directories(dir + "/folder.tsl");
  {
    std::ofstream out(file);
    out << "model m {\n  kernel k { space \"folder.tsl\" calls 2 }\n}\n";
  }
  const auto folder = tessel("model '" + file + "'");
  CHECK(folder.code == 1);
  CHECK(contains(folder.err, "folder.tsl' is a directory, not a file"));
  const auto none = tessel("model ../../examples/sim_matmul.tsl");
  CHECK(none.code == 1);
  CHECK(contains(none.err, "no model is defined"));
}

TEST_CASE("tune-model: one budget over the kernels, one study file each, resumed") {
  const auto dir = fresh_dir("two_kernels.tessel");
  const auto first = tessel(
      "tune-model fixtures/two_kernels.tsl --budget 10 --quiet --json --db-dir '" + dir + "'");
  REQUIRE(first.code == 0);
  const auto a = json::parse(first.out).at("targets").at(0);
  CHECK(a.at("evaluations").get<int>() == 10);
  CHECK(a.at("after_s").get<double>() <= a.at("before_s").get<double>());
  int evaluations = 0;
  for (const auto& k : a.at("kernels")) evaluations += k.at("evaluations").get<int>();
  CHECK(evaluations == 10);
  // each kernel's study file is an ordinary study: show rebuilds its space
  const auto shown = tessel("show '" + dir + "/proj.tessel.db'");
  CHECK(shown.code == 0);
  CHECK(contains(shown.out, "small_matmul"));
  // without --resume the files are refused; with it the budget continues
  const auto refused =
      tessel("tune-model fixtures/two_kernels.tsl --budget 14 --quiet --db-dir '" + dir + "'");
  CHECK(refused.code == 1);
  CHECK(contains(refused.err, "pass --resume to continue it"));
  const auto resumed =
      tessel("tune-model fixtures/two_kernels.tsl --budget 14 --quiet --json --resume --db-dir '" +
             dir + "'");
  REQUIRE(resumed.code == 0);
  const auto b = json::parse(resumed.out).at("targets").at(0);
  CHECK(b.at("evaluations").get<int>() == 14);
  CHECK(b.at("before_s").get<double>() == a.at("before_s").get<double>());
  CHECK(b.at("after_s").get<double>() <= a.at("after_s").get<double>());
  // the tuned step, decomposed from the study files
  const auto from = tessel("model fixtures/two_kernels.tsl --json --from '" + dir + "'");
  REQUIRE(from.code == 0);
  CHECK(json::parse(from.out).at("targets").at(0).at("step_s").get<double>() ==
        doctest::Approx(b.at("after_s").get<double>()));
}

TEST_CASE("tune-model --resume goes on with the kernels' own strategy and seed") {
  // Before: without the first run's --seed 5 --strategy random the kernel
  // studies went on with auto and seeds 0, 1, ...
  const auto resumed = fresh_dir("resumed_model"), whole = fresh_dir("whole_model");
  const std::string run = "tune-model fixtures/two_kernels.tsl --quiet --json";
  const std::string began = " --seed 5 --strategy random";
  REQUIRE(tessel(run + " --budget 12 --db-dir '" + whole + "'" + began).code == 0);
  REQUIRE(tessel(run + " --budget 6 --db-dir '" + resumed + "'" + began).code == 0);
  const auto r = tessel(run + " --budget 12 --resume --db-dir '" + resumed + "'");
  REQUIRE(r.code == 0);
  CHECK(r.err == "tessel: note: the study files in " + resumed +
                     ": resuming with --strategy random --seed 5, as it began (as the study "
                     "recorded it)\n");
  for (const char* kernel : {"/proj.tessel.db", "/norm.tessel.db"}) {
    INFO(kernel);
    auto configs = [&](const std::string& dir) {  // in trial order
      const auto trials = tessel("export '" + dir + kernel + "' --format json");
      REQUIRE(trials.code == 0);
      std::vector<std::string> out;
      std::istringstream lines(trials.out);
      for (std::string line; std::getline(lines, line);)
        out.push_back(json::parse(line).at("config").dump());
      return out;
    };
    CHECK(configs(resumed) == configs(whole));
  }
}

TEST_CASE("the example models: the README commands run") {
  for (const auto* file : {"models/dense_60m.tsl", "models/qwen3_moe_layer.tsl"}) {
    const auto r = tessel("model '" + examples + file + "' --no-gate");
    CHECK(r.code == 0);
    CHECK(contains(r.out, "by group: "));
  }
  const auto dense = tessel("model '" + examples + "models/dense_60m.tsl' --no-gate --json");
  const auto groups = json::parse(dense.out).at("targets").at(0).at("by_group_s");
  CHECK(groups.contains("body"));
  CHECK(groups.contains("head"));
  const auto tuned = tessel("tune-model '" + examples +
                            "models/qwen3_moe_layer.tsl' --budget 20 --no-db --quiet --no-gate");
  CHECK(tuned.code == 0);
  CHECK(contains(tuned.out, "model qwen3_moe_layer on trn2: 20 evaluations"));
  CHECK(contains(tuned.out, "the gap to the roofline left in the step"));
}

TEST_CASE("model and tune-model default --target as tune does: cpu on the cpu backend") {
  // Before: their default was a literal "trn2" of their own, so a model of
  // cpu kernels needed --target cpu with --backend cpu where tune does not.
  const auto r = tessel("model fixtures/cpu_model.tsl --backend cpu --json");
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out).at("targets").at(0).at("target") == "cpu");
  // and --help shows the one default every command has
  for (const char* command : {"tune", "check", "model", "tune-model"}) {
    INFO(command);
    const auto help = tessel(std::string(command) + " --help");
    CHECK(contains(help.out, "--target TARGET=trn2 "));
  }
}
