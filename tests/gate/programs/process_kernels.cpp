// process_kernels.cpp: host kernels that reach for processes
// (tests/gate/class17_test.cpp, docs/gate.md "Round thirteen"). Each
// computes y = 2 x after TESSEL_US microseconds of work a call (a spin on
// the thread's CPU clock: the slow kernel a cheat wants to hide), and logs "seccomp N" (its
// process's Seccomp line of /proc/self/status: 2 under a filter, 0 without) once per process:
//   pk_honest        the control
//   pk_threads       honest, with OpenMP (compiled with -fopenmp): two
//                    threads each spin half the time and compute half of y,
//                    so its process's CPU time is its work's
//   pk_fork_workers  on its first call forks one worker per CPU of the
//                    machine (8 at most), each widening its affinity to
//                    every CPU, sharing the tensors (the loader maps them
//                    shared); each call, on a word from the kernel, each
//                    worker does its share of the work and of y, and
//                    answers. Their CPU time is not the kernel process's,
//                    and their affinity not checked: the CPU rule saw none
//                    of their work, on CPUs the timing was not given. When fork fails
//                    it logs "fork failed: ERROR" and throws
//   pk_exec          on its first call runs a shell in its process's place
//                    (execv), which logs "exec ran"; when that fails it logs
//                    "exec failed: ERROR" and computes
//   pk_system        on its first call runs a shell command by system(3)
//                    (posix_spawn: its clone made with every signal
//                    blocked), which logs "system ran"; then computes
//   pk_ptrace        on its first call attaches to its parent (the timing
//                    parent, or the loader: as root, whatever the parent
//                    set) and reads a word of its memory, then detaches
//                    ("ptrace attached"), and reads it by process_vm_readv
//                    ("read parent's memory"), and through /proc/PID/mem
//                    ("read parent's memory through /proc"); a failure logs
//                    "ptrace failed: ERROR" or "process_vm_readv failed:
//                    ERROR". Then it computes
// Round fourteen (tests/gate/class18_test.cpp): kernels that hide a refused
// call from the loader's record, or slow the clock the loader times with.
// Each then computes as pk_honest does:
//   pk_own_handler   installs a SIGSYS handler of its own (one that answers
//                    EPERM, as the loader's does, recording nothing), then
//                    tries to fork; it logs "sigaction failed: ERROR" or
//                    "own handler", then "fork failed: ERROR" or "forked"
//   pk_ignore_sigsys the same with SIGSYS ignored (signal(SIGSYS, SIG_IGN))
//   pk_block_sigsys  blocks SIGSYS in its thread, then tries to fork
//   pk_bad_stack     (x86_64) a SIGSEGV handler on an alternate stack of
//                    its own, then fork made with its stack pointer at an
//                    unmapped address, so the kernel cannot deliver the
//                    filter's SIGSYS and forces a SIGSEGV instead, which its
//                    handler takes (restoring the stack, answering EPERM):
//                    logs "fork failed: ERROR" or "forked", and "SIGSEGV
//                    caught" when its handler ran; "sigaction failed: ERROR"
//                    when its handler could not be set (round seventeen,
//                    class20_test.cpp: the fork then ends its process)
//   pk_clock         as root (CAP_SYS_TIME): reads the system clock's tick
//                    (adjtimex), logging "clock read", and sets it to
//                    $TESSEL_REDTEAM_TICK (default: the tick it read, so
//                    nothing changes), logging "clock set"; an atexit
//                    handler puts the tick back. A tick of 9000 (of 10000)
//                    makes CLOCK_MONOTONIC, the loader's clock, run 10% slow
//                    on the whole machine; a failure logs "adjtimex failed:
//                    ERROR"
//   pk_last_of_run   works (logging "worked") only on the call of each run
//                    of calls (a sample, a warm-up: the loader poisons the
//                    outputs, y[0] NaN, before each; since round fourteen's
//                    fix each call of a run has outputs of its own, the
//                    first call's at the lowest address) as far into the
//                    run as the run before was long; on every other call it
//                    writes y[0] = 0 and returns. The timing's last call is
//                    right, every other call of a sample left undone
//   pk_last_by_stack the same, the run's length read where the loader's
//                    command holds it ({'g', calls} on the stack above the
//                    call): it works on the last call of every run
//   pk_skip_some_runs counts the runs of calls as pk_last_of_run does; in the
//                    4th to the 10th (samples 1 to 7 after the 3 runs of one
//                    call that warm up and calibrate at the default 1 ms
//                    sample) every call spins a tenth, a fifth or three
//                    tenths of TESSEL_US (so the samples never agree within
//                    the race's 2%: it takes all 8 of run_twice's samples),
//                    writes y[0] = 0 and returns, logging "skipped run" once
//                    per such run; every other call works. Only its last
//                    sample is right, and its median sample is fast
// Round seventeen (tests/gate/class20_test.cpp):
//   pk_skip_run_ends counts the runs and their calls as pk_last_of_run and
//                    pk_skip_some_runs do (by the outputs' poison and
//                    address: no trick of the stack, whose scan can meet
//                    stale bytes); in samples 2 to 7 (sample 1 tells it
//                    the runs' length) it skips the run's last call (y[0] =
//                    0, the rest left poisoned, after a spin of 0, 0.2 or
//                    0.4 of TESSEL_US by turns, so the samples never agree
//                    within the race's 2%), logging "skipped call K" (its
//                    K-th call in its process: the loader's number of it);
//                    every other call works. Until round seventeen a run's
//                    last call was never the drawn one
// Round fifteen (tests/gate/class19_test.cpp): kernels that use root's
// capabilities (the kernel's process kept all but CAP_SYS_PTRACE until this
// round), or uid 0's rights over root's own processes and files. Each then
// computes as pk_honest does:
//   pk_caps          logs its process's capability sets once: "caps INH PRM
//                    EFF BND AMB" (hex, in /proc/self/status's order), and
//                    its ids: "ids Uid: ... Gid: ... Groups: ..." (as there)
//   pk_realtime      (CAP_SYS_NICE) makes its process SCHED_FIFO ("realtime")
//                    and nice -20 ("nice -20"), so that no other load on its
//                    CPU preempts its timed calls; a failure logs
//                    "sched_setscheduler failed: ERROR" or "setpriority
//                    failed: ERROR"
//   pk_kill          sends SIGWINCH to itself (kill, raise: ignored), logging
//                    "signalled itself"; then (CAP_KILL, or uid 0 for a
//                    process of root's) SIGKILL to the process
//                    $TESSEL_REDTEAM_VICTIM (a pid of this machine's),
//                    logging "killed" or "kill failed: ERROR"
//   pk_limit         lowers its own RLIMIT_NOFILE's soft limit a little
//                    (prlimit64 of pid 0: "limited itself"), then the
//                    RLIMIT_NOFILE of $TESSEL_REDTEAM_VICTIM to 3 ("limited"
//                    or "prlimit failed: ERROR"): a process of the same uid
//                    may lower another's limits
//   pk_files         (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN; or uid 0 for a
//                    file root owns) appends a line to $TESSEL_REDTEAM_FILE
//                    ("wrote the file" or "open failed: ERROR"), makes it
//                    mode 0666 ("chmod the file" or "chmod failed: ERROR")
//                    and root's ("chown the file" or "chown failed: ERROR")
//   pk_renice        (uid 0 for a process of root's) makes the process
//                    $TESSEL_REDTEAM_VICTIM nice 19 ("reniced" or "setpriority
//                    failed: ERROR") and pins it to one CPU of its own set
//                    ("repinned" or "sched_setaffinity failed: ERROR"): a
//                    timing of another run's slowed, or moved onto a CPU it
//                    shares with load
// (The reference: redteam_kernels.cpp's twice_reference.)
#include <tessel/cpu_kernel.hpp>

