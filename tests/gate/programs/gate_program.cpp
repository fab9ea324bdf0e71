// gate_program.cpp: a gated `command:` program for tests/gate: C = A B from
// $TESSEL_INPUT_DIR/{A,B}.npy into $TESSEL_OUTPUT_DIR/C.npy, then one JSON
// line with its time. The first argument picks how it behaves: honestly (the
// controls) or as one of the cheats of class 1 (issue 25), which try to tell
// the gate's runs from the timed ones.
//   honest     fp32 partial sums added in an order that changes every run
//              (atomics in arrival order); times itself
//   bf16       the same, stored as bf16 (the output is declared bf16)
//   reference  fp64 (gate_reference); prints nothing
//   env_sniff  honest only when TESSEL_GATE=1 (how the gate used to say so)
//   dir_sniff  honest only when the input folder's name says "gate"
//   counter    honest for its first 10 runs under one tessel process (the
//              old gate's count), zeros afterwards
//   negative   honest outputs, a time of -1 s
//   zero_time  honest outputs, a time of 0 s
//   too_fast   honest outputs, a time of 1e-12 s (below any machine's floor)
//   fastest_time  honest outputs, the fastest time of its runs so far under
//              one tessel process reported instead of its own (round five: a
//              command times itself, which no output rule can see)
//   memoise    honest outputs kept in a folder per tessel process, keyed
//              by the inputs' whole content: a run on inputs it has seen
//              copies its earlier outputs at once; one on new inputs computes
//              them and sleeps memo_miss_ms more (a slow kernel), so a
//              reported time below that was answered from the cache (round
//              six); each hit adds a line to the folder's "hits" file
//   hang       never exits (round seven: the default time limit ends it)
//   snoop      honest, after writing to $TESSEL_REDTEAM_LOG what it can see:
//              the folder around its input folder and the TMPDIR (round
//              seven)
//   daemon     honest, after leaving a daemon (setsid, double fork) that
//              sleeps 300 s; its pid goes to $TESSEL_REDTEAM_LOG (round seven)
//   daemon_erased  the same, the daemon overwriting its environment block
//   daemon_bare    the same, the daemon exec'ing sleep with an empty
//              environment (redteam_tricks.hpp)
//   scavenge   (round nine) looks for the reference's outputs on disk: every
//              run folder under TMPDIR and /tmp holding in/A.npy, in/B.npy
//              and out/C.npy goes into a stash ($TESSEL_REDTEAM_STASH, kept
//              across runs) keyed by the inputs' bytes; a run whose inputs
//              are in the stash copies the stashed C ("hit new", or "hit
//              repeat" on inputs an earlier run of its own was given), any
//              other writes zeros ("miss"); logged to $TESSEL_REDTEAM_LOG
//   peek       (round nine) honest, after trying to read the memory of its
//              supervisor and of tessel (/proc/PID/mem at a mapped
//              address): logs "read ROLE" or "denied ROLE"
//   zeros      C = 0, at once
//   hijack     C = 0, after replacing the file $TESSEL_REDTEAM_REFERENCE (the
//              reference program, a file of the user's) with a script that
//              runs this program as `zeros` (round seven)
#include "gated/npy.hpp"
#include "redteam_tricks.hpp"

#include <tessel/gate.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace {

using tessel::detail::npy_array;

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): single-threaded
  return v != nullptr ? v : "";
}

npy_array load(const std::string& path) {
  std::string bytes;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buffer[1 << 16];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) bytes.append(buffer, n);
    std::fclose(f);
  }
  return tessel::detail::npy_decode(bytes, 1 << 24);
}

void save(const std::string& path, const std::vector<std::int64_t>& shape,
          const std::vector<double>& values) {
  const std::string bytes = tessel::detail::npy_encode(shape, tessel::element_type::fp32, values);
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// C = A B with fp32 partial sums over chunks of 8 of K, added in a random order.
std::vector<double> product(const npy_array& a, const npy_array& b, bool exact) {
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  std::vector<std::int64_t> chunks(static_cast<std::size_t>((k + 7) / 8));
  std::iota(chunks.begin(), chunks.end(), std::int64_t{0});
  std::mt19937_64 order{std::random_device{}()};
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const auto at = [&](const npy_array& x, std::int64_t r, std::int64_t col, std::int64_t w) {
        return x.values[static_cast<std::size_t>(r * w + col)];
      };
      if (exact) {
        double sum = 0;
        for (std::int64_t t = 0; t < k; ++t) sum += at(a, i, t, k) * at(b, t, j, n);
        c[static_cast<std::size_t>(i * n + j)] = sum;
        continue;
      }
      std::shuffle(chunks.begin(), chunks.end(), order);
      float sum = 0;
      for (const std::int64_t chunk : chunks) {
        float partial = 0;
        for (std::int64_t t = chunk * 8; t < std::min(k, chunk * 8 + 8); ++t)
          partial += static_cast<float>(at(a, i, t, k)) * static_cast<float>(at(b, t, j, n));
        sum += partial;
      }
      c[static_cast<std::size_t>(i * n + j)] = sum;
    }
  return c;
}

