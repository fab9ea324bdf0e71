// forge_kernels.cpp: host kernels that forge the cpu loader's answer
// (tests/gate/class16_test.cpp, docs/gate.md "Round twelve: the answer").
// Each computes y = 2 x and spins TESSEL_US microseconds a call (the slow
// kernel a cheat wants to hide); in a timing process each one counts its
// calls and makes the answer the loader would make for them, with five
// samples of 20 us (a tenth of its time, above any floor), one call a
// sample:
//   fg_honest   the control
//   fg_exit     on its fourth call (two warm-up calls, two samples),
//               after computing it right: writes the answer on every pipe
//               its ancestors hold (/proc/PID/fd, opened for writing),
//               kills its parent when that is a loader (the timing parent;
//               its own death signal cleared first), writes the answer on
//               every pipe it holds and its outputs' .npy files (the
//               loader's --out paths), and exits at once (_exit)
//   fg_second   honest; from an atexit handler, a second answer after the
//               loader's, everywhere fg_exit writes it
//   fg_redirect honest; on its first call takes the answer channel (the
//               one pipe it holds past stderr, open for writing) for itself
//               (dup) and puts /dev/null in its place (dup2), so the
//               loader's answer is lost; its atexit handler writes the
//               forged answer on the taken channel
//   fg_drain    in a timing process returns at once: a copy of its input
//               goes to a queue that a thread of its own works through (the
//               spin and y = 2 x, into the call's output), and an atexit
//               handler waits until the queue is empty, so the last call's
//               output is complete when the process ends, not when the
//               call returned
//   fg_fork_crash  forks a process that sleeps 30 s holding every file it
//               inherited (the handoff's pipes among them), then crashes
//               (SIGSEGV): not a forger, the case the loader's pidfd is for
// (The reference: redteam_kernels.cpp's twice_reference.)
// Every forged line goes to $TESSEL_REDTEAM_LOG ("forged on fd N",
// "forged on /proc/PID/fd/N", "killed its parent", "parent's pipes opened
// N"), and every call logs "computed".
#include <tessel/cpu_kernel.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "redteam_tricks.hpp"

#ifndef TESSEL_US
#define TESSEL_US 200
#endif

namespace {

using tessel_redteam::note;

/// The honest work: spin, then y = 2 x over n elements.
void twice_after_spin(const float* x, float* y, std::int64_t n) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         TESSEL_US * 1e-6) {
  }
  for (std::int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
}

void work(const tessel::cpu::kernel_args& a) {
  twice_after_spin(a.in(0).as<float>(), a.out(0).as<float>(), a.in(0).elements());
  note("computed");
}

/// The NUL-separated words of /proc/PID/cmdline.
std::vector<std::string> arguments_of(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/cmdline", std::ios::binary);
  std::vector<std::string> words;
  for (std::string word; std::getline(f, word, '\0');) words.push_back(word);
  return words;
}

/// Whether a process runs the loader and times: `PROGRAM LIBRARY run|time
/// ...`. The program is not found by its name: the cpu backend execs a
/// sealed copy of the loader, whose path is /proc/PID/fd/N.
bool is_loader(const std::string& pid, bool timing) {
  const auto words = arguments_of(pid);
  return words.size() > 2 && (words[2] == "time" || (!timing && words[2] == "run"));
}

