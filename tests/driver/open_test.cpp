// open_study / reopen_study: a study built from its spec, the spec recorded in
// the study file and read back, and study files written before the spec
// existed (the CLI's eight-key annotations) reopened as they were made.
#include "driver/driver_fixtures.hpp"
#include "temp_folder.hpp"

#include <tessel/backends.hpp>
#include <tessel/driver.hpp>
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/strategies.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

namespace {

using namespace tessel;
using tessel::testing::small_tsl;
using tessel::testing::temp_folder;

std::shared_ptr<backend> bowl() {
  return std::make_shared<callback_backend>([](const space& s, const config& c) {
    const auto tile = s.value_of(c, 0).integer;
    return 1e-3 * (1.0 + static_cast<double>((tile - 16) * (tile - 16)) / 256.0);
  });
}

study_spec small_spec(const std::string& db) {
  study_spec spec;
  spec.file = small_tsl();
  spec.sets = {{"N", "32"}};
  spec.strategy = "random";
  spec.scheduler = "fifo";
  spec.seed = 3;
  spec.db = db;
  spec.budget.evaluations = 6;
  return spec;
}

open_options with_bowl(open_mode mode = open_mode::create) {
  open_options o;
  o.mode = mode;
  o.backend = bowl();
  o.backend_label = "bowl";
  return o;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("open_study: the spec's space, budget and study file; the spec is recorded") {
  const temp_folder dir;
  const auto db = dir.file("small.tessel.db").string();
  std::uint64_t valid = 0;
  {
    auto opened = open_study(small_spec(db), with_bowl());
    valid = opened.study->space().count();
    CHECK(valid < 78);  // N = 32, not the file's 64
    CHECK(opened.evaluates);
    CHECK(opened.spec.backend == "bowl");
    const auto sum = opened.study->run(opened.until());
    CHECK(sum.evaluations == 6);
    CHECK(sum.reason == termination::evaluations);
  }
  const auto stored = reopen_study(db);
  CHECK(stored.space.count() == valid);
  CHECK(stored.trials.size() == 6);
  CHECK(stored.spec.sets.at("N") == "32");
  CHECK(stored.spec.seed == 3);
  CHECK(stored.spec.strategy == "random");
  CHECK(stored.spec.budget.evaluations == 6);
}

TEST_CASE("open_study: a study file with trials needs resume; overwrite starts over") {
  const temp_folder dir;
  const auto db = dir.file("small.tessel.db").string();
  {
    auto first = open_study(small_spec(db), with_bowl());
    (void)first.study->run(first.until());
  }
  CHECK_THROWS_WITH_AS((void)open_study(small_spec(db), with_bowl()),
                       doctest::Contains("with 6 trials (see `tessel show"), error);
  {
    auto spec = small_spec(db);
    spec.budget.evaluations = 9;
    auto resumed = open_study(spec, with_bowl(open_mode::resume));
    CHECK(resumed.study->trials().size() == 6);
    CHECK(resumed.study->run(resumed.until()).evaluations == 9);
  }
  auto over = open_study(small_spec(db), with_bowl(open_mode::overwrite));
  CHECK(over.study->trials().empty());
}

TEST_CASE("open_study: no backend means the caller measures; a replay file is its own backend") {
  study_spec spec;
  spec.file = small_tsl();
  auto opened = open_study(spec, open_mode::create);
  CHECK_FALSE(opened.evaluates);
  CHECK(opened.backend->name() == "external");
  CHECK(opened.db == nullptr);

  study_spec replay;
  replay.file = std::string(TESSEL_DATA_DIR) + "/bench/convolution_RTX_3090.json.gz";
  replay.budget.evaluations = 3;
  auto table = open_study(replay, open_mode::create);
  CHECK(table.spec.backend == "replay:" + replay.file);
  CHECK(table.study->run(table.until()).evaluations == 3);
}

TEST_CASE("open_study: without a target, a study on the cpu backend is checked against cpu") {
  study_spec spec;
  spec.file = std::string(TESSEL_SOURCE_DIR) + "/examples/cpu_gemm.tsl";
  spec.backend = "cpu";
  const auto opened = open_study(spec, open_mode::create);
  CHECK(opened.spec.target == "cpu");  // as `tessel tune FILE --backend cpu` records it
  CHECK(opened.study->space().def().target.name == "cpu");
  CHECK(read_space(spec).space.def().target.name == "cpu");
}

TEST_CASE("reopen_study: a study file with the CLI's old eight-key annotations") {
  // What `tessel tune small.tsl --set N=32 --db ...` recorded before the
  // study spec: its command line as eight keys, --set as NAME=VALUE strings.
  const temp_folder dir;
  const auto db = dir.file("old.tessel.db").string();
  parse_options parse;
  parse.file = small_tsl();
  parse.overrides["N"] = "32";
  const auto s = parse_space(text_of(small_tsl()), parse);
  {
    study_options o;
    o.annotations =
        R"({"file": ")" + small_tsl() +
        R"(", "space": "", "target": "trn2", "set": ["N=32"], "backend": "command:./bench",
            "replay_space": "product", "strategy": "random", "fidelity": []})";
    study st(s, bowl(), make_strategy("random"), o, std::make_shared<sqlite_store>(db));
    (void)st.run(stop::evaluations(4));
  }
  const auto stored = reopen_study(db);
  CHECK(stored.space.count() == s.count());
  CHECK(stored.space.count() < 78);
  CHECK(stored.trials.size() == 4);
  CHECK(stored.spec.backend == "command:./bench");
  CHECK(stored.spec.sets.at("N") == "32");
}

TEST_CASE("open_store and reopen_study name what is missing") {
  const temp_folder dir;
  CHECK_THROWS_WITH_AS((void)reopen_study(dir.file("none.db").string()),
                       doctest::Contains("no study file '"), error);
  (void)open_store(dir.file("empty.db").string(), store_access::write);
  CHECK_THROWS_WITH_AS((void)reopen_study(dir.file("empty.db").string()),
                       doctest::Contains("holds no study yet"), error);
}
