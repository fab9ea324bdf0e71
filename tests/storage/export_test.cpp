// export_trials: golden files for T4, CSV and JSON lines on a small study,
// the T4 schema's required fields, and format names.
//
// To regenerate the golden files after a deliberate change:
//   TESSEL_UPDATE_GOLDEN=1 ./test_storage -tc='export*'
// and review the diff.
#include "storage_fixtures.hpp"

#include <tessel/error.hpp>
#include <tessel/storage.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

using namespace tessel;
using namespace tessel::testing;

namespace {

const std::filesystem::path golden_dir =
    std::filesystem::path(TESSEL_SOURCE_DIR) / "tests" / "storage" / "golden";

/// Four trials: an ok one with a prediction and metrics, a compile error, an
/// incorrect one whose note and message need quoting, and one still running.
std::vector<trial> small_study(const space& s) {
  auto c = [&](const char* json) { return s.from_json(json); };
  std::vector<trial> trials(4);
  trials[0].config = c(
      R"({"tile": 256, "home": "hbm", "order": ["m", "k", "n"], "fast": true, "prefetch": true})");
  trials[0].provenance = {"baseline", 0, ""};
  trials[0].prediction = prediction{0.002, 0.0005, 0.9, 0.0001, 1.5, 0.25};
  trials[0].result = measurement{status::ok,
                                 0.00125,
                                 {0.00126, 0.00125, 0.00124},
                                 {1.5, 0.25, 0.75},
                                 {{"pe_busy", 0.5}, {"bytes_moved", 1048576}},
                                 ""};
  trials[1].config = c(R"({"tile": 512, "home": "sbuf", "order": ["k", "m", "n"], "fast": false})");
  trials[1].provenance = {"ga", 0, ""};
  trials[1].result = measurement{status::compile_error, 0,  {},
                                 {2.25, 0, 0},          {}, "SBUF overflow: 262144 > 196608 bytes"};
  trials[2].config = c(R"({"tile": 128, "home": "sbuf", "order": ["n", "m", "k"], "fast": true})");
  trials[2].provenance = {"agent", 812, "try \"n\" outermost, for reuse"};
  trials[2].result = measurement{status::incorrect,  0.0009, {0.0009},
                                 {1.25, 0.5, 0.125}, {},     "max abs error 0.5, at [3, 7]"};
  trials[3].config = c(
      R"({"tile": 128, "home": "hbm", "order": ["k", "n", "m"], "fast": false, "prefetch": false})");
  trials[3].provenance = {"ga", 0, ""};
  for (std::size_t i = 0; i < trials.size(); ++i) {
    auto& t = trials[i];
    t.id = i + 1;
    t.key = s.key(t.config);
    t.state = i == 3 ? trial_state::running : trial_state::finished;
    t.proposed_at = 0.5 * static_cast<double>(i);
    t.finished_at = i == 3 ? 0 : t.proposed_at + 4.25;
  }
  return trials;
}

study_record small_record(const space& s) {
  auto r = storage_record(s);
  r.seed = 42;
  r.created_at = 1767225600.25;  // 2026-01-01 00:00:00.25 UTC
  return r;
}

std::string exported(export_format f) {
  const auto s = storage_space();
  std::ostringstream out;
  export_trials(out, f, small_record(s), small_study(s), s);
  return out.str();
}

void check_golden(const std::string& got, const std::string& name) {
  const auto path = golden_dir / name;
  if (std::getenv("TESSEL_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << got;
    MESSAGE("updated ", path.string());
  }
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "missing golden file ", path.string());
  std::stringstream want;
  want << in.rdbuf();
  CHECK(got == want.str());
}

}  // namespace

TEST_CASE("export: T4 matches its golden file") {
  check_golden(exported(export_format::t4), "study.t4.json");
}

TEST_CASE("export: CSV matches its golden file") {
  check_golden(exported(export_format::csv), "study.csv");
}

TEST_CASE("export: JSON lines match their golden file") {
  check_golden(exported(export_format::json), "study.jsonl");
}