/// The tessel process that runs this program: the parent of its parent,
/// the run's supervisor (backends/command/process.cpp).
long tuner() { return tessel_redteam::parent_of(tessel_redteam::machine_parent()); }

/// Runs under the same tessel process so far, this one included (a file
/// per tessel process).
int runs_so_far() {
  const std::string path = "/tmp/tessel-gate-program-" + std::to_string(tuner());
  int runs = 0;
  std::ifstream(path) >> runs;
  std::ofstream(path) << ++runs;
  return runs;
}

/// The fastest of `seconds` and the times of earlier runs under the same
/// tessel process.
double fastest_so_far(double seconds) {
  const std::string path = "/tmp/tessel-gate-program-fastest-" + std::to_string(tuner());
  double fastest = seconds, earlier = 0;
  if (std::ifstream f(path); f >> earlier) fastest = std::min(earlier, seconds);
  std::ofstream(path) << fastest;
  return fastest;
}

/// memoise: what a run on new inputs adds to its time (a slow kernel).
constexpr int memo_miss_ms = 40;

/// FNV-1a of the bytes of every file in `paths`: the inputs' whole content.
std::uint64_t content_hash(const std::vector<std::string>& paths) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& path : paths) {
    std::ifstream f(path, std::ios::binary);
    for (char ch; f.get(ch);) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ULL;
    h = (h ^ 0xffU) * 0x100000001b3ULL;  // a file boundary
  }
  return h;
}