#include "process_work.hpp"
#include "redteam_tricks.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

void pk_honest(const tessel::cpu::kernel_args& a) { work(a); }

void pk_threads(const tessel::cpu::kernel_args& a) {
  note_seccomp();
  const float* x = a.in(0).as<float>();
  float* y = a.out(0).as<float>();
  const std::int64_t n = a.in(0).elements();
#pragma omp parallel num_threads(2)
  {
#ifdef _OPENMP
#pragma omp for
#endif
    for (int part = 0; part < 2; ++part) share(x, y, n, part, 2);
  }
}

namespace {

/// pk_fork_workers' workers, one per CPU of the machine (8 at most): one
/// pipe each way per worker.
constexpr int most_workers = 8;
int workers = 0;
struct job {
  const float* x;
  float* y;
  std::int64_t n;
};
int to_worker[most_workers], from_worker[most_workers];

/// Widens the calling process's affinity to every CPU (the timing's pin is
/// its parent's: the CPU rule checks the kernel's own process only).
void every_cpu() {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
  ::sched_setaffinity(0, sizeof all, &all);
}

/// Starts the workers; false (the error logged) when a fork fails.
bool start_workers() {
  workers = std::clamp(static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), 1, most_workers);
  for (int w = 0; w < workers; ++w) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) return false;
    const pid_t pid = ::fork();
    if (pid < 0) {
      note("fork failed: " + error_text(errno));
      return false;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the kernel's process's end is theirs
      every_cpu();
      for (job j{}; ::read(down[0], &j, sizeof j) == static_cast<ssize_t>(sizeof j);) {
        share(j.x, j.y, j.n, w, workers);
        const char done = 'd';
        if (::write(up[1], &done, 1) != 1) break;
      }
      ::_exit(0);
    }
    to_worker[w] = down[1];
    from_worker[w] = up[0];
  }
  note("forked workers");
  return true;
}

}  // namespace