TEST_CASE("export: T4 has what Kernel Tuner's results schema requires") {
  const auto doc = nlohmann::json::parse(exported(export_format::t4));
  CHECK(doc.at("schema_version") == "1.0.0");
  CHECK(doc.at("metadata").at("timeunit") == "seconds");
  const auto& results = doc.at("results");
  REQUIRE(results.size() == 3);  // the running trial has no result yet
  const std::set<std::string> invalidities{"timeout",     "compile",     "runtime",
                                           "correctness", "constraints", "correct"};
  for (const auto& r : results) {
    for (const char* field : {"configuration", "times", "invalidity", "correctness"})
      CHECK(r.contains(field));
    CHECK(invalidities.count(r.at("invalidity").get<std::string>()) == 1);
    CHECK(r.at("timestamp").is_string());
    CHECK(r.at("objectives") == nlohmann::json::array({"time"}));
    CHECK(r.at("configuration").size() == 5);
  }
  CHECK(results[0].at("timestamp") == "2026-01-01 00:00:04.500000+00:00");
  CHECK(results[0].at("times").at("runtimes").size() == 3);
  CHECK(results[1].at("invalidity") == "compile");
  CHECK(results[1].at("measurements")[0].at("value") == "CompilationFailedConfig");
  CHECK(results[2].at("invalidity") == "correctness");
  CHECK(results[2].at("correctness") == 0);
  CHECK(results[1].at("configuration").at("prefetch").is_null());
}

TEST_CASE("export: every JSON line parses and names its trial") {
  std::istringstream in(exported(export_format::json));
  std::string line;
  std::uint64_t id = 0;
  while (std::getline(in, line)) {
    const auto o = nlohmann::json::parse(line);
    CHECK(o.at("trial_id") == ++id);
    CHECK(o.at("key").get<std::string>().size() == 16);
  }
  CHECK(id == 4);
}

TEST_CASE("export: from a study file, as the CLI does") {
  const temp_folder dir;
  const auto s = storage_space();
  const auto trials = small_study(s);
  sqlite_store db(dir.file("export.tessel.db"));
  db.begin(small_record(s));
  db.save_all(trials, s);
  auto record = *db.study();
  record.created_at = small_record(s).created_at;  // the golden file's clock
  std::ostringstream out;
  export_trials(out, export_format::csv, record, db.load(s), s);
  check_golden(out.str(), "study.csv");
}

TEST_CASE("export: format names") {
  CHECK(parse_export_format("t4") == export_format::t4);
  CHECK(parse_export_format("csv") == export_format::csv);
  CHECK(parse_export_format("json") == export_format::json);
  CHECK(parse_export_format("jsonl") == export_format::json);
  for (auto f : {export_format::t4, export_format::csv, export_format::json})
    CHECK(parse_export_format(to_string(f)) == f);
  CHECK_THROWS_WITH_AS((void)parse_export_format("xml"),
                       "unknown export format 'xml' (known: t4, csv, json)", error);
}

TEST_CASE("export: a study with no finished trial") {
  const auto s = storage_space();
  auto trials = small_study(s);
  trials.erase(trials.begin(), trials.begin() + 3);  // only the running one
  std::ostringstream t4, csv, jsonl;
  export_trials(t4, export_format::t4, small_record(s), trials, s);
  const auto doc = nlohmann::json::parse(t4.str());
  CHECK(doc.at("results").empty());
  export_trials(csv, export_format::csv, small_record(s), {}, s);
  CHECK(csv.str() ==
        "id,state,source,status,objective,compile_s,gate_s,run_s,tile,home,order,fast,prefetch\n");
  export_trials(jsonl, export_format::json, small_record(s), {}, s);
  CHECK(jsonl.str().empty());
}

TEST_CASE("export: a damaged study file's times give years 1970..9999, not overflow") {
  // Found by fuzz_study_file: a created_at of 1e300 overflowed std::chrono
  // (undefined behaviour; a garbage timestamp in the release build).
  const auto s = storage_space();
  const auto trials = small_study(s);
  for (const double created_at : {1e300, -1e300, 1e17}) {
    auto record = small_record(s);
    record.created_at = created_at;
    std::ostringstream t4;
    export_trials(t4, export_format::t4, record, trials, s);
    const auto doc = nlohmann::json::parse(t4.str());
    REQUIRE(!doc.at("results").empty());
    const auto stamp = doc["results"][0]["timestamp"].get<std::string>();
    INFO(stamp);
    CHECK((stamp.starts_with("9999-12-31") || stamp.starts_with("1970-01-01")));
  }
}
