// emit_test.cpp: tessel::emit_nki over every example space the simulator
// takes (docs/nki.md, "Coverage"). For each, at a reduced shape where every
// knob still varies: the best config of a short `tessel tune`, written by
// `tessel emit --best` as a user gets it, the default config and
// uniformly sampled valid configs are emitted, with deliberately broken
// emissions of a few, into a folder with a manifest that check_emitted.py
// runs on the NKI interpreter (ctest nki.interpret): each kernel must match
// its reference on the gate's input distributions and do exactly what the
// simulator timed (the file's STRUCTURE); more sampled configs are checked
// for structure alone (counted without computing), and the default config
// also at the example's full shape. A config the simulator accepts but the
// emitter refuses fails here. How many: TESSEL_NKI_NUMERIC and
// TESSEL_NKI_STRUCTURE (benchmarks/nki_coverage.sh raises them); where:
// TESSEL_NKI_EMITTED (default: the build's tests/nki/emitted, which ctest
// nki.interpret reads; nki_coverage.sh writes elsewhere, so a benchmark and
// ctest on one build do not overwrite each other's kernels). The
// workloads whose kernels are SPMD on a two-core logical NeuronCore are also
// emitted for trn2_lnc2 (lnc2_shapes), with a third as many configs run and
// a fifth as many counted. Also pins
// the text of each workload's default config in tests/nki/golden/
// (TESSEL_UPDATE_GOLDEN=1 rewrites them).
#include <tessel/dsl.hpp>
#include <tessel/error.hpp>
#include <tessel/random.hpp>
#include <tessel/sim.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using sets = std::map<std::string, std::string, std::less<>>;