/// The parent of process `pid` ("" when it cannot be read).
std::string parent_of(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string line;
  std::getline(f, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::string state, ppid;
  std::istringstream(line.substr(close + 2)) >> state >> ppid;
  return ppid;
}

/// Whether this process runs the kernel in a timing: it is the loader, or
/// the loader's child.
///
/// Parents are read from /proc ("self"'s stat): in a run's PID namespace
/// getppid() is the namespace's number, /proc the machine's.
bool in_timing() { return is_loader("self", true) || is_loader(parent_of("self"), true); }

std::uint64_t calls = 0;  ///< this process's calls (the loader's answer counts them)

std::string forged_answer() {
  return "{\"status\": \"ok\", \"samples_s\": [2e-05, 2e-05, 2e-05, 2e-05, 2e-05], "
         "\"stopped\": \"max_repeats\", \"iters\": 1, \"calls\": " +
         std::to_string(calls) + "}\n";
}

/// Writes `line` on every pipe this process holds open for writing past
/// stderr.
void forge_own(const std::string& line) {
  std::fflush(nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a pipe may have no reader
  for (int fd = 3; fd < 1024; ++fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
    if ((::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY) continue;
    if (::write(fd, line.data(), line.size()) > 0) note("forged on fd " + std::to_string(fd));
  }
}

/// Writes `line` on every pipe this process's ancestors hold (opened for
/// writing through /proc/PID/fd).
void forge_above(const std::string& line) {
  std::signal(SIGPIPE, SIG_IGN);
  std::string pid = parent_of("self");
  for (int up = 0; up < 4 && !pid.empty() && pid != "0" && pid != "1"; ++up) {
    int opened = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator d("/proc/" + pid + "/fd", ec), end; !ec && d != end;
         d.increment(ec)) {
      std::error_code link_ec;
      const auto target = std::filesystem::read_symlink(d->path(), link_ec).string();
      if (link_ec || target.rfind("pipe:", 0) != 0) continue;
      const int fd = ::open(d->path().c_str(), O_WRONLY | O_NONBLOCK);
      if (fd < 0) continue;
      ++opened;
      if (::write(fd, line.data(), line.size()) > 0) note("forged on " + d->path().string());
      ::close(fd);
    }
    if (up == 0) note("parent's pipes opened " + std::to_string(opened));
    pid = parent_of(pid);
  }
}

/// Writes `y` (n floats) as the loader writes an output's .npy file, to
/// every --out path of this process's command line (the loader's), since
/// the loader that would have written it does not live to.
void write_outputs(const float* y, std::int64_t n) {
  const auto words = arguments_of("self");
  for (std::size_t i = 0; i + 3 < words.size(); ++i) {
    if (words[i] != "--out") continue;
    std::string header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream f(words[i + 3], std::ios::binary);
    const char magic[10] = {'\x93',
                            'N',
                            'U',
                            'M',
                            'P',
                            'Y',
                            1,
                            0,
                            static_cast<char>(header.size() & 0xff),
                            static_cast<char>(header.size() >> 8)};
    f.write(magic, 10);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(reinterpret_cast<const char*>(y), static_cast<std::streamsize>(n * 4));
    note("wrote " + words[i + 3]);
  }
}

void forge_at_exit() {
  forge_own(forged_answer());
  forge_above(forged_answer());
}

int taken_channel = -1;  ///< fg_redirect's: the answer channel, taken

void write_taken() {
  const std::string line = forged_answer();
  if (taken_channel >= 0 && ::write(taken_channel, line.data(), line.size()) > 0)
    note("forged on the taken channel");
}

}  // namespace

void fg_honest(const tessel::cpu::kernel_args& a) { work(a); }

void fg_exit(const tessel::cpu::kernel_args& a) {
  static const bool timing = in_timing();
  ++calls;
  work(a);
  if (!timing || calls < 4) return;
  forge_above(forged_answer());
  const std::string parent = parent_of("self");  // kill() below takes the namespace's number
  ::prctl(PR_SET_PDEATHSIG, 0);                  // it outlives a parent that asked otherwise
  if (is_loader(parent, true) && ::kill(::getppid(), SIGKILL) == 0) note("killed its parent");
  forge_own(forged_answer());
  write_outputs(a.out(0).as<float>(), a.out(0).elements());
  ::_exit(0);
}

void fg_second(const tessel::cpu::kernel_args& a) {
  static const bool registered = in_timing() && std::atexit(forge_at_exit) == 0;
  (void)registered;
  ++calls;
  work(a);
}

void fg_redirect(const tessel::cpu::kernel_args& a) {
  static const bool taken = [] {
    if (!in_timing()) return false;
    for (int fd = 3; fd < 1024; ++fd) {
      struct stat st {};
      if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
      if ((::fcntl(fd, F_GETFL) & O_ACCMODE) != O_WRONLY) continue;
      taken_channel = ::dup(fd);
      const int null = ::open("/dev/null", O_WRONLY);
      if (taken_channel < 0 || null < 0 || ::dup2(null, fd) < 0) return false;
      ::close(null);
      note("took fd " + std::to_string(fd));
      return std::atexit(write_taken) == 0;
    }
    return false;
  }();
  (void)taken;
  ++calls;
  work(a);
}

namespace {

/// fg_drain's queue of calls not yet computed, and its worker.
struct drain_queue {
  struct call {
    std::vector<float> x;
    float* y;
  };
  std::mutex m;
  std::condition_variable changed;
  std::deque<call> calls;
  std::size_t outstanding = 0;

  void push(const float* x, float* y, std::int64_t n) {
    const std::lock_guard<std::mutex> lock(m);
    calls.push_back({std::vector<float>(x, x + n), y});
    ++outstanding;
    changed.notify_all();
  }
  [[noreturn]] void work_through() {
    for (;;) {
      std::unique_lock<std::mutex> lock(m);
      changed.wait(lock, [this] { return !calls.empty(); });
      call c = std::move(calls.front());
      calls.pop_front();
      lock.unlock();
      twice_after_spin(c.x.data(), c.y, static_cast<std::int64_t>(c.x.size()));
      lock.lock();
      --outstanding;
      changed.notify_all();
    }
  }
  void wait_empty() {
    std::unique_lock<std::mutex> lock(m);
    changed.wait(lock, [this] { return outstanding == 0; });
    note("drained at exit");
  }
};

drain_queue* queue = nullptr;  ///< never destroyed: its thread outlives main

void drain_at_exit() { queue->wait_empty(); }

}  // namespace

void fg_drain(const tessel::cpu::kernel_args& a) {
  static const bool timing = in_timing();
  if (!timing) {
    work(a);
    return;
  }
  if (queue == nullptr) {
    queue = new drain_queue;
    std::thread([] { queue->work_through(); }).detach();
    std::atexit(drain_at_exit);
  }
  queue->push(a.in(0).as<float>(), a.out(0).as<float>(), a.in(0).elements());
}

void fg_fork_crash(const tessel::cpu::kernel_args& a) {
  if (::fork() == 0) {
    ::sleep(30);
    ::_exit(0);
  }
  work(a);
  std::raise(SIGSEGV);
}
