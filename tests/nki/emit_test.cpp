// emit_test.cpp: tessel::emit_nki for every workload (docs/nki.md). Emits
// 16 sampled configs of each workload's example space (at reduced sizes) and
// deliberately broken emissions into a folder with a manifest that
// check_emitted.py runs on the NKI interpreter (ctest nki.interpret), and
// pins the text of each workload's default config (tests/nki/golden/;
// TESSEL_UPDATE_GOLDEN=1 rewrites them).
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// One workload's example space, shrunk so numpy runs each kernel in well under a second.
struct example {
  std::string workload, file;
  std::map<std::string, std::string, std::less<>> sets;
};

const std::vector<example>& examples() {
  static const std::vector<example> list{
      {"matmul", "sim_matmul.tsl", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      {"rmsnorm", "sim_rmsnorm.tsl", {{"rows", "512"}, {"hidden", "1024"}}},
      {"softmax", "sim_softmax.tsl", {{"rows", "512"}, {"cols", "1024"}}},
      {"layernorm", "sim_layernorm.tsl", {{"rows", "512"}, {"hidden", "1024"}}},
      {"attention", "sim_attention.tsl", {{"seq", "512"}}},
      {"swiglu", "swiglu.tsl", {{"tokens", "256"}, {"d_model", "512"}, {"d_ff", "640"}}},
      {"cross_entropy",
       "cross_entropy.tsl",
       {{"tokens", "256"}, {"d_model", "256"}, {"vocab", "1000"}}},
      {"moe",
       "moe.tsl",
       {{"tokens", "48"}, {"d_in", "256"}, {"d_out", "768"}, {"experts", "8"}, {"top_k", "2"}}},
      {"newton_schulz", "sim_newton_schulz.tsl", {{"rows", "192"}, {"cols", "640"}}},
  };
  return list;
}

tessel::space load(const example& e, const std::string& target = "trn2") {
  tessel::parse_options o;
  o.overrides = e.sets;
  o.target = target;
  return tessel::load_space(fs::path(TESSEL_SOURCE_DIR) / "examples" / e.file, o);
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

/// Whether the simulator also rejects (s, c) (a compile error): such a
/// config has no kernel, and is not counted among the sampled ones.
bool simulator_rejects(const tessel::space& s, const tessel::config& c) {
  tessel::sim_options o;
  o.gate = false;
  tessel::sim_backend b(o);
  b.prepare(s);
  return b.evaluate(s, c).status == tessel::status::compile_error;
}

}  // namespace

TEST_CASE("emit_nki writes 16 sampled configs of every workload and broken emissions") {
  const fs::path dir = fs::path(TESSEL_BINARY_DIR) / "emitted";
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& e : examples()) {
    CAPTURE(e.workload);
    const auto s = load(e);
    tessel::rng random(11);
    std::set<std::uint64_t> seen;
    int kept = 0, rejected = 0;
    for (int attempt = 0; kept < 16 && attempt < 400; ++attempt) {
      const auto c = s.sample(random);
      if (!seen.insert(s.key(c)).second) continue;
      std::string text;
      try {
        text = tessel::emit_nki(s, c);
      } catch (const tessel::error& err) {
        INFO(err.what(), " for ", s.to_json(c));
        REQUIRE(simulator_rejects(s, c));
        ++rejected;
        continue;
      }
      const std::string name = fmt::format("{}_{:02d}.py", e.workload, kept);
      write(dir / name, text);
      manifest.push_back({{"file", name},
                          {"workload", e.workload},
                          {"expect", "pass"},
                          {"config", s.to_json(c)},
                          {"sbuf_bytes", 212984}});
      if (kept < 4)
        for (const char* fault : {"drop_tail", "skip_accumulation"}) {
          tessel::nki_options o;
          o.fault = fault;
          const std::string broken = fmt::format("{}_{:02d}_{}.py", e.workload, kept, fault);
          write(dir / broken, tessel::emit_nki(s, c, o));
          manifest.push_back({{"file", broken},
                              {"workload", e.workload},
                              {"expect", "fail"},
                              {"fault", fault},
                              {"config", s.to_json(c)},
                              {"sbuf_bytes", 212984}});
        }
      ++kept;
    }
    MESSAGE(e.workload, ": ", kept, " configs emitted, ", rejected,
            " sampled configs the simulator rejects too");
    CHECK(kept == 16);
  }
  write(dir / "manifest.json", manifest.dump(1));
}

TEST_CASE("the emitted text of each workload's default config is pinned") {
  const fs::path golden = fs::path(TESSEL_SOURCE_DIR) / "tests" / "nki" / "golden";
  const bool update = std::getenv("TESSEL_UPDATE_GOLDEN") != nullptr;
  for (const auto& e : examples()) {
    CAPTURE(e.workload);
    const auto s = load(e);
    const auto c = s.default_config();
    REQUIRE(c.has_value());
    tessel::nki_options o;
    o.source = "examples/" + e.file;
    const std::string text = tessel::emit_nki(s, *c, o);
    const fs::path path = golden / (e.workload + ".py");
    if (update) write(path, text);
    INFO("regenerate with TESSEL_UPDATE_GOLDEN=1 ctest -R nki.emit after checking the change");
    CHECK(read(path) == text);
  }
}

TEST_CASE("emit_nki names what it cannot do") {
  const auto s = load(examples()[0]);
  tessel::nki_options o;
  o.fault = "typo";
  CHECK_THROWS_AS((void)tessel::emit_nki(s, *s.default_config(), o), tessel::options_error);
  o = {};
  o.target = "trn9";
  CHECK_THROWS_AS((void)tessel::emit_nki(s, *s.default_config(), o), tessel::options_error);
  o = {};
  o.workload = "no_such_workload";
  CHECK_THROWS_AS((void)tessel::emit_nki(s, *s.default_config(), o), tessel::error);
}
