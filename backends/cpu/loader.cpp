// loader.cpp: the process that runs and times one compiled kernel for the
// cpu backend (docs/cpu.md, "What is measured"). tessel builds it once per
// cache folder with the system compiler, from this file, tessel/cpu_kernel.hpp
// and tessel/race_rule.hpp (embedded in the library), and starts one loader
// per gate run and per timing, so a kernel that crashes or hangs takes only
// its loader down.
//
//   loader LIBRARY.so run  [--in TYPE DIMS FILE.npy]... [--out TYPE DIMS FILE.npy]... [--const
//   NAME=V]... loader LIBRARY.so time ... --warmup N --min-sample S --min-repeats N --max-repeats N
//                              --margin X --target-ci X --max-seconds X [--incumbent S]
//                              [--loop-seed N]
//
// run: one call, its outputs written. time: `warmup` calls, then samples of
// `iters` calls each (iters chosen so a sample takes at least min-sample
// seconds), raced by race_decision; the outputs of the last timed call are
// written. Before every call after the first, the inputs change by the rule
// of tessel/loop_rule.hpp (two elements of each input's base exchanged,
// drawn from the loop seed, and a diagonal sweep that reaches every row and
// column; the call is given the bases with every row rotated by an offset of
// its own), so no call is given inputs an earlier one was, nearly every
// element differs from the call before's, and the answer counts the calls
// made: tessel replays the rule to judge the last call's outputs
// (docs/gate.md, "Round seven", "Round ten (b)", "Round eleven"). Inputs are
// read-only: the loader keeps a private copy of the bases, changed by the
// same exchanges outside the timed region, and compares the inputs with it
// (turned as the last call's were) after the call (run) or the timing
// (time); a kernel that wrote one is answered "suspicious" (docs/gate.md,
// "Round eight"). A timing is given some CPUs (its affinity when it starts):
// a kernel that widened the affinity, or whose process used more CPU time
// over the samples than those CPUs allow, is answered "suspicious"
// (docs/gate.md, "Round nine"). The answer is one JSON line on the original
// stdout; the kernel's own stdout goes to stderr, so it cannot forge the
// answer.
#include <tessel/cpu_kernel.hpp>
#include <tessel/loop_rule.hpp>
#include <tessel/race_rule.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <sched.h>
#endif

namespace {

using tessel::cpu::dtype;

FILE* answer_channel = stdout;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// Answers a failure (status "runtime_error", or "suspicious" for a kernel
/// that broke a rule of the call no honest mistake breaks) and exits.
[[noreturn]] void fail(const std::string& message, const char* status = "runtime_error") {
  std::fprintf(answer_channel, "{\"status\": \"%s\", \"message\": %s}\n", status,
               json_string(message).c_str());
  std::fflush(answer_channel);
  std::_Exit(0);
}

struct buffer {
  dtype type = dtype::fp32;
  std::vector<std::int64_t> shape;
  std::string path;
  void* data = nullptr;
  std::int64_t elements() const {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }
  std::size_t element_size() const { return type == dtype::bf16 ? 2 : 4; }
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * element_size(); }
};

dtype parse_type(const std::string& t) {
  if (t == "fp32") return dtype::fp32;
  if (t == "bf16") return dtype::bf16;
  if (t == "int32") return dtype::int32;
  fail("unknown element type " + t);
}

std::vector<std::int64_t> parse_dims(const std::string& text) {
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find('x', start), text.size());
    dims.push_back(std::atoll(text.substr(start, end - start).c_str()));
    if (dims.back() <= 0) fail("bad dimensions " + text);
    start = end + 1;
  }
  return dims;
}

void allocate(buffer& b) {
  const std::size_t size = (b.bytes() + 63) / 64 * 64;
  b.data = std::aligned_alloc(64, size > 0 ? size : 64);
  if (b.data == nullptr) fail("out of memory allocating a tensor");
}