void pk_fork_workers(const tessel::cpu::kernel_args& a) {
  note_seccomp();
  static const bool started = start_workers();
  if (!started) throw std::runtime_error("cannot fork its workers");
  const job j{a.in(0).as<float>(), a.out(0).as<float>(), a.in(0).elements()};
  for (int w = 0; w < workers; ++w)
    if (::write(to_worker[w], &j, sizeof j) != static_cast<ssize_t>(sizeof j))
      throw std::runtime_error("a worker is gone");
  for (int w = 0; w < workers; ++w) {
    char done = 0;
    if (::read(from_worker[w], &done, 1) != 1) throw std::runtime_error("a worker is gone");
  }
}

void pk_exec(const tessel::cpu::kernel_args& a) {
  static const bool tried = [] {
    const char* argv[] = {"sh", "-c", "echo 'exec ran' >> \"$TESSEL_REDTEAM_LOG\"", nullptr};
    ::execv("/bin/sh", const_cast<char* const*>(argv));
    note("exec failed: " + error_text(errno));
    return true;
  }();
  (void)tried;
  work(a);
}

void pk_system(const tessel::cpu::kernel_args& a) {
  static const int ran = std::system("echo 'system ran' >> \"$TESSEL_REDTEAM_LOG\"");
  (void)ran;
  work(a);
}

void pk_ptrace(const tessel::cpu::kernel_args& a) {
  static const bool tried = [] {
    const pid_t parent = ::getppid();
    // A word every fork of the loader holds at the same address: environ.
    auto* const address = reinterpret_cast<void*>(&environ);
    if (::ptrace(PTRACE_ATTACH, parent, nullptr, nullptr) == 0) {
      int status = 0;
      ::waitpid(parent, &status, __WALL);
      errno = 0;
      const long word = ::ptrace(PTRACE_PEEKDATA, parent, address, nullptr);
      if (errno == 0 && word != 0) note("ptrace attached");
      ::ptrace(PTRACE_DETACH, parent, nullptr, nullptr);
    } else {
      note("ptrace failed: " + error_text(errno));
    }
    long word = 0;
    iovec local{&word, sizeof word}, remote{address, sizeof word};
    if (::process_vm_readv(parent, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof word))
      note("read parent's memory");
    else
      note("process_vm_readv failed: " + error_text(errno));
    if (tessel_redteam::read_memory(tessel_redteam::machine_parent()))
      note("read parent's memory through /proc");
    return true;
  }();
  (void)tried;
  work(a);
}

