// The simulator against data/calibration/ (issue 4): the four stages of the
// trn1 matmul tutorial in the published order, each within 25%; the TensorE
// tile-shape and DMA descriptor-size cases within 15%; tessel calibrate's fit
// (tessel/calibration.hpp) on a synthetic recording and the published one.
#include "sim/calibration.hpp"
#include "temp_folder.hpp"

#include <tessel/calibration.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

using namespace tessel::sim;

TEST_CASE("calibration: every published case within its tolerance, tutorial stages in order") {
  const auto rows = run_calibration(std::filesystem::path(TESSEL_DATA_DIR) / "calibration");
  REQUIRE(rows.size() == 12);
  double previous = 1e300, previous_mfu = 0;
  int stages = 0, ladder = 0, held_out = 0;
  for (const auto& r : rows) {
    INFO(r.file << " " << r.name << ": published " << r.published << ", predicted " << r.predicted);
    CHECK(std::abs(r.error()) <= r.tolerance);
    held_out += r.held_out ? 1 : 0;
    if (r.file == "nki_matmul_tutorial_trn1.json") {
      CHECK(r.tolerance == 0.25);
      CHECK(r.predicted < previous);
      previous = r.predicted;
      ++stages;
    } else if (r.file == "matmul_2048_ladder_trn2.json") {
      CHECK(r.held_out);
      CHECK(r.predicted > previous_mfu);  // each step of the ladder faster, as on the chip
      previous_mfu = r.predicted;
      ++ladder;
    } else {
      CHECK(r.tolerance == 0.15);
    }
  }
  CHECK(stages == 4);
  CHECK(ladder == 3);
  CHECK(held_out == 6);  // two tutorial stages, the single-engine DMA case, the ladder
}

TEST_CASE("calibration: rank agreement is Spearman and Kendall over each file's stages") {
  const auto row = [](double published, double predicted) {
    calibration_row r;
    r.file = "f.json";
    r.quantity = "latency_ms";
    r.published = published;
    r.predicted = predicted;
    r.held_out = true;
    return r;
  };
  // same order: 1 and 1; one swapped pair of four: rho 0.8, tau 2/3; reversed: -1
  auto a = rank_agreements({row(1, 10), row(2, 20), row(3, 30), row(4, 40)});
  REQUIRE(a.size() == 1);
  CHECK(a[0].spearman == doctest::Approx(1));
  CHECK(a[0].kendall == doctest::Approx(1));
  CHECK(a[0].held_out);
  a = rank_agreements({row(1, 20), row(2, 10), row(3, 30), row(4, 40)});
  CHECK(a[0].spearman == doctest::Approx(0.8));
  CHECK(a[0].kendall == doctest::Approx(2.0 / 3));
  a = rank_agreements({row(1, 3), row(2, 2), row(3, 1)});
  CHECK(a[0].spearman == doctest::Approx(-1));
  CHECK(a[0].kendall == doctest::Approx(-1));
  // fewer than three stages: no rank figure
  CHECK(rank_agreements({row(1, 3), row(2, 2)}).empty());
  // the published files: every ladder in order
  const auto rows = run_calibration(std::filesystem::path(TESSEL_DATA_DIR) / "calibration");
  for (const auto& r : rank_agreements(rows)) {
    INFO(r.file);
    CHECK(r.kendall == doctest::Approx(1));
  }
}

// --- tessel calibrate: re-fitting the model to recorded device results --------------------

namespace {

/// Writes into `dir` recorded trn2 results made by the simulator itself with
/// `truth` as its constants: the fit must find `truth` again.
void synthetic_recording(const std::map<std::string, double, std::less<>>& truth,
                         const std::filesystem::path& dir) {
  const auto data = std::filesystem::path(TESSEL_DATA_DIR) / "calibration";
  const auto rows = run_calibration(data, truth, {.skip_missing = false, .target = "trn2"});
  std::size_t next = 0;
  for (const char* file : {"tensore_tile_shapes_trn2.json", "dma_descriptor_size_trn2.json"}) {
    std::ifstream in(data / file);
    auto j = nlohmann::json::parse(in);
    for (auto& c : j.at("cases")) {
      const auto& r = rows.at(next++);
      REQUIRE(r.name == c.at("name").get<std::string>());
      c[r.quantity] = r.predicted;
    }
    std::ofstream(dir / file) << j.dump(2);
  }
}

}  // namespace