/// Reads a .npy file tessel wrote: C order, '<f4' (fp32 and bf16 inputs)
/// or '<i4' (int32), exactly b.elements() values.
void read_npy(buffer& b) {
  FILE* f = std::fopen(b.path.c_str(), "rb");
  if (f == nullptr) fail("cannot open " + b.path);
  unsigned char head[12];
  if (std::fread(head, 1, 10, f) != 10 || std::memcmp(head, "\x93NUMPY", 6) != 0)
    fail(b.path + " is not a .npy file");
  std::size_t header = head[8] | (head[9] << 8);
  if (head[6] >= 2) {
    if (std::fread(head + 10, 1, 2, f) != 2) fail(b.path + ": short header");
    header |= static_cast<std::size_t>(head[10]) << 16 | static_cast<std::size_t>(head[11]) << 24;
  }
  std::string text(header, '\0');
  if (std::fread(text.data(), 1, header, f) != header) fail(b.path + ": short header");
  const bool is_int = text.find("'<i4'") != std::string::npos;
  if (!is_int && text.find("'<f4'") == std::string::npos) fail(b.path + ": not float32 or int32");
  const auto n = static_cast<std::size_t>(b.elements());
  std::vector<std::uint32_t> raw(n);
  if (std::fread(raw.data(), 4, n, f) != n) fail(b.path + ": fewer values than its shape");
  std::fclose(f);
  allocate(b);
  for (std::size_t i = 0; i < n; ++i) {
    float value;
    if (is_int) {
      std::int32_t v;
      std::memcpy(&v, &raw[i], 4);
      value = static_cast<float>(v);
    } else {
      std::memcpy(&value, &raw[i], 4);
    }
    if (b.type == dtype::fp32) {
      static_cast<float*>(b.data)[i] = value;
    } else if (b.type == dtype::bf16) {
      static_cast<tessel::cpu::bf16*>(b.data)[i] = tessel::cpu::to_bf16(value);
    } else {
      static_cast<std::int32_t*>(b.data)[i] =
          is_int ? static_cast<std::int32_t>(raw[i]) : static_cast<std::int32_t>(value);
    }
  }
}

void write_npy(const buffer& b) {
  const bool is_int = b.type == dtype::int32;
  std::string shape;
  for (const auto d : b.shape) shape += std::to_string(d) + ", ";
  if (b.shape.size() > 1) shape.resize(shape.size() - 2);
  std::string header = std::string("{'descr': '") + (is_int ? "<i4" : "<f4") +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  FILE* f = std::fopen(b.path.c_str(), "wb");
  if (f == nullptr) fail("cannot write " + b.path);
  const unsigned char magic[10] = {0x93,
                                   'N',
                                   'U',
                                   'M',
                                   'P',
                                   'Y',
                                   1,
                                   0,
                                   static_cast<unsigned char>(header.size() & 0xff),
                                   static_cast<unsigned char>(header.size() >> 8)};
  std::fwrite(magic, 1, 10, f);
  std::fwrite(header.data(), 1, header.size(), f);
  const auto n = static_cast<std::size_t>(b.elements());
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t word;
    if (b.type == dtype::bf16) {
      const float v = tessel::cpu::to_float(static_cast<const tessel::cpu::bf16*>(b.data)[i]);
      std::memcpy(&word, &v, 4);
    } else {
      std::memcpy(&word, static_cast<const char*>(b.data) + 4 * i, 4);
    }
    std::fwrite(&word, 4, 1, f);
  }
  if (std::fclose(f) != 0) fail("cannot write " + b.path);
}

