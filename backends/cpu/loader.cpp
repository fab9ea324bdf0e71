// loader.cpp: the process that runs and times one compiled kernel for the
// cpu backend (docs/cpu.md, "What is measured"). tessel builds it once per
// cache folder with the system compiler, from this file (loader_io.hpp and
// loader_seccomp.hpp written in place of their #include by embed.cmake), tessel/cpu_kernel.hpp,
// tessel/race_rule.hpp and tessel/loop_rule.hpp (embedded in the library),
// and starts one loader per gate run and per timing, so a kernel that
// crashes or hangs takes only its loader down.
//
//   loader LIBRARY.so run  [--in TYPE DIMS FILE.npy]... [--out TYPE DIMS FILE.npy]... [--const
//   NAME=V]... loader LIBRARY.so time ... --warmup N --min-sample S --min-repeats N --max-repeats N
//                              --margin X --target-ci X --max-seconds X [--incumbent S]
//                              [--loop-seed N]
//   (stdin: the run's token, one line, and for a timing the judged call's seed; empty: none)
//
// Two processes (docs/gate.md, "Round twelve: the answer"): the timing
// parent keeps the clock, the answer channel, the token and its private copy
// of the inputs' bases; the kernel's process, its child, closes the answer
// channel and wipes the token before it loads the kernel, and calls it on
// tensors in memory both share, a run of calls at a time on the parent's
// word (a pipe each way). The parent measures each run of calls from its
// word to the child's "done", so a kernel cannot reach the clock, the
// samples or the answer: a line it writes anywhere is not the loader's
// (tessel takes the one line with the token), and a kernel that kills its
// loader or exits leaves no answer. The kernel's process cannot create
// processes or reach the parent's memory (loader_seccomp.hpp, round thirteen).
//
// run: one call, its outputs written. time: `warmup` calls (the last one,
// for a kernel far faster than the handoff, a run of 8^k calls lasting an
// eighth of a sample), then samples of `iters` calls each (iters chosen so a
// sample takes at least min-sample seconds), raced by race_decision; the outputs of the last timed
// call are written, and those of one other call of the samples, which the parent draws after each
// sample by reservoir sampling (each call writes outputs of its own, output_slots; judged_call).
// Before every call after the first, the inputs change by the rule of tessel/loop_rule.hpp (two
// elements of each input's base exchanged, drawn from the loop seed, and a diagonal sweep that
// reaches every row and column; the call is given the bases with every row rotated by an offset of
// its own), so no call is given inputs an earlier one was, nearly every element differs from the
// call before's, and the answer counts the calls made: tessel replays the rule to judge the last
// call's outputs (docs/gate.md, "Round seven", "Round ten (b)", "Round eleven"). The kernel's
// process draws and makes the changes; the parent replays them on its private copy of the bases
// after the timing, and compares the inputs with it (turned as the last call's were): a kernel that
// wrote one, or changed the inputs otherwise than the rule does, is answered "suspicious"
// (docs/gate.md, "Round eight"). A timing is given some CPUs (the parent's affinity when it
// starts): a kernel that widened its process's affinity, or whose process used more CPU time over
// the samples than those CPUs allow, is answered "suspicious" (docs/gate.md, "Round nine"). The
// answer is one JSON line on the original stdout, with the token; the kernel's stdout goes to
// stderr.
#include <tessel/cpu_kernel.hpp>
#include <tessel/loop_rule.hpp>
#include <tessel/race_rule.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loader_io.hpp"
#include "loader_seccomp.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <sched.h>
#endif