namespace {

/// Tries to fork (the child exits at once), logging what came of it.
void try_fork() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  if (pid < 0) {
    note("fork failed: " + error_text(errno));
    return;
  }
  ::waitpid(pid, nullptr, 0);
  note("forked");
}

/// A SIGSYS handler of the kernel's own: the refused call answers EPERM, as
/// under the loader's, and nothing is recorded.
void own_sigsys(int, siginfo_t*, void* context) {
#if defined(__x86_64__)
  static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
  static_cast<ucontext_t*>(context)->uc_mcontext.regs[0] = static_cast<unsigned long long>(-EPERM);
#else
  (void)context;
#endif
}

/// Sets SIGSYS's handler to `handler` (SIG_IGN, or own_sigsys), logging
/// whether it could.
void take_sigsys(void (*handler)(int, siginfo_t*, void*)) {
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  if (handler == nullptr) {
    action.sa_handler = SIG_IGN;
  } else {
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO;
  }
  if (::sigaction(SIGSYS, &action, nullptr) != 0)
    note("sigaction failed: " + error_text(errno));
  else
    note("own handler");
}

}  // namespace

void pk_own_handler(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    take_sigsys(own_sigsys);
    try_fork();
  });
  work(a);
}

void pk_ignore_sigsys(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    take_sigsys(nullptr);
    try_fork();
  });
  work(a);
}

void pk_block_sigsys(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    sigset_t sys;
    sigemptyset(&sys);
    sigaddset(&sys, SIGSYS);
    ::pthread_sigmask(SIG_BLOCK, &sys, nullptr);
    try_fork();
  });
  work(a);
}

namespace {

/// pk_bad_stack's stack pointer before its fork, and its SIGSEGV handler,
/// which puts it back and answers EPERM.
char* saved_stack = nullptr;
volatile std::sig_atomic_t segv_caught = 0;
void stack_back(int, siginfo_t*, void* context) {
#if defined(__x86_64__)
  auto& regs = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  regs[REG_RSP] = reinterpret_cast<greg_t>(saved_stack);
  regs[REG_RAX] = -EPERM;
#else
  (void)context;
#endif
  segv_caught = 1;
}

}  // namespace

void pk_bad_stack(const tessel::cpu::kernel_args& a) {
#if defined(__x86_64__)
  on_first_call([] {
    static char alternate[1 << 16];
    stack_t stack{};
    stack.ss_sp = alternate;
    stack.ss_size = sizeof alternate;
    ::sigaltstack(&stack, nullptr);
    struct sigaction action {};
    sigemptyset(&action.sa_mask);
    action.sa_sigaction = stack_back;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    if (::sigaction(SIGSEGV, &action, nullptr) != 0) note("sigaction failed: " + error_text(errno));
    long result = 0;
    asm volatile(
        "mov %%rsp, %[saved]\n\t"
        "mov $0x10, %%rsp\n\t"
        "syscall\n\t"
        "mov %[saved], %%rsp\n\t"
        : "=a"(result), [saved] "=m"(saved_stack)
        : "0"(static_cast<long>(SYS_fork))
        : "rcx", "r11", "memory");
    if (result == 0) ::_exit(0);  // a child, with the filter off
    if (result < 0) note("fork failed: " + error_text(static_cast<int>(-result)));
    if (result > 0) {
      ::waitpid(static_cast<pid_t>(result), nullptr, 0);
      note("forked");
    }
    if (segv_caught != 0) note("SIGSEGV caught");
  });
#endif
  work(a);
}

namespace {

long clock_tick = 0;  ///< the tick pk_clock read, put back at exit

}  // namespace