/// Fills an output with NaN (int32: INT32_MIN), so a kernel that skips an
/// element is seen.
void poison(buffer& b) {
  const auto n = static_cast<std::size_t>(b.elements());
  if (b.type == dtype::fp32) {
    auto* p = static_cast<float*>(b.data);
    for (std::size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  } else if (b.type == dtype::bf16) {
    auto* p = static_cast<tessel::cpu::bf16*>(b.data);
    for (std::size_t i = 0; i < n; ++i) p[i] = tessel::cpu::bf16{0x7fc0};
  } else {
    auto* p = static_cast<std::int32_t*>(b.data);
    for (std::size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<std::int32_t>::min();
  }
}

struct request {
  std::string library, mode;
  std::vector<buffer> inputs, outputs;
  std::vector<std::string> constant_names;
  std::vector<std::int64_t> constant_values;
  std::size_t warmup = 2;
  std::uint64_t loop_seed = 0;
  double min_sample_s = 1e-3, incumbent = 0;
  tessel::race_options racing;
};

request parse(int argc, char** argv) {
  if (argc < 3) fail("usage: loader LIBRARY.so run|time [options]");
  request r;
  r.library = argv[1];
  r.mode = argv[2];
  if (r.mode != "run" && r.mode != "time") fail("unknown mode " + r.mode);
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "--in" || flag == "--out") {
      buffer b;
      b.type = parse_type(next());
      b.shape = parse_dims(next());
      b.path = next();
      (flag == "--in" ? r.inputs : r.outputs).push_back(b);
    } else if (flag == "--const") {
      const auto text = next();
      const auto eq = text.find('=');
      if (eq == std::string::npos) fail("--const needs NAME=VALUE");
      r.constant_names.push_back(text.substr(0, eq));
      r.constant_values.push_back(std::atoll(text.substr(eq + 1).c_str()));
    } else if (flag == "--warmup") {
      r.warmup = std::strtoull(next().c_str(), nullptr, 10);
    } else if (flag == "--min-sample") {
      r.min_sample_s = std::atof(next().c_str());
    } else if (flag == "--min-repeats") {
      r.racing.min_repeats = std::strtoull(next().c_str(), nullptr, 10);
    } else if (flag == "--max-repeats") {
      r.racing.max_repeats = std::strtoull(next().c_str(), nullptr, 10);
    } else if (flag == "--margin") {
      r.racing.margin = std::atof(next().c_str());
    } else if (flag == "--target-ci") {
      r.racing.target_relative_ci = std::atof(next().c_str());
    } else if (flag == "--max-seconds") {
      r.racing.max_seconds = std::atof(next().c_str());
    } else if (flag == "--loop-seed") {
      r.loop_seed = std::strtoull(next().c_str(), nullptr, 10);
    } else if (flag == "--incumbent") {
      r.incumbent = std::atof(next().c_str());
    } else {
      fail("unknown option " + flag);
    }
  }
  if (const auto p = r.racing.problem())
    fail(std::string("racing options: ") + p->field + " " + p->rule);
  return r;
}

/// Whether elements x and y of `b` hold different values (the loop rule's
/// `differ`: values, not bits, as tessel compares them when it replays).
bool differ(const buffer& b, std::uint64_t x, std::uint64_t y) {
  if (b.type == dtype::fp32) {
    const auto* p = static_cast<const float*>(b.data);
    return p[x] != p[y];
  }
  if (b.type == dtype::bf16) {
    const auto* p = static_cast<const tessel::cpu::bf16*>(b.data);
    return tessel::cpu::to_float(p[x]) != tessel::cpu::to_float(p[y]);
  }
  const auto* p = static_cast<const std::int32_t*>(b.data);
  return p[x] != p[y];
}

/// Rows of at most this many elements are turned from a doubled base (one
/// copy a row, in a loop of fixed length), longer ones in place.
constexpr std::uint64_t short_row = 64;

/// The changes the loop rule makes before a run of calls, drawn ahead
/// (outside any clock) and made in order before each call
/// (tessel/loop_rule.hpp). Per (call, input): an input of short rows has
/// its base held twice (loop_rule::doubled): its exchanges made there, then
/// the input written from it turned. An input of long rows is changed in
/// place, so the timed loop touches nothing else (a base read whole every
/// call would crowd the kernel's caches: 1.10 of the honest 512 x 512
/// transpose's time): its exchanges where the input holds the base's
/// elements now, then each row turned from its offset in the call before.
struct call_plan {
  using exchange = tessel::loop_rule::doubled::exchange;  ///< in place: a2 = b2 = 0
  std::vector<std::uint64_t> lengths;                     ///< per input: its rows' length
  std::vector<std::vector<std::uint32_t>> turned;         ///< per input: each row's offset now
  std::vector<std::optional<tessel::loop_rule::doubled>> held;  ///< per input of short rows
  std::vector<exchange> exchanges;
  std::vector<std::uint32_t> offsets;  ///< per row: its offset (in place: from the call before's)
  std::vector<std::size_t> exchange_ends, offset_ends;  ///< per (call, input) drawn
  std::vector<std::uint32_t> scratch;                   ///< turn_in_place's

