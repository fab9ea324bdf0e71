// The simulator against data/calibration/ (issue 4): the four stages of the
// trn1 matmul tutorial in the published order, each within 25%; the TensorE
// tile-shape and DMA descriptor-size cases within 15%.
#include "sim/calibration.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace tessel::sim;

TEST_CASE("calibration: every published case within its tolerance, tutorial stages in order") {
  const auto rows = run_calibration(std::filesystem::path(TESSEL_DATA_DIR) / "calibration");
  REQUIRE(rows.size() == 9);
  double previous = 1e300;
  int stages = 0;
  for (const auto& r : rows) {
    INFO(r.file << " " << r.name << ": published " << r.published << ", predicted " << r.predicted);
    CHECK(std::abs(r.error()) <= r.tolerance);
    if (r.file == "nki_matmul_tutorial_trn1.json") {
      CHECK(r.tolerance == 0.25);
      CHECK(r.predicted < previous);
      previous = r.predicted;
      ++stages;
    } else {
      CHECK(r.tolerance == 0.15);
    }
  }
  CHECK(stages == 4);
}
