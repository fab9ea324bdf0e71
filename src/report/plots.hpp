// src/report/plots.hpp: each plot of the report, drawn from a study's
// trials (tessel/report.hpp lists them).
#pragma once

#include <tessel/report.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tessel::report_detail {

/// The trials a report reads, sorted once.
struct study_view {
  const report_input& in;
  const space& s;
  std::vector<const trial*> finished;  ///< in the order they finished
  std::vector<const trial*> measured;  ///< finished, ok and not a low-fidelity screen
  std::vector<const trial*> best;      ///< `measured`, best first, at most in.top
  explicit study_view(const report_input& input);
};

/// One plot: its name, what its caption says, and how it is drawn. draw()
/// returns nullopt (and `why` says why) when the study has nothing for it.
struct plot {
  std::string_view name;
  std::string_view heading;
  std::string_view caption;
  std::optional<std::string> (*draw)(const study_view& v, bool standalone, std::string& why);
};

/// Every plot, in report order (the order of report_plot_names()).
[[nodiscard]] const std::vector<plot>& plots();

}  // namespace tessel::report_detail