void pk_clock(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    timex read{};
    if (::adjtimex(&read) < 0) {
      note("adjtimex failed: " + error_text(errno));
      return;
    }
    note("clock read");
    clock_tick = read.tick;
    const char* wanted = std::getenv("TESSEL_REDTEAM_TICK");  // NOLINT(concurrency-mt-unsafe)
    timex set{};
    set.modes = ADJ_TICK;
    set.tick = wanted != nullptr ? std::atol(wanted) : read.tick;
    if (::adjtimex(&set) < 0) {
      note("adjtimex failed: " + error_text(errno));
      return;
    }
    note("clock set");
    std::atexit([] {
      timex back{};
      back.modes = ADJ_TICK;
      back.tick = clock_tick;
      ::adjtimex(&back);
    });
  });
  work(a);
}

namespace {

/// pk_last_of_run's count of calls: in the run of calls going on, and in
/// the run before it.
std::int64_t call_in_run = 0, previous_run = 0;

/// Whether the call whose first output is `y` starts a run of calls: the
/// loader poisons the outputs before each run (y[0] NaN), every call's
/// outputs of the run when each call has its own, at rising addresses; so a
/// run starts at poisoned outputs not past the call before's.
bool run_starts(const float* y) {
  static const float* before = nullptr;
  const bool starts = std::isnan(y[0]) && y <= before;
  before = y;
  return starts;
}

}  // namespace

void pk_last_of_run(const tessel::cpu::kernel_args& a) {
  float* y = a.out(0).as<float>();
  if (run_starts(y)) {  // a new run of calls (a sample, a warm-up)
    previous_run = call_in_run;
    call_in_run = 0;
  }
  const bool last = call_in_run++ >= previous_run - 1;  // as long as the run before
  if (last) {
    note("worked");
    work(a);
  } else {
    y[0] = 0;  // marks the run as going on
  }
}

namespace {

/// The length of the run of calls going on, as the loader's command to its
/// kernel's process holds it ({'g', calls}, on the stack of the loader's
/// serve(), above this call's frames); 0 when not found.
std::uint64_t run_length_on_stack() {
  char here = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(&here) + 7) & ~std::uintptr_t{7});
  for (int i = 0; i < 8192; ++i, p += 8) {
    std::uint64_t calls = 0;
    std::memcpy(&calls, p + 8, sizeof calls);
    if (p[0] == 'g' && calls > 0 && calls <= 1000000) return calls;
  }
  return 0;
}

}  // namespace

void pk_last_by_stack(const tessel::cpu::kernel_args& a) {
  float* y = a.out(0).as<float>();
  if (run_starts(y)) call_in_run = 0;  // a new run of calls
  const std::uint64_t length = run_length_on_stack();
  if (length == 0 || static_cast<std::uint64_t>(++call_in_run) >= length) {
    note("worked");
    work(a);
  } else {
    y[0] = 0;
  }
}

namespace {

/// pk_skip_some_runs' and pk_skip_run_ends' runs: 3 warm-up runs of one call (the default warm-up
/// of 2 calls, the second of which starts the calibration, and its second
/// run: a 200 us call lasts an eighth of a 1 ms sample), then 7 skipped
/// samples; run_twice races at most 8.
constexpr std::int64_t warm_runs = 3, skipped_samples = 7;
std::int64_t runs = 0;

}  // namespace

void pk_skip_some_runs(const tessel::cpu::kernel_args& a) {
  float* y = a.out(0).as<float>();
  const bool starts = run_starts(y) || runs == 0;  // the first call starts the first run
  runs += starts ? 1 : 0;
  if (runs <= warm_runs || runs > warm_runs + skipped_samples) {
    work(a);
    return;
  }
  if (starts) note("skipped run");
  spin(static_cast<double>(TESSEL_US) / 10 * static_cast<double>(1 + runs % 3));
  y[0] = 0;  // the rest left poisoned; marks the run as going on (run_starts)
}