  explicit call_plan(const std::vector<buffer>& inputs) {
    std::uint64_t longest = 0;
    for (const auto& b : inputs) {
      const std::uint64_t length = tessel::loop_rule::row_length(b.shape),
                          n = static_cast<std::uint64_t>(b.elements());
      lengths.push_back(length);
      turned.emplace_back(length == 0 ? 0 : (n + length - 1) / length, 0);
      held.emplace_back();
      if (length <= short_row) held.back().emplace(b.data, n, b.element_size(), length);
      longest = std::max(longest, length);
    }
    scratch.resize(longest);
  }
  void clear() {
    exchanges.clear();
    offsets.clear();
    exchange_ends.clear();
    offset_ends.clear();
  }
  /// Draws call `call`'s changes to input `i` on `base` (the copy), which
  /// its exchanges change as they are drawn (the next depends on the values
  /// before it).
  void draw(tessel::loop_rule::walk& walk, std::uint64_t call, std::size_t i, buffer& base) {
    const std::uint64_t length = lengths[i], n = static_cast<std::uint64_t>(base.elements());
    std::vector<std::uint32_t>& now = turned[i];
    const auto held_at = [&](std::uint64_t p) {  // in place: where the input holds p now
      const std::uint64_t start = p / length * length, len = std::min(length, n - start);
      return static_cast<std::size_t>(start + (p - start + now[p / length]) % len);
    };
    walk.call(
        i, base.shape, [&base](std::uint64_t x, std::uint64_t y) { return differ(base, x, y); },
        [&](std::uint64_t x, std::uint64_t y) {
          tessel::loop_rule::swap_elements(base.data, base.element_size(), x, y);
          exchanges.push_back(held[i] ? held[i]->exchange_of(x, y)
                                      : exchange{held_at(x), held_at(y), 0, 0});
        });
    std::size_t row = 0;
    walk.turn(call, i, base.shape, [&](std::uint64_t, std::uint64_t len, std::uint64_t offset) {
      offsets.push_back(
          static_cast<std::uint32_t>(held[i] ? offset : (offset + len - now[row]) % len));
      now[row++] = static_cast<std::uint32_t>(offset);
    });
    exchange_ends.push_back(exchanges.size());
    offset_ends.push_back(offsets.size());
  }
  /// Makes the changes drawn `j`-th, to input `i` (`input`).
  void make(std::size_t j, std::size_t i, buffer& input) {
    const exchange* e = exchanges.data() + (j > 0 ? exchange_ends[j - 1] : 0);
    const exchange* const end = exchanges.data() + exchange_ends[j];
    const std::uint32_t* const turn = offsets.data() + (j > 0 ? offset_ends[j - 1] : 0);
    if (held[i]) {
      for (; e != end; ++e) held[i]->apply(*e);
      held[i]->write(input.data, turn);
      return;
    }
    for (; e != end; ++e)
      tessel::loop_rule::swap_elements(input.data, input.element_size(), e->a, e->b);
    tessel::loop_rule::turn_in_place(input.data, input.element_size(),
                                     static_cast<std::uint64_t>(input.elements()), lengths[i], turn,
                                     scratch.data());
  }
};

/// The loader's own copy of the inputs, made before the first call: what
/// the inputs must hold after the calls (the same exchanges applied to it).
struct input_copy {
  std::vector<buffer> buffers;
  std::vector<std::vector<unsigned char>> bytes;
  explicit input_copy(const std::vector<buffer>& inputs) : buffers(inputs), bytes(inputs.size()) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto* p = static_cast<const unsigned char*>(inputs[i].data);
      bytes[i].assign(p, p + inputs[i].bytes());
      buffers[i].data = bytes[i].data();
    }
  }
  input_copy(const input_copy&) = delete;
  input_copy& operator=(const input_copy&) = delete;
  /// Answers "suspicious" when an input differs from its copy: the kernel
  /// wrote it (planting an answer there for a later call, or zeroing it).
  void check(const std::vector<buffer>& inputs) const {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (std::memcmp(inputs[i].data, bytes[i].data(), bytes[i].size()) != 0) {
        std::string name = inputs[i].path.substr(inputs[i].path.find_last_of('/') + 1);
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
          name.resize(name.size() - 4);
        fail("the kernel wrote its input " + name + " (inputs are read-only)", "suspicious");
      }
  }
};