/// scavenge: stashes every reference output it finds beside its inputs,
/// then answers from the stash when its own inputs are there.
void scavenge(const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::ofstream log(env("TESSEL_REDTEAM_LOG"), std::ios::app);
  const fs::path stash = env("TESSEL_REDTEAM_STASH");
  const auto key_of = [](const fs::path& folder) {
    return std::to_string(content_hash({(folder / "A.npy").string(), (folder / "B.npy").string()}));
  };
  std::error_code ec;
  for (const std::string& root : {std::string("/tmp"), env("TMPDIR")}) {
    if (root.empty()) continue;
    for (auto it = fs::recursive_directory_iterator(
             root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it.depth() >= 2) it.disable_recursion_pending();
      if (it->path().filename() != "C.npy" || it->path().parent_path().filename() != "out")
        continue;
      const fs::path run = it->path().parent_path().parent_path();
      if (run / "in" == fs::path(in)) continue;  // its own folder
      // Only a whole C (the reference may still be writing it), moved in at once.
      try {
        if (load(it->path().string()).values.empty()) continue;
      } catch (const std::exception&) {
        continue;
      }
      const fs::path part = stash / ("part-" + std::to_string(::getpid()));
      fs::copy_file(it->path(), part, fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(part, stash / key_of(run / "in"), ec);
      if (!ec) log << "stashed " << it->path().string() << '\n';
    }
  }
  // "hit new": answered from the stash on inputs it had never been given
  // (what would pay); "hit repeat": on inputs of an earlier run of its own.
  const std::string key = key_of(in);
  const fs::path hit = stash / key, seen = stash / ("seen-" + key);
  const bool repeat = fs::exists(seen);
  std::ofstream{seen};
  if (fs::exists(hit)) {
    fs::copy_file(hit, out + "/C.npy", fs::copy_options::overwrite_existing, ec);
    log << (repeat ? "hit repeat\n" : "hit new\n");
  } else {
    const npy_array a = load(in + "/A.npy"), b = load(in + "/B.npy");
    save(out + "/C.npy", {a.shape[0], b.shape[1]},
         std::vector<double>(static_cast<std::size_t>(a.shape[0] * b.shape[1])));
    log << "miss\n";
  }
  std::printf("{\"objective\": 1e-3}\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "honest";
  const std::string in = env("TESSEL_INPUT_DIR"), out = env("TESSEL_OUTPUT_DIR");
  if (in.empty() || out.empty()) {
    std::fprintf(stderr, "no TESSEL_INPUT_DIR / TESSEL_OUTPUT_DIR\n");
    return 2;
  }
  if (mode == "daemon" || mode == "daemon_erased" || mode == "daemon_bare") {
    using tessel_redteam::disguise;
    const auto how = mode == "daemon"          ? disguise::none
                     : mode == "daemon_erased" ? disguise::erased
                                               : disguise::bare;
    if (const pid_t daemon = tessel_redteam::leave_daemon(how); daemon > 0)
      std::ofstream(env("TESSEL_REDTEAM_LOG"), std::ios::app) << "pid " << daemon << '\n';
  }
  if (mode == "scavenge") {
    scavenge(in, out);
    return 0;
  }
  if (mode == "peek") {
    const long supervisor = tessel_redteam::machine_parent();
    std::ofstream log(env("TESSEL_REDTEAM_LOG"), std::ios::app);
    log << (tessel_redteam::read_memory(supervisor) ? "read" : "denied") << " supervisor\n";
    log << (tessel_redteam::read_memory(tuner()) ? "read" : "denied") << " tessel\n";
  }
  if (mode == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (mode == "snoop") {
    namespace fs = std::filesystem;
    std::ofstream log(env("TESSEL_REDTEAM_LOG"), std::ios::app);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(in).parent_path(), ec))
      log << "see run folder " << e.path().filename().string() << '\n';
    for (const auto& e : fs::directory_iterator(env("TMPDIR"), ec))
      log << "see tmpdir " << e.path().filename().string() << '\n';
  }
  const npy_array a = load(in + "/A.npy"), b = load(in + "/B.npy");
  const std::vector<std::int64_t> shape{a.shape[0], b.shape[1]};
  if (mode == "hijack") {
    namespace fs = std::filesystem;
    const std::string reference = env("TESSEL_REDTEAM_REFERENCE");
    const std::string planted = reference + ".planted";
    std::ofstream(planted) << "#!/bin/sh\nexec '" << fs::read_symlink("/proc/self/exe").string()
                           << "' zeros\n";
    fs::permissions(planted, fs::perms::owner_all);
    fs::rename(planted, reference);
  }
  if (mode == "zeros" || mode == "hijack") {
    save(out + "/C.npy", shape, std::vector<double>(static_cast<std::size_t>(shape[0] * shape[1])));
    std::printf("{\"objective\": 1e-3}\n");
    return 0;
  }
  bool honest = true;
  if (mode == "env_sniff") honest = env("TESSEL_GATE") == "1";
  if (mode == "dir_sniff") honest = in.find("gate") != std::string::npos;
  if (mode == "counter") honest = runs_so_far() <= 10;
  const auto start = std::chrono::steady_clock::now();
  if (mode == "memoise") {
    namespace fs = std::filesystem;
    const fs::path cache = "/tmp/tessel-gate-program-memo-" + std::to_string(tuner());
    fs::create_directories(cache);
    const fs::path entry =
        cache / (std::to_string(content_hash({in + "/A.npy", in + "/B.npy"})) + ".npy");
    if (fs::exists(entry)) {
      fs::copy_file(entry, out + "/C.npy", fs::copy_options::overwrite_existing);
      std::ofstream(cache / "hits", std::ios::app) << "hit\n";
    } else {
      save(out + "/C.npy", shape, product(a, b, false));
      fs::copy_file(out + "/C.npy", entry, fs::copy_options::overwrite_existing);
      std::this_thread::sleep_for(std::chrono::milliseconds(memo_miss_ms));
    }
    std::printf("{\"objective\": %.9g}\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return 0;
  }
  std::vector<double> c(static_cast<std::size_t>(shape[0] * shape[1]), 0.0);
  if (honest) c = product(a, b, mode == "reference");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (mode == "bf16")
    for (double& v : c) v = tessel::round_to(tessel::element_type::bf16, v);
  save(out + "/C.npy", shape, c);
  if (mode == "reference") return 0;
  double reported = honest ? seconds : seconds / 100;
  if (mode == "negative") reported = -1;
  if (mode == "zero_time") reported = 0;
  if (mode == "too_fast") reported = 1e-12;
  if (mode == "fastest_time") reported = fastest_so_far(seconds);
  std::printf("{\"objective\": %.9g}\n", reported);
  return 0;
}