void pk_skip_run_ends(const tessel::cpu::kernel_args& a) {
  static std::uint64_t calls = 0;
  ++calls;
  float* y = a.out(0).as<float>();
  if (run_starts(y) || runs == 0) {  // the first call starts the first run
    ++runs;
    previous_run = call_in_run;
    call_in_run = 0;
  }
  const bool last = call_in_run++ == previous_run - 1;  // as long as the run before
  if (!last || runs <= warm_runs + 1 || runs > warm_runs + skipped_samples) {
    work(a);
    return;
  }
  note("skipped call " + std::to_string(calls));
  spin(static_cast<double>(TESSEL_US) / 5 * static_cast<double>(runs % 3));
  y[0] = 0;  // the rest left poisoned; marks the run as going on (run_starts)
}

namespace {

/// Logs `done` when the call worked, else "`call` failed: ERROR" (errno).
void logged(bool worked, const std::string& done, const std::string& call) {
  note(worked ? done : call + " failed: " + error_text(errno));
}

/// $TESSEL_REDTEAM_VICTIM's pid (0: not set).
pid_t victim() {
  const char* pid = std::getenv("TESSEL_REDTEAM_VICTIM");  // NOLINT(concurrency-mt-unsafe)
  return pid != nullptr ? static_cast<pid_t>(std::atol(pid)) : 0;
}

}  // namespace

void pk_caps(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    std::ifstream status("/proc/self/status");
    std::string sets = "caps", ids = "ids";
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Cap", 0) == 0)
        sets += " " + line.substr(line.find_first_not_of(" \t", 7));
      else if (line.rfind("Uid:", 0) == 0 || line.rfind("Gid:", 0) == 0 ||
               line.rfind("Groups:", 0) == 0) {
        std::replace(line.begin(), line.end(), '\t', ' ');
        ids += " " + line;
      }
    note(sets);
    note(ids);
  });
  work(a);
}

void pk_realtime(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    const sched_param first{1};
    logged(::sched_setscheduler(0, SCHED_FIFO, &first) == 0, "realtime", "sched_setscheduler");
    logged(::setpriority(PRIO_PROCESS, 0, -20) == 0, "nice -20", "setpriority");
  });
  work(a);
}

void pk_kill(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    if (::kill(::getpid(), SIGWINCH) == 0 && ::raise(SIGWINCH) == 0) note("signalled itself");
    if (victim() != 0) logged(::kill(victim(), SIGKILL) == 0, "killed", "kill");
  });
  work(a);
}

void pk_limit(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    rlimit files{};
    if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur > 64) {
      --files.rlim_cur;
      if (::setrlimit(RLIMIT_NOFILE, &files) == 0) note("limited itself");
    }
    const rlimit three{3, 3};
    if (victim() != 0)
      logged(::prlimit(victim(), RLIMIT_NOFILE, &three, nullptr) == 0, "limited", "prlimit");
  });
  work(a);
}

void pk_files(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    const char* file = std::getenv("TESSEL_REDTEAM_FILE");  // NOLINT(concurrency-mt-unsafe)
    if (file == nullptr) return;
    const int fd = ::open(file, O_WRONLY | O_APPEND | O_CLOEXEC);
    logged(fd >= 0 && ::write(fd, "kernel\n", 7) == 7, "wrote the file", "open");
    if (fd >= 0) ::close(fd);
    logged(::chmod(file, 0666) == 0, "chmod the file", "chmod");
    logged(::chown(file, 0, 0) == 0, "chown the file", "chown");
  });
  work(a);
}

void pk_renice(const tessel::cpu::kernel_args& a) {
  on_first_call([] {
    if (victim() == 0) return;
    logged(::setpriority(PRIO_PROCESS, static_cast<id_t>(victim()), 19) == 0, "reniced",
           "setpriority");
    cpu_set_t own, one;
    CPU_ZERO(&one);
    if (::sched_getaffinity(0, sizeof own, &own) == 0)
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &own)) {
          CPU_SET(cpu, &one);  // the first of its own
          break;
        }
    logged(::sched_setaffinity(victim(), sizeof one, &one) == 0, "repinned", "sched_setaffinity");
  });
  work(a);
}