/// The process's CPU time so far (every thread), in seconds.
double process_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

/// The CPUs a timing was given: the loader's affinity when it starts, before
/// the kernel is loaded (the per-run supervisor sets it before exec).
struct given_cpus {
#ifdef __linux__
  cpu_set_t set{};
  bool known = false;
  given_cpus() {
    CPU_ZERO(&set);
    known = ::sched_getaffinity(0, sizeof set, &set) == 0;
  }
  [[nodiscard]] int count() const { return known ? CPU_COUNT(&set) : 0; }
  /// Whether the calling thread's affinity is still within the one given
  /// (a kernel may bind itself to fewer CPUs: OMP_PROC_BIND does).
  [[nodiscard]] bool within() const {
    cpu_set_t now, both;
    CPU_ZERO(&now);
    if (!known || ::sched_getaffinity(0, sizeof now, &now) != 0) return true;
    CPU_AND(&both, &now, &set);
    return CPU_EQUAL(&both, &now) != 0;
  }
#else
  [[nodiscard]] int count() const { return 0; }
  [[nodiscard]] bool within() const { return true; }
#endif
};

/// The timing rules the loader applies around the kernel's calls (docs/cpu.md,
/// "What is measured"; docs/gate.md, rounds seven and nine), apart from the
/// calls themselves.
namespace timing_rules {

/// The warm-up: `warmup` calls before the samples, and at least one (it
/// calibrates the calls per sample).
[[nodiscard]] std::size_t warmup_calls(std::size_t warmup) {
  return std::max<std::size_t>(warmup, 1);
}

/// The calls per sample: enough that a sample takes at least `min_sample_s`
/// at the last warm-up call's time `one` (1 to 10^6).
[[nodiscard]] std::size_t calls_per_sample(double min_sample_s, double one) {
  const double wanted = std::ceil(min_sample_s / std::max(one, 1e-9));
  return static_cast<std::size_t>(std::clamp(wanted, 1.0, 1e6));
}

/// The time of one call's changes by the loop rule (a call_plan's make for
/// every input), subtracted from every sample per call: a call makes
/// max(d_i) + 1 exchanges per input and turns each of its rows
/// (tessel/loop_rule.hpp), 9 exchanges and 8 rows of 8 on an 8 x 8 input,
/// more than a 17 ns kernel's time. Measured before the kernel is loaded, on
/// copies of the inputs: a throwaway walk's changes for at least 16 calls
/// and 8192 exchanges, made 5 to 25 times (until 2 ms are spent; the inputs
/// restored between), the fastest per call; fastest, so that what is
/// subtracted is at most what the changes cost, and many times, so that a
/// moment of a loaded machine does not set it.
[[nodiscard]] double change_seconds(const std::vector<buffer>& inputs, std::uint64_t seed) {
  if (inputs.empty()) return 0;
  using clock = std::chrono::steady_clock;
  input_copy drawn(inputs), changed(inputs);
  tessel::loop_rule::walk walk(seed ^ 0x5eed5eed5eed5eedULL, inputs.size());
  call_plan plan(inputs);
  const auto held = plan.held;  // the doubled bases as the inputs were
  std::uint64_t calls = 1;
  for (; calls < 4096 && (calls <= 16 || plan.exchanges.size() < 8192); ++calls)
    for (std::size_t i = 0; i < inputs.size(); ++i) plan.draw(walk, calls, i, drawn.buffers[i]);
  double best = std::numeric_limits<double>::infinity(), spent = 0;
  for (int rep = 0; rep < 25 && (rep < 5 || spent < 2e-3); ++rep) {
    for (std::size_t i = 0; i < inputs.size(); ++i)  // the inputs as they were
      std::memcpy(changed.buffers[i].data, inputs[i].data, inputs[i].bytes());
    plan.held = held;
    const auto begin = clock::now();
    for (std::size_t j = 0; j < plan.exchange_ends.size();)  // as the timed loop makes them
      for (std::size_t i = 0; i < inputs.size(); ++i, ++j) plan.make(j, i, changed.buffers[i]);
    const double took = std::chrono::duration<double>(clock::now() - begin).count();
    best = std::min(best, took);
    spent += took;
  }
  return best / static_cast<double>(calls - 1);
}

/// The CPU rule: over the timed samples the process cannot use more CPU
/// time than its CPUs give in that wall time, whatever its threads do. The
/// margin: 10%, and 10 ms of CPU per CPU given (a thread's CPU time reaches
/// the process's clock at the scheduler's tick, up to 10 ms late, so the
/// first read may miss some of what ran just before it).
[[nodiscard]] bool within_cpus(double cpu_s, double wall_s, int cpus) {
  return cpus <= 0 || cpu_s <= cpus * (wall_s * 1.1 + 0.01);
}

/// Answers "suspicious" when the kernel broke a rule of the CPUs it was
/// given over the timing: widened its affinity, or used more CPU time
/// (`cpu_s`, in `wall_s` of timing) than its CPUs allow.
void check_cpus(const given_cpus& given, double cpu_s, double wall_s) {
  if (!given.within())
    fail("the kernel widened its CPU affinity (it was given " + std::to_string(given.count()) +
             " CPU(s))",
         "suspicious");
  if (!within_cpus(cpu_s, wall_s, given.count())) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "the kernel used more CPUs than it was given: %.3g s of CPU time in %.3g s of "
                  "timing on %d CPU(s)",
                  cpu_s, wall_s, given.count());
    fail(text, "suspicious");
  }
}

}  // namespace timing_rules

}  // namespace