/// The reduced shape of each example space the simulator takes: small enough
/// that numpy runs a kernel in well under a second, with tails and several
/// blocks so that every knob still changes the schedule. A new example space
/// needs a line here (the coverage test fails until it has one).
const std::map<std::string, sets, std::less<>>& reduced_shapes() {
  static const std::map<std::string, sets, std::less<>> table{
      {"sim_matmul.tsl", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      {"matmul.tsl", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      {"sim_rmsnorm.tsl", {{"rows", "512"}, {"hidden", "1024"}}},
      {"rmsnorm.tsl", {{"rows", "512"}, {"hidden", "1024"}}},
      {"sim_softmax.tsl", {{"rows", "512"}, {"cols", "1024"}}},
      {"sim_layernorm.tsl", {{"rows", "512"}, {"hidden", "1024"}}},
      {"sim_attention.tsl", {{"seq", "512"}}},
      {"attention.tsl", {{"seq", "512"}}},
      // d_ff 640: ff blocks have tails
      {"swiglu.tsl", {{"tokens", "256"}, {"d_model", "512"}, {"d_ff", "640"}}},
      // vocab 1000: chunks have tails
      {"cross_entropy.tsl", {{"tokens", "256"}, {"d_model", "256"}, {"vocab", "1000"}}},
      // top-2 of 8 experts over 48 tokens: uneven groups, every group tile partial
      {"moe.tsl",
       {{"tokens", "48"}, {"d_in", "256"}, {"d_out", "768"}, {"experts", "8"}, {"top_k", "2"}}},
      {"sim_newton_schulz.tsl", {{"rows", "192"}, {"cols", "640"}}},
      // on trn2 (one rank) tp = 1: the matmul kernel of the whole problem
      {"sharded_matmul.tsl", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
      // on trn2 tp = 1: attention's kernel in a loop over two stacked heads
      {"sharded_attention.tsl", {{"seq", "256"}, {"heads", "2"}}},
      // on trn2 ep = 1: moe's kernel of the whole layer
      {"sharded_moe.tsl",
       {{"tokens", "48"}, {"d_in", "256"}, {"d_out", "768"}, {"experts", "8"}, {"top_k", "2"}}},
      // K 512: two k blocks of 256 (double_row) or one of 512
      {"sim_fp8_matmul.tsl", {{"M", "256"}, {"N", "1024"}, {"K", "512"}}},
  };
  return table;
}

/// The example whose default config's kernel is pinned as golden/<workload>.py
/// (matmul_fp8: matmul's fp8 example, double_row and scale = row).
const std::map<std::string, std::string, std::less<>>& golden_examples() {
  static const std::map<std::string, std::string, std::less<>> table{
      {"matmul", "sim_matmul.tsl"},           {"rmsnorm", "sim_rmsnorm.tsl"},
      {"softmax", "sim_softmax.tsl"},         {"layernorm", "sim_layernorm.tsl"},
      {"attention", "sim_attention.tsl"},     {"swiglu", "swiglu.tsl"},
      {"cross_entropy", "cross_entropy.tsl"}, {"moe", "moe.tsl"},
      {"matmul_fp8", "sim_fp8_matmul.tsl"},   {"newton_schulz", "sim_newton_schulz.tsl"},
  };
  return table;
}

constexpr std::int64_t sbuf_bytes = 212984;  // trn2, what the interpreter allows

int from_env(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::max(0, std::atoi(v)) : fallback;
}

/// The space of `path` on `target`, its constants overridden as `--set` does.
tessel::space load_path(const fs::path& path, const sets& overrides,
                        const std::string& target = "trn2") {
  tessel::parse_options o;
  o.overrides = overrides;
  o.target = target;
  return tessel::load_space(path, o);
}

tessel::space load(const std::string& file, const sets& overrides,
                   const std::string& target = "trn2") {
  return load_path(fs::path(TESSEL_SOURCE_DIR) / "examples" / file, overrides, target);
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

/// The example spaces the simulator takes (a workload it knows), by file name.
std::vector<std::string> sim_examples() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(fs::path(TESSEL_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".tsl") continue;
    const auto name = entry.path().filename().string();
    try {
      tessel::sim_backend b;
      b.prepare(load(name, {}));
    } catch (const tessel::error&) {
      continue;
    }
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The simulator's workload of `s` (its backend's name is "sim:NAME@target").
std::string workload_of(const tessel::space& s) {
  tessel::sim_backend b;
  b.prepare(s);
  return b.name().substr(4, b.name().find('@') - 4);
}

/// The simulator's verdict on (s, c): does it time it (compile)?
bool simulator_times(const tessel::space& s, const tessel::config& c) {
  tessel::sim_options o;
  o.gate = false;
  tessel::sim_backend b(o);
  b.prepare(s);
  return b.evaluate(s, c).status != tessel::status::compile_error;
}

/// `tessel ARGS` as a user runs it; its exit code.
int run_cli(const std::string& args) {
  const std::string command = std::string("'") + TESSEL_CLI_PATH + "' " + args + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The kernel `tessel emit --best` writes after a short `tessel tune` of an
/// example at its reduced shape, as a user would get it: "" when either fails.
std::string cli_best(const std::string& file, const sets& overrides, const fs::path& dir) {
  const fs::path example = fs::path(TESSEL_SOURCE_DIR) / "examples" / file;
  const fs::path db = dir / (fs::path(file).stem().string() + ".db");
  const fs::path kernel = dir / (fs::path(file).stem().string() + "_best.py");
  std::string set;
  for (const auto& [name, value] : overrides) set += fmt::format(" --set {}={}", name, value);
  fs::remove(db);
  INFO("tessel tune/emit --best of ", file);
  if (run_cli(fmt::format("tune '{}' --backend sim --target trn2 --budget 12 --seed 5 --no-gate "
                          "--quiet --db '{}'{}",
                          example.string(), db.string(), set)) != 0)
    return "";
  if (run_cli(fmt::format("emit '{}' --best '{}' --target trn2 -o '{}'{}", example.string(),
                          db.string(), kernel.string(), set)) != 0)
    return "";
  return read(kernel);
}

/// The manifest check_emitted.py reads, and the files it names.
class emissions {
 public:
  explicit emissions(fs::path dir) : dir_(std::move(dir)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  /// Adds a kernel written elsewhere (tessel emit) under `name`.
  void add_file(const std::string& name, const std::string& workload, const std::string& text) {
    write(dir_ / name, text);
    manifest_.push_back({{"file", name},
                         {"workload", workload},
                         {"expect", "pass"},
                         {"config", "tessel emit --best"},
                         {"sbuf_bytes", sbuf_bytes}});
  }

  [[nodiscard]] const fs::path& dir() const { return dir_; }

  /// Emits (s, c) under `name`; false (and a failure) when the emitter
  /// refuses a config the simulator times.
  bool add(const std::string& name, const std::string& workload, const tessel::space& s,
           const tessel::config& c, bool count_only, const char* fault = "") {
    std::string text;
    tessel::nki_options o;
    o.fault = fault;
    try {
      text = tessel::emit_nki(s, c, o);
    } catch (const tessel::error& e) {
      const bool timed = simulator_times(s, c);
      INFO("the simulator times ", s.to_json(c), " but the emitter refuses it: ", e.what());
      CHECK_FALSE(timed);
      return false;
    }
    write(dir_ / name, text);
    manifest_.push_back({{"file", name},
                         {"workload", workload},
                         {"expect", *fault ? "fail" : "pass"},
                         {"config", s.to_json(c)},
                         {"sbuf_bytes", sbuf_bytes}});
    if (*fault) manifest_.back()["fault"] = fault;
    if (count_only) manifest_.back()["count_only"] = true;
    if (!count_only && !suites_.empty()) manifest_.back()["suites"] = suites_;
    return true;
  }

  /// The gate's input suites the kernels added next run on (empty: all of them).
  void only_suites(std::vector<std::string> suites) { suites_ = std::move(suites); }

  void finish() const { write(dir_ / "manifest.json", manifest_.dump(1)); }

 private:
  fs::path dir_;
  nlohmann::json manifest_ = nlohmann::json::array();
  std::vector<std::string> suites_;
};

std::string stem(const std::string& file) { return fs::path(file).stem().string(); }

/// Emits `numeric` uniformly sampled valid configs of `s` to run and `structural`
/// more to count (every valid config when the space holds fewer), as `base`_NN.py,
/// with the two deliberate faults on the first two run when `faults`.
void sample_into(emissions& out, const tessel::space& s, const std::string& workload,
                 const std::string& base, int numeric, int structural, bool faults) {
  tessel::rng random(11);
  std::set<std::uint64_t> seen;
  int kept = 0, counted = 0, rejected = 0;
  // a small space may hold fewer valid configs than asked for: then every one of them
  const auto valid = s.count();
  for (int attempt = 0;
       (kept < numeric || counted < structural) && seen.size() < valid && attempt < 20000;
       ++attempt) {
    const auto c = s.sample(random);
    if (!seen.insert(s.key(c)).second) continue;
    const bool count_only = kept >= numeric;
    const std::string name =
        fmt::format("{}_{:02d}.py", base, count_only ? numeric + counted : kept);
    if (!out.add(name, workload, s, c, count_only)) {
      ++rejected;
      continue;
    }
    if (count_only) {
      ++counted;
      continue;
    }
    if (faults && kept < 2)
      for (const char* fault : {"drop_tail", "skip_accumulation"})
        CHECK(out.add(fmt::format("{}_{:02d}_{}.py", base, kept, fault), workload, s, c, false,
                      fault));
    ++kept;
  }
  MESSAGE(base, ": ", kept, " sampled configs emitted to run, ", counted,
          " to count; the simulator rejects ", rejected, " sampled configs too");
  CHECK(((kept == numeric && counted == structural) || seen.size() == valid));
}

/// An example at its reduced shape with what no example space varies: constants
/// it declares, set as `--set` does (`set`), and constants it does not declare,
/// written into a copy of it as a user's own space would hold them (`declare`).
/// `suites`: the gate's input suites its kernels run on, when the type cannot
/// hold what the others make of the computation (the gate finds the simulated
/// kernel wrong on those too).
struct variant {
  std::string file;
  sets set;
  sets declare;
  std::vector<std::string> suites = {};
};

/// fp16's range: the products of swiglu and moe overflow 65504 on the gate's
/// large and outlier suites and fall below its normal range on tiny ones.
const std::vector<std::string> fp16_in_range{"normal", "uniform", "constant"};

/// The variants the coverage test emits: matmul's A given as [M, K] (transposed
/// on TensorE) in bf16, fp32 and fp8 e5m2 (sim_fp8_matmul.tsl has e4m3 and
/// scale = row); fp16 in every example that declares `dtype`, and fp8 in the
/// row pipelines' (which take it); newton_schulz in fp32 too; swiglu's and cross_entropy's
/// contraction tile below the partitions (mm_k = 96: d_model in slabs of 96 rows and a tail).
const std::vector<variant>& variants() {
  static const std::vector<variant> table{
      {"sim_matmul.tsl", {{"a_layout", "mk"}}, {}},
      {"sim_matmul.tsl", {{"a_layout", "mk"}, {"dtype", "fp32"}}, {}},
      {"sim_matmul.tsl", {{"a_layout", "mk"}, {"dtype", "fp8_e5m2"}}, {}},
      {"sim_matmul.tsl", {{"dtype", "fp16"}}, {}},
      {"sim_rmsnorm.tsl", {{"dtype", "fp16"}}, {}},
      {"sim_rmsnorm.tsl", {{"dtype", "fp8"}}, {}},
      {"sim_softmax.tsl", {{"dtype", "fp16"}}, {}},
      // fp8 e4m3 resolves nothing below 2^-9: softmax's outputs over 1024 columns
      // are about 1/1024, so it is checked on the suites that make peaked rows
      {"sim_softmax.tsl", {{"dtype", "fp8"}}, {}, {"large", "outliers"}},
      {"sim_layernorm.tsl", {{"dtype", "fp16"}}, {}},
      {"sim_layernorm.tsl", {{"dtype", "fp8"}}, {}},
      {"sim_attention.tsl", {{"dtype", "fp16"}}, {}},
      {"swiglu.tsl", {{"dtype", "fp16"}}, {}, fp16_in_range},
      {"swiglu.tsl", {}, {{"mm_k", "96"}}},
      {"cross_entropy.tsl", {{"dtype", "fp16"}}, {}},
      {"cross_entropy.tsl", {}, {{"mm_k", "96"}}},
      {"moe.tsl", {{"dtype", "fp16"}}, {}, fp16_in_range},
      // run over all five steps against a reference that rounds as the schedule does
      // (fp32 accumulation, DT where it stores), within the gate's tolerance of the type
      {"sim_newton_schulz.tsl", {{"dtype", "fp16"}}, {}},
      {"sim_newton_schulz.tsl", {{"dtype", "fp32"}}, {}},
  };
  return table;
}

/// Variant v's space: the example with its constants declared after the
/// `space NAME {` line (a copy in the build folder), at its reduced shape.
tessel::space load_variant(std::size_t v) {
  const auto& var = variants()[v];
  sets overrides = reduced_shapes().at(var.file);
  for (const auto& [name, value] : var.set) overrides[name] = value;
  if (var.declare.empty()) return load(var.file, overrides);
  std::string text = read(fs::path(TESSEL_SOURCE_DIR) / "examples" / var.file);
  std::string consts;
  for (const auto& [name, value] : var.declare)
    consts += fmt::format("  const {} = {}\n", name, value);
  text.insert(text.find('\n', text.find("\nspace ") + 1) + 1, consts);
  const fs::path copy = fs::path(TESSEL_BINARY_DIR) / fmt::format("variant{}_{}", v, var.file);
  write(copy, text);
  return load_path(copy, overrides);
}

/// The example spaces whose kernels are SPMD on a two-core logical NeuronCore
/// (trn2_lnc2; docs/nki.md, "Two physical cores"): at the reduced shape (an
/// even split) or at one the split cuts unevenly (the first core's share
/// rounded up to 128 rows). A workload added here must emit `LNC = 2` kernels.
struct lnc2_shape {
  std::string file;
  sets shape;
  bool count_full = true;     ///< also count the full shape's default (seconds for swiglu and CE)
  std::string config = "{}";  ///< the emitted default: these values, the others' defaults
};
/// moe's reduced shape with 192 tokens (an uneven token split).
sets moe_lnc2() {
  sets out = reduced_shapes().at("moe.tsl");
  out["tokens"] = "192";
  return out;
}

const std::vector<lnc2_shape>& lnc2_shapes() {
  static const std::vector<lnc2_shape> table{
      {"sim_matmul.tsl", {{"M", "384"}, {"N", "1024"}, {"K", "512"}}},  // 256 + 128 rows
      {"matmul.tsl", reduced_shapes().at("matmul.tsl")},
      // tp = 1 (trn2_lnc2 is one rank): the matmul kernel, split as the simulator splits M
      {"sharded_matmul.tsl", reduced_shapes().at("sharded_matmul.tsl"), false},
      {"sim_rmsnorm.tsl", {{"rows", "640"}, {"hidden", "1024"}}},  // 384 + 256 rows
      {"rmsnorm.tsl", reduced_shapes().at("rmsnorm.tsl")},
      {"sim_softmax.tsl", {{"rows", "640"}, {"cols", "1024"}}},
      {"sim_layernorm.tsl", {{"rows", "640"}, {"hidden", "1024"}}},
      {"swiglu.tsl", reduced_shapes().at("swiglu.tsl"), false},
      // 384 tokens: 256 + 128
      {"cross_entropy.tsl", {{"tokens", "384"}, {"d_model", "256"}, {"vocab", "1000"}}, false},
      // no split: program 0 runs it all, program 1 idles, as the simulator times them
      {"sim_attention.tsl", reduced_shapes().at("sim_attention.tsl"), false},
      {"sim_newton_schulz.tsl", reduced_shapes().at("sim_newton_schulz.tsl"), false},
      // moe splits its own group tiles: whole experts per core (a core barrier before the
      // combine) or 192 tokens as 128 + 64 (each core its own tokens)
      {"moe.tsl", moe_lnc2(), false},
      {"moe.tsl", moe_lnc2(), false, R"({"core_split": "token"})"},
      // ep = 1: moe's kernel of the whole layer, split as moe splits it
      {"sharded_moe.tsl", moe_lnc2(), false, R"({"core_split": "token"})"},
      // 3 heads: 1 + 2, whole heads per core
      {"sharded_attention.tsl", {{"seq", "256"}, {"heads", "3"}}, false},
  };
  return table;
}

/// Emits the converted examples for trn2_lnc2 (lnc2_shapes): the default config,
/// the full shape's counted, `numeric` sampled configs to run (the first two also
/// broken) and `structural` to count; each file must be an SPMD kernel.
void spmd_into(emissions& out, int numeric, int structural) {
  for (std::size_t i = 0; i < lnc2_shapes().size(); ++i) {
    const std::string& file = lnc2_shapes()[i].file;  // no structured binding: CAPTURE (clang 14)
    CAPTURE(file);
    const auto s = load(file, lnc2_shapes()[i].shape, "trn2_lnc2");
    const std::string workload = workload_of(s);
    const std::string base = fmt::format("lnc2_{}{}", stem(file), i);
    if (lnc2_shapes()[i].count_full) {
      const auto full = load(file, {}, "trn2_lnc2");
      CHECK(out.add(base + "_full.py", workload, full, *full.default_config(), true));
    }
    const auto chosen = s.from_partial_json(lnc2_shapes()[i].config);
    REQUIRE(s.is_valid(chosen));
    CHECK(out.add(base + "_default.py", workload, s, chosen, false));
    sample_into(out, s, workload, base, numeric, structural, true);
  }
  for (const auto& entry : fs::directory_iterator(out.dir())) {
    const auto name = entry.path().filename().string();
    if (name.rfind("lnc2_", 0) != 0) continue;
    INFO(name, " is not an SPMD kernel: launched over LNC = 2 programs");
    CHECK(read(entry.path()).find("\nLNC = 2 ") != std::string::npos);
  }
}

/// The sharded examples on a target of several ranks (trn2_chip: 8 NeuronCores
/// of one chip; docs/nki.md, "Ranks and collectives"), at a reduced shape, with
/// configs that split them over 2 and 4 ranks: each must emit a kernel of one
/// rank's plan joined by the collectives of its split (`RANKS = tp`).
struct ranks_case {
  std::string file;
  sets shape;
  std::vector<std::string> configs;  ///< partial JSON: the split (the rest its defaults)
};
const std::vector<ranks_case>& ranks_cases() {
  static const std::vector<ranks_case> table{
      {"sharded_matmul.tsl",
       reduced_shapes().at("sharded_matmul.tsl"),
       {R"({"tp": 2, "shard": "m"})", R"({"tp": 4, "shard": "n", "overlap": true})",
        R"({"tp": 2, "shard": "k", "overlap": true})", R"({"tp": 4, "shard": "k"})"}},
      {"sharded_attention.tsl",
       {{"seq", "256"}, {"heads", "4"}},
       {R"({"tp": 2})", R"({"tp": 4, "overlap": true})"}},
      {"sharded_attention.tsl",
       {{"seq", "256"}, {"heads", "4"}, {"output", "sharded"}},
       {R"({"tp": 4})"}},
      // ep > 1: a kernel per rank (its experts), all-to-alls of padded blocks
      {"sharded_moe.tsl",
       reduced_shapes().at("sharded_moe.tsl"),
       {R"({"ep": 2})", R"({"ep": 4, "overlap": true})",
        R"({"ep": 8, "x_layout": "transposed", "grouping": "token"})",
        R"({"ep": 2, "overlap": true, "x_layout": "transposed", "token_tile": 256})"}},
  };
  return table;
}

/// Emits ranks_cases() for trn2_chip: its configs (each also broken both ways),
/// `numeric` sampled configs to run and `structural` to count.
void ranks_into(emissions& out, int numeric, int structural) {
  for (std::size_t i = 0; i < ranks_cases().size(); ++i) {
    const auto& rc = ranks_cases()[i];
    CAPTURE(rc.file);
    const auto s = load(rc.file, rc.shape, "trn2_chip");
    const std::string workload = workload_of(s);
    const std::string base = fmt::format("ranks_{}{}", stem(rc.file), i);
    for (std::size_t k = 0; k < rc.configs.size(); ++k) {
      CAPTURE(rc.configs[k]);
      const auto c = s.from_partial_json(rc.configs[k]);
      REQUIRE(s.is_valid(c));
      const std::string name = fmt::format("{}_split{}.py", base, k);
      REQUIRE(out.add(name, workload, s, c, false));
      INFO(name, " is not a kernel of ranks joined by collectives");
      CHECK(read(out.dir() / name).find("\nRANKS = ") != std::string::npos);
      for (const char* fault : {"drop_tail", "skip_accumulation"})  // in every rank's kernel
        CHECK(
            out.add(fmt::format("{}_split{}_{}.py", base, k, fault), workload, s, c, false, fault));
      if (workload == "sharded_moe")  // the last combine all-to-all not called
        CHECK(out.add(fmt::format("{}_split{}_drop_collective.py", base, k), workload, s, c, false,
                      "drop_collective"));
    }
    sample_into(out, s, workload, base, numeric, structural, false);
  }
}

}  // namespace

TEST_CASE("every example space the simulator takes has a reduced shape and every workload one") {
  const auto files = sim_examples();
  std::set<std::string> covered;
  for (const auto& f : files) {
    INFO(f, ": add its reduced shape to reduced_shapes() in tests/nki/emit_test.cpp");
    CHECK(reduced_shapes().count(f) == 1);
    covered.insert(workload_of(load(f, {})));
  }
  for (const auto& w : tessel::sim_workloads()) {
    INFO("workload ", w, " has no example space in examples/: the coverage test needs one");
    CHECK(covered.count(w) == 1);
  }
}

TEST_CASE("emit_nki writes the tuned best, the default and sampled configs of every example") {
  const int numeric = from_env("TESSEL_NKI_NUMERIC", 6);
  const int structural = from_env("TESSEL_NKI_STRUCTURE", 50);
  const char* dir = std::getenv("TESSEL_NKI_EMITTED");
  emissions out(dir && *dir ? fs::path(dir) : fs::path(TESSEL_BINARY_DIR) / "emitted");
  fs::create_directories(out.dir() / "cli");
  for (const auto& file : sim_examples()) {
    CAPTURE(file);
    const auto shape = reduced_shapes().find(file);
    REQUIRE(shape != reduced_shapes().end());
    const auto s = load(file, shape->second);
    const std::string workload = workload_of(s);
    const std::string base = stem(file);
    // the full shape's default config: its structure, counted without computing
    const auto full = load(file, {});
    CHECK(out.add(base + "_full.py", workload, full, *full.default_config(), true));
    CHECK(out.add(base + "_default.py", workload, s, *s.default_config(), false));
    const std::string best = cli_best(file, shape->second, out.dir() / "cli");
    CHECK_FALSE(best.empty());
    if (!best.empty()) out.add_file(base + "_best.py", workload, best);
    sample_into(out, s, workload, base, numeric, structural, true);
  }
  // what no example varies: a third of the configs each, no faults (the default
  // config is not always one: a_layout = mk leaves 6 PSUM banks, and psum_bufs is 8)
  for (std::size_t v = 0; v < variants().size(); ++v) {
    CAPTURE(v);
    const auto s = load_variant(v);
    const std::string workload = workload_of(s);
    const auto& var = variants()[v];
    const std::string base = fmt::format("{}_variant{}", stem(var.file), v);
    out.only_suites(var.suites);
    sample_into(out, s, workload, base, std::max(1, numeric / 3), structural / 3, false);
    out.only_suites({});
  }
  // a two-core logical NeuronCore: SPMD kernels, a third as many configs
  spmd_into(out, std::max(1, numeric / 3), structural / 5);
  // ranks joined by collectives (tp > 1): as many again
  ranks_into(out, std::max(1, numeric / 3), structural / 5);
  out.finish();
}

TEST_CASE("emit --best takes the study's target unless --target names one") {
  // moe's core_split exists only with lnc = 2: the best of a trn2_lnc2 study is not a
  // valid config on trn2, so emit must read the space for the study's target
  const fs::path dir = fs::path(TESSEL_BINARY_DIR) / "emit_target";
  fs::create_directories(dir);
  const fs::path example = fs::path(TESSEL_SOURCE_DIR) / "examples" / "moe.tsl";
  const fs::path db = dir / "moe_lnc2.db", kernel = dir / "moe_lnc2.py";
  std::string set;
  for (const auto& [name, value] : reduced_shapes().at("moe.tsl"))
    set += fmt::format(" --set {}={}", name, value);
  fs::remove(db);
  REQUIRE(run_cli(fmt::format("tune '{}' --backend sim --target trn2_lnc2 --budget 3 --seed 5 "
                              "--no-gate --quiet --db '{}'{}",
                              example.string(), db.string(), set)) == 0);
  REQUIRE(run_cli(fmt::format("emit '{}' --best '{}' -o '{}'{}", example.string(), db.string(),
                              kernel.string(), set)) == 0);
  const std::string text = read(kernel);
  CHECK(text.find("# target    trn2_lnc2\n") != std::string::npos);
  CHECK(text.find("\"core_split\":\"") != std::string::npos);
  // --target still wins: the study's best has core_split, which trn2 does not enable
  CHECK(run_cli(fmt::format("emit '{}' --best '{}' --target trn2 -o '{}'{}", example.string(),
                            db.string(), kernel.string(), set)) != 0);
}

TEST_CASE("the emitted text of each workload's default config is pinned") {
  const fs::path golden = fs::path(TESSEL_SOURCE_DIR) / "tests" / "nki" / "golden";
  const bool update = std::getenv("TESSEL_UPDATE_GOLDEN") != nullptr;
  for (const auto& [workload, file] : golden_examples()) {
    CAPTURE(workload);
    const auto s = load(file, reduced_shapes().at(file));
    const auto c = s.default_config();
    REQUIRE(c.has_value());
    tessel::nki_options o;
    o.source = "examples/" + file;
    const std::string text = tessel::emit_nki(s, *c, o);
    const fs::path path = golden / (workload + ".py");
    if (update) write(path, text);
    INFO("regenerate with TESSEL_UPDATE_GOLDEN=1 ctest -R nki.emit after checking the change");
    CHECK(read(path) == text);
  }
}

TEST_CASE("emit_nki names what it cannot do") {
  const auto s = load("sim_matmul.tsl", reduced_shapes().at("sim_matmul.tsl"));
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