namespace {

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

/// The loader's own copy of tensors: of the inputs, made before the first
/// call, what the inputs must hold after the calls (the same exchanges
/// applied to it); of the inputs and outputs after the last call, what is
/// checked and written (the kernel's process cannot change it after).
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

/// Process `pid`'s CPU time so far (every thread), in seconds.
double process_cpu_s(pid_t pid) {
  clockid_t id{};
  timespec t{};
  if (::clock_getcpuclockid(pid, &id) != 0 || ::clock_gettime(id, &t) != 0)
    fail("cannot read the kernel's process's CPU time");
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
  /// Whether the affinity of `pid` (the kernel's process's first thread,
  /// which calls the kernel) is still within the one given (a kernel may
  /// bind itself to fewer CPUs: OMP_PROC_BIND does).
  [[nodiscard]] bool within(pid_t pid) const {
    cpu_set_t now, both;
    CPU_ZERO(&now);
    if (!known || ::sched_getaffinity(pid, sizeof now, &now) != 0) return true;
    CPU_AND(&both, &now, &set);
    return CPU_EQUAL(&both, &now) != 0;
  }
#else
  [[nodiscard]] int count() const { return 0; }
  [[nodiscard]] bool within(pid_t) const { return true; }
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
/// given over the timing: widened its process's (`pid`) affinity, or used more CPU time
/// (`cpu_s`, in `wall_s` of timing) than its CPUs allow.
void check_cpus(const given_cpus& given, pid_t pid, double cpu_s, double wall_s) {
  if (!given.within(pid))
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

/// What the parent tells the kernel's process: 'l' load the kernel, 'p'
/// prepare `calls` calls (poison the outputs, draw the changes), 'g' go (make them, call),
/// 'q' quit. Its replies: one byte, 'r' ready or 'd' done, or 'f' (or 's',
/// "suspicious") and the failure's message (then it exits).
struct command {
  char op = 'q';
  std::uint64_t calls = 0;
};

/// The kernel's process: the kernel loaded (on 'l') and called on the
/// shared tensors, with the loop rule's changes drawn on its own copy of
/// the bases (`copy`, its after the fork). Never returns.
[[noreturn]] void serve(request& r, input_copy& copy, call_plan& plan, const output_slots& slots,
                        int commands) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // its parent's end is its own
  // Not root's uid where the loader is root (round sixteen; the bounding set
  // emptied first, while CAP_SETPCAP is held); none of its rights (round
  // fifteen), filter or not; then no process of its own, no program in its
  // place, no other process's memory (loader_seccomp.hpp), from before the
  // kernel is loaded.
  seccomp::drop_bounding_set();
  if (const std::string why = seccomp::become_user(r.kernel_uid, r.kernel_gid); !why.empty())
    fail(why);
  if (const std::string why = seccomp::drop_capabilities(); !why.empty()) fail(why);
  if (const std::string why = seccomp::turned_off() ? "" : seccomp::install(reply_channel);
      !why.empty())
    fail(why + " (TESSEL_CPU_SECCOMP=off runs kernels without it: docs/cpu.md)");
  const auto refused = [] {  // a refusal since is the answer: reported by seccomp::refused,
    if (seccomp::refused_call == 0) return;  // or here where its report could not be written
    if (seccomp::reported == 0) fail(seccomp::refusal(), "suspicious");
    std::_Exit(0);
  };
  tessel::loop_rule::walk walk(r.loop_seed, r.inputs.size());
  const std::size_t n_in = r.inputs.size();
  tessel::cpu::entry_function entry = nullptr;
  std::vector<tessel::cpu::tensor> ins, outs;
  std::vector<tessel::cpu::constant> constants;
  tessel::cpu::kernel_args args{};
  char message[2048] = {0};
  std::uint64_t calls = 0;
  for (command c; ::read(commands, &c, sizeof c) == static_cast<ssize_t>(sizeof c);) {
    if (c.op == 'l') {
      void* library = ::dlopen(r.library.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr) fail(std::string("cannot load the kernel: ") + ::dlerror());
      entry = reinterpret_cast<tessel::cpu::entry_function>(
          ::dlsym(library, tessel::cpu::entry_symbol));
      refused();  // its constructors
      if (entry == nullptr) fail("the library has no tessel_cpu_entry");
      for (auto& b : r.inputs)
        ins.push_back({b.data, b.shape.data(), static_cast<std::int32_t>(b.shape.size()), b.type});
      for (auto& b : r.outputs)
        outs.push_back({b.data, b.shape.data(), static_cast<std::int32_t>(b.shape.size()), b.type});
      for (std::size_t i = 0; i < r.constant_names.size(); ++i)
        constants.push_back({r.constant_names[i].c_str(), r.constant_values[i]});
      args = {ins.data(),       static_cast<std::int32_t>(ins.size()),
              outs.data(),      static_cast<std::int32_t>(outs.size()),
              constants.data(), static_cast<std::int32_t>(constants.size())};
    } else if (c.op == 'p') {
      // The outputs poisoned, here so that their lines are in this
      // process's caches as they would be in one process's; and the
      // changes, drawn before the parent's clock starts: made on the copy
      // in order (each exchange depends on the values before it).
      for (std::size_t s = 0; s < slots.used(c.calls); ++s)
        for (std::size_t o = 0; o < r.outputs.size(); ++o) poison(r.outputs[o], slots.at(s, o));
      plan.clear();
      for (std::uint64_t k = calls; k < calls + c.calls; ++k)
        for (std::size_t i = 0; k > 0 && i < n_in; ++i) plan.draw(walk, k, i, copy.buffers[i]);
    } else if (c.op == 'g') {
      if (c.calls > 0 && entry == nullptr) fail("the kernel is not loaded");
      const std::size_t used = slots.used(c.calls);
      for (std::uint64_t k = 0, j = 0, slot = 0; k < c.calls;
           ++k, ++calls, slot = slot + 1 < used ? slot + 1 : 0) {
        for (std::size_t i = 0; calls > 0 && i < n_in; ++i, ++j) plan.make(j, i, r.inputs[i]);
        for (std::size_t o = 0; o < outs.size(); ++o) outs[o].data = slots.at(slot, o);  // call k's
        const int failed = entry(&args, message, sizeof message);
        refused();
        if (failed != 0)
          fail(std::string("the kernel failed: ") + (message[0] != 0 ? message : "(no message)"));
      }
    } else {
      std::exit(0);  // the kernel's atexit handlers run, as in a process of its own
    }
    const char reply = c.op == 'g' ? 'd' : 'r';
    if (::write(reply_channel, &reply, 1) != 1) std::_Exit(0);
  }
  std::_Exit(0);  // the parent is gone
}

/// The parent's side of the kernel's process: started before the kernel is
/// loaded (its tensors already mapped shared), told what to do, and timed
/// from the parent's word to its reply.
class kernel_process {
 public:
  using clock = std::chrono::steady_clock;

  std::uint64_t last_run = 0;  ///< the calls of the last run made

  kernel_process(request& r, input_copy& copy, call_plan& plan, const output_slots& slots) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) fail("cannot make the kernel process's pipes");
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) fail("cannot start the kernel's process");
    if (pid == 0) {
      ::close(::fileno(answer_channel));  // the kernel never holds the answer channel
      explicit_wipe(token, sizeof token);
      judged_seed = 0;
      ::close(down[1]);
      ::close(up[0]);
      reply_channel = up[1];
      serve(r, copy, plan, slots, down[0]);
    }
    // Nothing else of this process may reach the child's hands: not its
    // memory (/proc/PID/mem), its files (/proc/PID/fd) or a ptrace attach.
    ::prctl(PR_SET_DUMPABLE, 0);
    ::signal(SIGPIPE, SIG_IGN);  // a child that is gone is seen by its pipe's EOF
    kernel_pid = pid;
#ifdef SYS_pidfd_open
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#endif
    ::close(down[0]);
    ::close(up[1]);
    to_ = down[1];
    from_ = up[0];
  }
  kernel_process(const kernel_process&) = delete;
  kernel_process& operator=(const kernel_process&) = delete;

  /// Loads the kernel in the child.
  void load() {
    send({'l', 0});
    expect('r');
  }
  /// `calls` calls (with their changes): the seconds from the word to go to
  /// the reply done, their changes drawn before.
  double timed(std::uint64_t calls) {
    send({'p', calls});
    expect('r');
    const auto start = clock::now();
    send({'g', calls});
    expect('d');
    if (calls > 0) last_run = calls;
    return std::chrono::duration<double>(clock::now() - start).count();
  }
  /// The handoff's own time: the fastest of at least 16 runs of no calls
  /// (until 2 ms are spent, at most 1000), measured before the kernel is
  /// loaded; subtracted from every sample, as the changes' time is.
  double handoff_seconds() {
    double best = std::numeric_limits<double>::infinity(), spent = 0;
    for (int rep = 0; rep < 1000 && (rep < 16 || spent < 2e-3); ++rep) {
      const double took = timed(0);
      best = std::min(best, took);
      spent += took;
    }
    return best;
  }
  /// The child's CPU time so far.
  [[nodiscard]] double cpu_s() const { return process_cpu_s(kernel_pid); }
  /// Tells the child to quit and waits for its end (its atexit handlers run).
  void finish() {
    quitting_ = true;
    send({'q', 0});
    reap();
  }

 private:
  int to_ = -1, from_ = -1, pidfd_ = -1;
  bool quitting_ = false;

  static void explicit_wipe(char* p, std::size_t n) {
    volatile char* v = p;
    for (std::size_t i = 0; i < n; ++i) v[i] = 0;
  }
  void send(const command& c) {
    if (::write(to_, &c, sizeof c) != static_cast<ssize_t>(sizeof c)) reap();
  }
  /// Reads the child's reply; a failure it reported, or its end, is answered.
  /// The child's end is seen by its pidfd too (Linux 5.3), not only by the
  /// pipe's EOF, which never comes while a process it forked holds the pipe.
  void expect(char wanted) {
    char reply = 0;
    if (pidfd_ >= 0) {
      pollfd ready[2] = {{from_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
      while (::poll(ready, 2, -1) < 0 && errno == EINTR) {
      }
      if ((ready[0].revents & POLLIN) == 0) reap();
    }
    if (::read(from_, &reply, 1) != 1) reap();
    if (reply == wanted) return;
    std::string message;
    if (reply == 'f' || reply == 's') {  // its message is in the pipe whole before it exits
      int status = 0;
      ::waitpid(kernel_pid, &status, 0);
      kernel_pid = 0;
      ::fcntl(from_, F_SETFL, O_NONBLOCK);
      for (char buffer[512];;) {
        const ssize_t n = ::read(from_, buffer, sizeof buffer);
        if (n <= 0) break;
        message.append(buffer, static_cast<std::size_t>(n));
      }
    } else {
      message = "the kernel's process broke its handoff with the loader";
    }
    fail(message.substr(0, 2048), reply == 's' ? "suspicious" : "runtime_error");
  }
  /// Waits for the child's end: a signal ends the parent the same way (a
  /// crash stays a crash), an exit that was not asked for is answered.
  void reap() {
    int status = 0;
    while (::waitpid(kernel_pid, &status, 0) < 0 && errno == EINTR) {
    }
    kernel_pid = 0;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS && !seccomp::turned_off())
      fail(seccomp::killed, "suspicious");  // a refused call with SIGSYS blocked
    if (WIFSIGNALED(status)) {
      ::signal(WTERMSIG(status), SIG_DFL);
      ::raise(WTERMSIG(status));
    }
    if (!quitting_)
      fail("the kernel's process exited (code " + std::to_string(WEXITSTATUS(status)) +
           ") before its calls were done");
  }
};

}  // namespace