TEST_CASE("calibrate: recovers known constants from a synthetic recording") {
  const std::map<std::string, double, std::less<>> truth{
      {"tensor_full_tile_efficiency_percent", 90},
      {"tensor_small_tile_penalty_percent", 30},
      {"dma_stream_bytes_per_us_per_engine", 30000},
      {"dma_descriptor_ns", 30}};
  const tessel::testing::temp_folder recording;
  synthetic_recording(truth, recording.path());
  tessel::calibration_options o;
  o.recorded = recording.path();
  for (const auto& [name, value] : truth) o.constants.push_back(name);
  const auto r = tessel::calibrate_simulator(o);
  INFO(r.report());
  CHECK(r.cases.size() == 5);
  CHECK(r.rms_log_error_before > 0.05);
  CHECK(r.rms_log_error_after < 0.005);
  for (const auto& [name, value] : truth)
    CHECK(r.fitted.at(name) == doctest::Approx(value).epsilon(0.03));
  // no target field among them: every one goes to the sim settings
  CHECK(r.sim_settings.find("set.dma_descriptor_ns=") != std::string::npos);
  CHECK(r.target_text.find("target my_trn2 : trn2 {") != std::string::npos);
}

TEST_CASE("calibrate: the published trn2 cases, before and after; the target file parses") {
  tessel::calibration_options o;
  o.recorded = std::filesystem::path(TESSEL_DATA_DIR) / "calibration";
  o.name = "fitted_trn2";
  o.constants = tessel::default_calibration_constants();
  o.constants.emplace_back("elementwise_reciprocal_cycles_per_element");
  const auto r = tessel::calibrate_simulator(o);
  INFO(r.report());
  CHECK(r.cases.size() == 8);  // the trn2 files: the tutorial is timed on trn1
  CHECK(r.rms_log_error_after <= r.rms_log_error_before);
  CHECK(r.fitted.contains("tensor_clock_mhz"));
  const auto targets = tessel::parse_targets(r.target_text);
  REQUIRE(targets.size() == 1);
  CHECK(targets[0].name == "fitted_trn2");
  CHECK(targets[0].base == "trn2");
  CHECK(static_cast<double>(*targets[0].find("tensor_clock_mhz")) ==
        r.fitted.at("tensor_clock_mhz"));
  // a constant no trn2 case reads (no matmul case drains with a reciprocal)
  // is reported, not fitted
  CHECK(std::find(r.insensitive.begin(), r.insensitive.end(),
                  "elementwise_reciprocal_cycles_per_element") != r.insensitive.end());
  CHECK_FALSE(r.fitted.contains("elementwise_reciprocal_cycles_per_element"));
}

TEST_CASE("calibrate: a trn1 base fits the tutorial; bad options and folders are named") {
  tessel::calibration_options o;
  o.recorded = std::filesystem::path(TESSEL_DATA_DIR) / "calibration";
  o.base = "trn1";
  o.name = "my_trn1";
  o.constants = {"dma_descriptor_ns", "dma_issue_ns"};
  o.max_evaluations = 60;
  const auto r = tessel::calibrate_simulator(o);
  CHECK(r.cases.size() == 4);
  CHECK(r.rms_log_error_after <= r.rms_log_error_before);
  CHECK(r.evaluations <= 60 + 1 + 2);

  tessel::calibration_options bad;
  const tessel::testing::temp_folder empty;
  bad.recorded = empty.path();
  CHECK_THROWS_WITH_AS(tessel::calibrate_simulator(bad),
                       doctest::Contains("calibrate: no calibration file for trn2"), tessel::error);
  bad.base = "trn9";
  CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("calibration_options::base"),
                       tessel::options_error);
  o.constants = {"warp_speed"};
  CHECK_THROWS_WITH_AS(tessel::calibrate_simulator(o), doctest::Contains("'warp_speed' is neither"),
                       tessel::error);
}
