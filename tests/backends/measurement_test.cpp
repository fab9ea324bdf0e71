#include <tessel/measurement.hpp>

#include <doctest/doctest.h>

using namespace tessel;

TEST_CASE("status names round-trip, in declaration order") {
  const auto& all = all_statuses();
  REQUIRE(all.size() == 7);
  CHECK(all.front() == status::ok);
  CHECK(all.back() == status::suspicious);
  for (auto s : all) CHECK(parse_status(to_string(s)) == s);
  CHECK(to_string(status::compile_error) == "compile_error");
  CHECK(to_string(status::runtime_error) == "runtime_error");
  CHECK_FALSE(parse_status("compile-error").has_value());
  CHECK_FALSE(parse_status("").has_value());
}

TEST_CASE("measurement::success and ::failure") {
  const auto ok = measurement::success(2.5, cost{1, 2, 3});
  CHECK(ok.ok());
  CHECK(ok.objective == 2.5);
  CHECK(ok.cost.total() == 6);
  CHECK(ok.message.empty());

  const auto bad = measurement::failure(status::timeout, "too slow", cost{0, 0, 4});
  CHECK_FALSE(bad.ok());
  CHECK(bad.status == status::timeout);
  CHECK(bad.message == "too slow");
  CHECK(bad.cost.run_s == 4);
}

TEST_CASE("outcome_text says the status once") {
  CHECK(outcome_text(status::timeout, "timed out after 2 s") == "timeout: timed out after 2 s");
  CHECK(outcome_text(status::runtime_error, "") == "runtime_error");
  // The gate's verdicts open with their status: not said twice.
  CHECK(outcome_text(status::suspicious, "suspicious: output y is constant") ==
        "suspicious: output y is constant");
  // Only a leading status word followed by ": " counts.
  CHECK(outcome_text(status::suspicious, "suspiciously fast") == "suspicious: suspiciously fast");
  CHECK(outcome_text(status::incorrect, "in the gate (run 1 of 3): suspicious: x") ==
        "incorrect: in the gate (run 1 of 3): suspicious: x");
}