int main(int argc, char** argv) {
  // The answer goes to the original stdout; the kernel's prints to stderr.
  const int channel = ::dup(1);
  if (channel < 0 || ::dup2(2, 1) < 0) return 3;
  answer_channel = ::fdopen(channel, "w");
  if (answer_channel == nullptr) return 3;
  read_token();
  request r = parse(argc, argv);
  const given_cpus given;  // before the kernel's process starts
  map_tensors(r.inputs, {});
  for (auto& b : r.inputs) read_npy(b);
  // The changes' own time, measured before the kernel's code is loaded
  // (none of its threads can slow it, to have more subtracted).
  const double change_s =
      r.mode == "time" ? timing_rules::change_seconds(r.inputs, r.loop_seed) : 0;
  output_slots slots;  // after the inputs, as the arena placed them
  slots.map(r.outputs, r.inputs, r.mode == "time" ? 1000000 : 1);

  // The copy of the bases and the plan of the changes, before the fork:
  // the child draws the calls' changes on its copy, the parent replays them
  // on its own after the timing.
  input_copy copy(r.inputs);
  call_plan plan(r.inputs);
  kernel_process kernel(r, copy, plan, slots);
  const char* const filtered = seccomp::turned_off() ? "false" : "true";  // the answer says
  const double handoff_s = r.mode == "time" ? kernel.handoff_seconds() : 0;
  kernel.load();
  if (r.mode == "run") {
    const double took = std::max(kernel.timed(1) - handoff_s, 0.0);
    const input_copy inputs(r.inputs), outputs(r.outputs);  // as the call left them
    kernel.finish();
    copy.check(inputs.buffers);
    for (const auto& b : outputs.buffers) write_npy(b);
    std::fprintf(answer_channel,
                 "{\"status\": \"ok\", \"seconds\": %.9g, \"seccomp\": %s, \"token\": %s}\n", took,
                 filtered, json_string(token).c_str());
    return 0;
  }

  // The loop rule: before every call after the first, each input's base
  // changes (the step's two elements exchanged, and the sweep's diagonal:
  // every row and column of the input), and the call is given its base with
  // every row turned by an offset of its own, so a kernel that memoises its
  // outputs by the inputs' content meets new inputs on every call, and one
  // that recomputes only what changed finds nearly every element changed.
  std::uint64_t calls = 0;
  for (std::size_t w = 1; w < timing_rules::warmup_calls(r.warmup); ++w, ++calls)
    (void)kernel.timed(1);
  // The last warm-up call calibrates the calls per sample; a call far
  // shorter than the handoff's jitter is timed in runs of 8^k calls, until
  // two runs of the same length each last an eighth of a sample (so a
  // moment of a loaded machine, or a slow handoff, in one run does not set
  // it); the faster of the two is kept. Their calls are warm-up calls too.
  double one = 0;
  for (std::uint64_t run = 1;; run *= 8) {
    const auto timed_run = [&] {
      calls += run;
      return std::max(kernel.timed(run) - handoff_s, 0.0);
    };
    const double first = timed_run();
    if (first < r.min_sample_s / 8 && run < 1000000) continue;
    const double took = std::min(first, timed_run());
    one = took / static_cast<double>(run);
    if (took >= r.min_sample_s / 8 || run >= 1000000) break;
  }
  const std::size_t iters = timing_rules::calls_per_sample(r.min_sample_s, one);
  // The CPU rule's clocks, read outside the samples' clocks: around the
  // whole race, so only its ends can be late (the rule's margin).
  using clock = kernel_process::clock;
  const double cpu_before = kernel.cpu_s();
  const auto wall_before = clock::now();
  // The judged calls: the timing's last, and one other that the parent
  // draws over the samples, each sample's after its run, from a seed the
  // kernel's process never held (judged_call).
  judged_call judged;
  const auto result = tessel::race(
      [&]() -> std::optional<double> {
        // The handoff's and the changes' time, kept out of the sample
        // (timing_rules::change_seconds).
        const double took =
            std::max(kernel.timed(iters) - handoff_s - change_s * static_cast<double>(iters), 0.0);
        judged.offer(slots, r.outputs, calls, iters);  // before the next run poisons the slots
        calls += iters;
        return took / static_cast<double>(iters);
      },
      r.incumbent, r.racing);
  const double wall_s =
      std::chrono::duration<double>(clock::now() - wall_before).count() - judged.copy_s;
  const double cpu_s = kernel.cpu_s() - cpu_before;
  timing_rules::check_cpus(given, kernel_pid, cpu_s, wall_s);
  // The tensors as the calls left them, kept before the kernel's process
  // quits: what its exit handlers (or threads still running) write after
  // its last "done" is not judged.
  const std::uint64_t run = kernel.last_run;
  const input_copy inputs(r.inputs), outputs(slots.in(r.outputs, (run - 1) % slots.used(run)));
  kernel.finish();
  // The parent's replay of the changes on its copy of the bases: what the
  // last call was given, and so what the inputs must hold, is the bases
  // turned as they were for it.
  tessel::loop_rule::walk walk(r.loop_seed, r.inputs.size());
  for (std::uint64_t k = 1; k < calls; ++k) {
    plan.clear();
    for (std::size_t i = 0; i < r.inputs.size(); ++i) plan.draw(walk, k, i, copy.buffers[i]);
  }
  input_copy last(copy.buffers);
  for (std::size_t i = 0; i < r.inputs.size(); ++i)
    tessel::loop_rule::turn_in_place(last.buffers[i].data, r.inputs[i].element_size(),
                                     static_cast<std::uint64_t>(r.inputs[i].elements()),
                                     plan.lengths[i], plan.turned[i].data(), plan.scratch.data());
  last.check(inputs.buffers);
  for (const auto& b : outputs.buffers) write_npy(b);
  for (auto b : judged.outputs)  // the drawn call's, beside the last's
    if (judged.call > 0 && judged.call < calls) write_npy((b.path += ".judged", b));
  std::string samples;
  for (const double s : result.samples) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%.9g", samples.empty() ? "" : ", ", s);
    samples += text;
  }
  std::fprintf(answer_channel,
               "{\"status\": \"ok\", \"samples_s\": [%s], \"stopped\": \"%s\", \"iters\": %zu, "
               "\"calls\": %llu, \"judged_call\": %llu, \"judged_copy_s\": %.9g, \"seccomp\": %s, "
               "\"token\": %s}\n",
               samples.c_str(), tessel::to_string(result.stopped), iters,
               static_cast<unsigned long long>(calls),
               static_cast<unsigned long long>(judged.call < calls ? judged.call : 0),
               judged.copy_s, filtered, json_string(token).c_str());
  return 0;
}
