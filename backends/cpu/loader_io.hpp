// loader_io.hpp: the loader's input and output (loader.cpp): its request
// (the command line), its answer (one JSON line on the answer channel, with
// the run's token), the tensors (shared with the kernel's process) and the
// .npy files they are read from and written to. Part of the loader's
// source: embed.cmake writes it in place of its #include, so the loader is
// still built from one file.
#pragma once

#include <tessel/cpu_kernel.hpp>
#include <tessel/loop_rule.hpp>
#include <tessel/race_rule.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

namespace {

using tessel::cpu::dtype;

/// The answer channel: the original stdout (the timing parent's only; the
/// kernel's process closes it before the kernel is loaded).
FILE* answer_channel = stdout;
/// The run's token, read from stdin before the kernel's process is started
/// and carried by every answer, so tessel knows the loader's answer from a
/// line that anything else wrote on the pipe (docs/gate.md, "Round
/// twelve"). The kernel's process wipes its copy before loading the kernel.
char token[80] = {0};
/// The seed of the judged call's draw (a second line on stdin after the
/// token; 0: none given), drawn by tessel from its secret: the parent draws
/// after each sample which call is judged besides the last (judged_call).
/// The kernel's process wipes it with the token.
std::uint64_t judged_seed = 0;
/// In the kernel's process: the pipe to the timing parent, on which a
/// failure is reported ('f', or 's' for "suspicious", and its message)
/// instead of an answer; -1 in the parent.
int reply_channel = -1;
/// The kernel's process (the parent's child); 0: not started. Killed when
/// the parent answers a failure.
pid_t kernel_pid = 0;

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
  if (reply_channel >= 0) {  // the kernel's process: the parent answers
    const std::string report = (std::strcmp(status, "suspicious") == 0 ? "s" : "f") + message;
    (void)!::write(reply_channel, report.data(), report.size());
    std::_Exit(0);
  }
  if (kernel_pid > 0) ::kill(kernel_pid, SIGKILL);
  std::fprintf(answer_channel, "{\"status\": \"%s\", \"message\": %s, \"token\": %s}\n", status,
               json_string(message).c_str(), json_string(token).c_str());
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

/// The memory shared with the kernel's process (mapped before it is
/// started), where every tensor is placed, one after the other, each
/// aligned to 64 bytes as an allocator would place them: tensors each at
/// the start of a page of their own would alias in the store buffer (their
/// addresses equal modulo 4 KiB): 1.06 of an 8 x 8 transpose's time.
struct shared_arena {
  unsigned char* next = nullptr;
  unsigned char* end = nullptr;
};
shared_arena arena;

/// Maps the arena for the tensors of `r` (its inputs and outputs).
void map_tensors(const std::vector<buffer>& inputs, const std::vector<buffer>& outputs) {
  std::size_t total = 64;
  for (const auto* list : {&inputs, &outputs})
    for (const auto& b : *list) total += (b.bytes() + 63) / 64 * 64 + 64;
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("out of memory mapping the tensors");
  arena.next = static_cast<unsigned char*>(p);
  arena.end = arena.next + total;
}

/// Places a tensor in the arena (map_tensors counted it).
void allocate(buffer& b) {
  const std::size_t size = (b.bytes() + 63) / 64 * 64 + 64;
  if (arena.next == nullptr || static_cast<std::size_t>(arena.end - arena.next) < size)
    fail("a tensor the shared memory has no room for");
  b.data = arena.next;
  arena.next += size;
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

/// Fills an output (`b`, at `data`) with NaN (int32: INT32_MIN), so a
/// kernel that skips an element is seen.
void poison(const buffer& b, void* data) {
  const auto n = static_cast<std::size_t>(b.elements());
  if (b.type == dtype::fp32) {
    auto* p = static_cast<float*>(data);
    for (std::size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
  } else if (b.type == dtype::bf16) {
    auto* p = static_cast<tessel::cpu::bf16*>(data);
    for (std::size_t i = 0; i < n; ++i) p[i] = tessel::cpu::bf16{0x7fc0};
  } else {
    auto* p = static_cast<std::int32_t*>(data);
    for (std::size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<std::int32_t>::min();
  }
}

/// The outputs' slots: each call of a run of calls writes its own copy of
/// the outputs, call k of the run slot k % used (used: the run's calls, at
/// most `count`), so that the parent can judge, besides the timing's last
/// call, one it draws after a run (judged_call; docs/cpu.md, "What is
/// measured"). Mapped
/// shared before the kernel's process starts: at most max_bytes of slots
/// (one at least), pages touched only as they are poisoned. The first slot
/// starts `skew` bytes into a page (the bytes the inputs take in the arena),
/// so that the outputs alias the inputs in the store buffer as they would
/// placed after them.
struct output_slots {
  static constexpr std::size_t max_bytes = std::size_t{64} << 20;
  unsigned char* base = nullptr;
  std::size_t stride = 0, count = 0;
  std::vector<std::size_t> offsets;  ///< per output: where it is in a slot

  /// Maps slots for `outputs`, at most `most`, and points the outputs at
  /// slot 0; `inputs`: the tensors in the arena.
  void map(std::vector<buffer>& outputs, const std::vector<buffer>& inputs, std::size_t most) {
    std::size_t skew = 0;
    for (const auto& b : inputs) skew += (b.bytes() + 63) / 64 * 64 + 64;
    for (const auto& b : outputs) {
      offsets.push_back(stride);
      stride += (b.bytes() + 63) / 64 * 64 + 64;
    }
    stride = std::max<std::size_t>(stride, 64);
    count = std::clamp<std::size_t>(max_bytes / stride, 1, std::max<std::size_t>(most, 1));
    skew %= 4096;
    void* p = ::mmap(nullptr, skew + stride * count, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("out of memory mapping the outputs");
    base = static_cast<unsigned char*>(p) + skew;
    for (std::size_t o = 0; o < outputs.size(); ++o) outputs[o].data = at(0, o);
  }
  /// The slots a run of `calls` calls uses.
  [[nodiscard]] std::size_t used(std::uint64_t calls) const {
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(std::max<std::uint64_t>(calls, 1), count));
  }
  [[nodiscard]] void* at(std::size_t slot, std::size_t o) const {
    return base + slot * stride + offsets[o];
  }
  /// `outputs` as slot `slot` holds them.
  [[nodiscard]] std::vector<buffer> in(std::vector<buffer> outputs, std::size_t slot) const {
    for (std::size_t o = 0; o < outputs.size(); ++o) outputs[o].data = at(slot, o);
    return outputs;
  }
};

/// The call judged besides the timing's last (docs/gate.md, "Round
/// fourteen", "Round seventeen"), drawn over all the samples by reservoir
/// sampling: after each sample's run of calls (outside its clock), the
/// parent draws, from the judged call's seed (which the kernel's process
/// never holds) and the sample's number i (1-based), one of the run's calls
/// whose slot no later call of it wrote, its last included, and with odds
/// 1/i keeps that call in place of the one kept: a copy of its outputs in
/// the parent's own memory, and its number among all the timing's calls
/// (1-based: call k was given the loop rule's inputs of perturbed_set(set,
/// k)). Every call of every sample (of the last `used` of each, where a run
/// cycles through its slots) is then kept with the same odds, 1/(n used),
/// and the kernel cannot foresee which: skipping the work on any share of
/// the calls is caught at about that share's odds. (Until round seventeen a
/// run's last call was never drawn, as the last sample's is judged anyway:
/// a kernel that skipped the last call of every run but the final one was
/// never judged on those.) When the kept call is the timing's last, the
/// draw judges nothing more: main() writes no second set of outputs.
struct judged_call {
  std::vector<buffer> outputs;  ///< the kept call's, in `bytes`
  std::vector<std::vector<unsigned char>> bytes;
  std::uint64_t call = 0;  ///< the kept call's number; 0: none
  std::uint64_t samples = 0;
  double copy_s = 0;  ///< the copies' wall time, kept out of the CPU rule's window

  /// Offers the sample just timed: `run` calls after the timing's first `before`.
  void offer(const output_slots& slots, const std::vector<buffer>& outs, std::uint64_t before,
             std::uint64_t run) {
    const std::uint64_t i = ++samples, used = slots.used(run),
                        draw = tessel::loop_rule::mix(judged_seed + i * 0x9e3779b97f4a7c15ULL);
    if (run == 0 || tessel::loop_rule::mix(draw ^ 1) % i != 0) return;
    const std::uint64_t back = tessel::loop_rule::mix(draw ^ 2) % used;  // 0: the run's last
    const auto start = std::chrono::steady_clock::now();
    outputs = slots.in(outs, (run - 1 - back) % used);
    bytes.resize(outputs.size());
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      const auto* p = static_cast<const unsigned char*>(outputs[o].data);
      bytes[o].assign(p, p + outputs[o].bytes());
      outputs[o].data = bytes[o].data();
    }
    call = before + run - back;
    copy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

/// Reads the run's token (one line on stdin, at most 79 bytes in all) and
/// the judged call's seed (a second line, if any), then gives stdin
/// /dev/null.
void read_token() {
  std::size_t n = 0;
  for (ssize_t got = 0; n + 1 < sizeof token; n += static_cast<std::size_t>(got)) {
    got = ::read(0, token + n, sizeof token - 1 - n);
    if (got <= 0) break;
  }
  const std::size_t end = std::min(std::strcspn(token, "\n"), sizeof token - 1);
  if (end + 1 < n) judged_seed = std::strtoull(token + end + 1, nullptr, 10);
  std::memset(token + end, 0, sizeof token - end);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  if (null > 0) ::close(null);
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
  /// --kernel-user UID:GID: who the kernel's process becomes where the
  /// loader is root (seccomp::become_user); -1: no one, uid 0 kept.
  long kernel_uid = -1, kernel_gid = -1;
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
    } else if (flag == "--kernel-user") {
      const std::string ids = next();
      char* end = nullptr;
      r.kernel_uid = std::strtol(ids.c_str(), &end, 10);
      if (end == ids.c_str() || *end != ':' || r.kernel_uid < 0)
        fail("--kernel-user needs UID:GID, got " + ids);
      const char* gid = end + 1;
      r.kernel_gid = std::strtol(gid, &end, 10);
      if (end == gid || *end != 0 || r.kernel_gid < 0)
        fail("--kernel-user needs UID:GID, got " + ids);
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
}  // namespace