int main(int argc, char** argv) {
  // The answer goes to the original stdout; the kernel's prints to stderr.
  const int channel = ::dup(1);
  if (channel < 0 || ::dup2(2, 1) < 0) return 3;
  answer_channel = ::fdopen(channel, "w");
  if (answer_channel == nullptr) return 3;
  request r = parse(argc, argv);
  const given_cpus given;  // before the kernel's code is loaded
  for (auto& b : r.inputs) read_npy(b);
  // The changes' own time, measured before the kernel's code is loaded
  // (none of its threads can slow it, to have more subtracted).
  const double change_s =
      r.mode == "time" ? timing_rules::change_seconds(r.inputs, r.loop_seed) : 0;

  void* library = ::dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) fail(std::string("cannot load the kernel: ") + ::dlerror());
  const auto entry =
      reinterpret_cast<tessel::cpu::entry_function>(::dlsym(library, tessel::cpu::entry_symbol));
  if (entry == nullptr) fail("the library has no tessel_cpu_entry");

  std::vector<tessel::cpu::tensor> ins, outs;
  for (auto& b : r.inputs)
    ins.push_back({b.data, b.shape.data(), static_cast<std::int32_t>(b.shape.size()), b.type});
  for (auto& b : r.outputs) {
    allocate(b);
    outs.push_back({b.data, b.shape.data(), static_cast<std::int32_t>(b.shape.size()), b.type});
  }
  std::vector<tessel::cpu::constant> constants;
  for (std::size_t i = 0; i < r.constant_names.size(); ++i)
    constants.push_back({r.constant_names[i].c_str(), r.constant_values[i]});
  const tessel::cpu::kernel_args args{
      ins.data(),       static_cast<std::int32_t>(ins.size()),
      outs.data(),      static_cast<std::int32_t>(outs.size()),
      constants.data(), static_cast<std::int32_t>(constants.size())};
  char message[2048] = {0};
  const auto call = [&] {
    if (entry(&args, message, sizeof message) != 0)
      fail(std::string("the kernel failed: ") + (message[0] != 0 ? message : "(no message)"));
  };
  const auto poison_all = [&] {
    for (auto& b : r.outputs) poison(b);
  };
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };

  input_copy copy(r.inputs);  // before the first call, outside any clock
  if (r.mode == "run") {
    poison_all();
    const auto start = clock::now();
    call();
    const double took = seconds(start, clock::now());
    copy.check(r.inputs);
    for (const auto& b : r.outputs) write_npy(b);
    std::fprintf(answer_channel, "{\"status\": \"ok\", \"seconds\": %.9g}\n", took);
    return 0;
  }

  // The loop rule: before every call after the first, each input's base
  // changes (the step's two elements exchanged, and the sweep's diagonal:
  // every row and column of the input), and the call is given its base with
  // every row turned by an offset of its own, so a kernel that memoises its
  // outputs by the inputs' content meets new inputs on every call, and one
  // that recomputes only what changed finds nearly every element changed.
  // The exchanges are drawn on the copy, which the kernel cannot reach by
  // its arguments: the walk is the one tessel replays whatever the kernel
  // does to its inputs. `base`: the bases the calls' inputs are written
  // from, changed call by call as the inputs are.
  tessel::loop_rule::walk walk(r.loop_seed, r.inputs.size());
  call_plan plan(r.inputs);
  const std::size_t n_in = r.inputs.size();
  std::uint64_t calls = 0;
  double one = 0;  // the last warm-up call's time: calibrates iterations per sample
  for (std::size_t w = 0; w < timing_rules::warmup_calls(r.warmup); ++w) {
    if (calls > 0) {
      plan.clear();
      for (std::size_t i = 0; i < n_in; ++i) plan.draw(walk, calls, i, copy.buffers[i]);
      for (std::size_t i = 0; i < n_in; ++i) plan.make(i, i, r.inputs[i]);
    }
    const auto start = clock::now();
    call();
    one = seconds(start, clock::now());
    ++calls;
  }
  const std::size_t iters = timing_rules::calls_per_sample(r.min_sample_s, one);
  // The CPU rule's clocks, read outside the samples' clocks: around the
  // whole race, so only its ends can be late (the rule's margin).
  const double cpu_before = process_cpu_s();
  const auto wall_before = clock::now();
  const auto result = tessel::race(
      [&]() -> std::optional<double> {
        poison_all();
        // The sample's changes, drawn before its clock starts: made on the
        // copy in order (each exchange depends on the values before it), so
        // the copy holds the bases after the sample, and the timed loop only
        // makes the planned changes before each call.
        plan.clear();
        for (std::size_t k = 0; k < iters; ++k)
          for (std::size_t i = 0; i < n_in; ++i) plan.draw(walk, calls + k, i, copy.buffers[i]);
        const auto start = clock::now();
        for (std::size_t k = 0, j = 0; k < iters; ++k) {
          for (std::size_t i = 0; i < n_in; ++i, ++j) plan.make(j, i, r.inputs[i]);
          call();
        }
        // The changes' time, kept out of the sample (timing_rules::change_seconds).
        const double took =
            std::max(seconds(start, clock::now()) - change_s * static_cast<double>(iters), 0.0);
        calls += iters;
        return took / static_cast<double>(iters);
      },
      r.incumbent, r.racing);
  const double wall_s = seconds(wall_before, clock::now());
  const double cpu_s = process_cpu_s() - cpu_before;
  // What the last call was given, and so what the inputs must hold: the
  // bases (the copy) turned as they were for it.
  input_copy last(copy.buffers);
  for (std::size_t i = 0; i < n_in; ++i)
    tessel::loop_rule::turn_in_place(last.buffers[i].data, r.inputs[i].element_size(),
                                     static_cast<std::uint64_t>(r.inputs[i].elements()),
                                     plan.lengths[i], plan.turned[i].data(), plan.scratch.data());
  last.check(r.inputs);
  timing_rules::check_cpus(given, cpu_s, wall_s);
  for (const auto& b : r.outputs) write_npy(b);
  std::string samples;
  for (const double s : result.samples) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%.9g", samples.empty() ? "" : ", ", s);
    samples += text;
  }
  std::fprintf(answer_channel,
               "{\"status\": \"ok\", \"samples_s\": [%s], \"stopped\": \"%s\", \"iters\": %zu, "
               "\"calls\": %llu}\n",
               samples.c_str(), tessel::to_string(result.stopped), iters,
               static_cast<unsigned long long>(calls));
  return 0;
}
