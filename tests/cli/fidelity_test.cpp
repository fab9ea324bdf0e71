// `tessel tune --fidelity LOW --fidelity HIGH` and `tessel show` on the
// study it writes (docs/fidelity.md).
#include "tool.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace cli_testing;
using json = nlohmann::json;

namespace {

const std::string table = std::string(TESSEL_DATA_DIR) + "/bench/convolution_RTX_3090.json.gz";

std::string fresh_db(const std::string& name) {
  const auto path = std::filesystem::path(work_folder) / (name + ".tessel.db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  return path.string();
}

}  // namespace

TEST_CASE("tune --fidelity: screens at the first, stops on --high-budget, show reports it") {
  const auto db = fresh_db("fidelity_replay");
  const auto r = tessel("tune '" + table + "' --fidelity 'replay:" + table +
                        ",concurrency=1' --fidelity 'replay:" + table +
                        "' --budget 300 --high-budget 6 --seed 4 --json --quiet --db '" + db + "'");
  REQUIRE(r.code == 0);
  const auto out = json::parse(r.out);
  const auto& f = out.at("fidelity");
  CHECK(f.at("high_evaluations").get<int>() <= 6);
  CHECK(f.at("low_evaluations") == out.at("summary").at("evaluations"));
  CHECK(f.at("promoted_by").at("warmup") == 3);
  CHECK(f.at("kendall_tau").get<double>() == doctest::Approx(1.0));
  CHECK(f.at("correction").at("slope").get<double>() == doctest::Approx(1.0));
  const auto shown = tessel("show '" + db + "' --json");
  REQUIRE(shown.code == 0);
  const auto s = json::parse(shown.out);
  CHECK(s.at("backend").get<std::string>().rfind("fidelity(replay:", 0) == 0);
  CHECK(s.at("fidelity").at("high_evaluations") == f.at("high_evaluations"));
  CHECK(s.at("best").size() <= f.at("high_evaluations").get<std::size_t>());
  CHECK(s.at("best").at(0).at("objective") == out.at("summary").at("best").at("objective"));
  const auto text = tessel("show '" + db + "'");
  CHECK(contains(text.out, "rank agreement        Kendall tau 1.000"));
  CHECK(contains(text.out, "high-fidelity trials"));
}

TEST_CASE("tune --fidelity: the simulator at trn1 screens for trn2; the report has agreement") {
  const auto r =
      tessel("tune '" + std::string(TESSEL_SOURCE_DIR) +
             "/examples/sim_matmul.tsl' --target trn2 --fidelity sim:target=trn1 "
             "--fidelity sim:target=trn2 --no-gate --budget 40 --seed 1 --no-db --quiet");
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "fidelity(sim:matmul@trn1 -> sim:matmul@trn2)"));
  CHECK(contains(r.out, "fidelity\n  low-fidelity evals            40"));
  CHECK(contains(r.out, "rank agreement"));
  CHECK(contains(r.out, "correction            ln high ="));
}

TEST_CASE("tune --fidelity: the simulator's analytic model screens for its event model") {
  const auto r =
      tessel("tune '" + std::string(TESSEL_SOURCE_DIR) +
             "/examples/sim_matmul.tsl' --target trn2 --fidelity sim:model=analytic "
             "--fidelity sim --budget 60 --high-budget 8 --seed 2 --no-db --quiet --json");
  REQUIRE(r.code == 0);
  const auto out = json::parse(r.out);
  const auto& f = out.at("fidelity");
  CHECK(f.at("high_evaluations").get<int>() <= 8);
  CHECK(f.at("low_evaluations").get<int>() > f.at("high_evaluations").get<int>());
  // the best is an event-model timing, gated (the analytic screens are not)
  CHECK(out.at("summary").at("best").at("objective").get<double>() ==
        doctest::Approx(f.at("best_high").get<double>()));
  const auto bad =
      tessel("tune '" + std::string(TESSEL_SOURCE_DIR) +
             "/examples/sim_matmul.tsl' --backend sim --backend-set model=fast --no-db -n 2");
  CHECK(bad.code == 1);
  CHECK(contains(bad.err, "setting model must be one of event, analytic, got 'fast'"));
}

TEST_CASE("tune --fidelity: misuse is refused with a message") {
  const auto one = tessel("tune fixtures/small.tsl --fidelity sim --no-db --budget 3");
  CHECK(one.code == 1);
  CHECK(contains(one.err, "give exactly two, the low fidelity first"));
  const auto setting = tessel("tune '" + table + "' --fidelity replay:" + table +
                              " --fidelity replay:" + table + " --fidelity-set zz=1 --no-db -n 3");
  CHECK(setting.code == 1);
  CHECK(contains(setting.err, "unknown setting 'zz'"));
  const auto top_min =
      tessel("tune '" + table + "' --fidelity replay:" + table + " --fidelity replay:" + table +
             " --fidelity-set top_min=1.5 --no-db -n 3");
  CHECK(top_min.code == 1);
  CHECK(contains(top_min.err,
                 "--fidelity-set: setting top_min must be a whole number >= 0, got '1.5'"));
  const auto min_spread =
      tessel("tune '" + table + "' --fidelity replay:" + table + " --fidelity replay:" + table +
             " --fidelity-set min_spread=-0.01 --no-db -n 3");
  CHECK(min_spread.code == 1);
  CHECK(contains(min_spread.err,
                 "--fidelity-set: setting min_spread=-0.01: must be finite and >= 0"));
  const auto budget = tessel("tune '" + table + "' --high-budget 3 --no-db -n 3");
  CHECK(budget.code == 1);
  CHECK(contains(budget.err,
                 "--high-budget 3: counts high-fidelity evaluations; it needs --fidelity"));
}
