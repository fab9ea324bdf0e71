// process.cpp: fork/exec with pipes, a poll loop and process-group kills
// (POSIX). Each run has a supervisor process of its own: tessel forks it, it
// forks and waits for the command, and when the command has exited it kills
// the command's group and, on Linux, where it is a child subreaper, every
// process left among its own children: all that the run left behind, even
// after it left the group (setsid, double fork). The supervisor and the
// command's child side call only async-signal-safe functions: everything
// they need (path, argv, envp, the cpu set) is built before tessel forks.
#include "command/process.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <limits>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

namespace tessel::detail {
namespace {

using clock = std::chrono::steady_clock;

/// A file descriptor closed on destruction.
class fd_guard {
 public:
  fd_guard() = default;
  explicit fd_guard(int fd) : fd_(fd) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  fd_guard& operator=(fd_guard&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~fd_guard() { reset(); }
  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool open() const noexcept { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// A pipe whose ends are close-on-exec, so a concurrently forked child of
/// another evaluation never inherits them (it would hold our EOF hostage).
bool make_pipe(fd_guard& read_end, fd_guard& write_end) {
  std::array<int, 2> fds{};
#if defined(__linux__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__)
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) return false;
#else
  if (::pipe(fds.data()) != 0) return false;
  ::fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  ::fcntl(fds[1], F_SETFD, FD_CLOEXEC);
#endif
  read_end = fd_guard(fds[0]);
  write_end = fd_guard(fds[1]);
  return true;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

/// Appends `data` to `buffer`, keeping at most `limit` bytes (the tail).
void append_tail(std::string& buffer, const char* data, std::size_t size, std::size_t limit,
                 bool& truncated) {
  buffer.append(data, size);
  if (buffer.size() > 2 * limit + 65536) {
    buffer.erase(0, buffer.size() - limit);
    truncated = true;
  }
}

void trim_tail(std::string& buffer, std::size_t limit, bool& truncated) {
  if (buffer.size() > limit) {
    buffer.erase(0, buffer.size() - limit);
    truncated = true;
  }
}

/// Whether `pid` has exited, without reaping it: the zombie keeps its
/// process-group id reserved, so killing the group afterwards is safe.
bool has_exited(pid_t pid, bool block = false) {
  siginfo_t info{};
  const int options = WEXITED | WNOWAIT | (block ? 0 : WNOHANG);
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, options) != 0)
    if (errno != EINTR) return true;  // not our child any more: nothing to wait for
  return info.si_pid == pid;
}

/// A record on the report pipe: the supervisor writes the command's pid once
/// it has forked it, or errno when it could not; the command writes errno
/// when chdir or exec fails. Each is one write of 8 bytes (atomic on a pipe),
/// so the two writers' records never mix. The pipe is close-on-exec: its EOF
/// means the command's exec succeeded (or it never will).
struct report_record {
  int kind = 0;
  int value = 0;
};
constexpr int report_pid = 1, report_exec_error = 2, report_fork_error = 3;

void send_report(int fd, int kind, int value) {
  const report_record r{kind, value};
  (void)!::write(fd, &r, sizeof r);
}

/// What the supervisor and the command need, built before fork and only
/// read after it.
struct launch {
  int in, out, err, report;  ///< the child ends of the pipes
  int life;                  ///< held by the supervisor until it exits
  const char* directory;     ///< nullptr: the caller's
  const char* path;
  char* const* argv;
  char* const* envp;
  const void* cpus;  ///< a cpu_set_t, or nullptr
};

/// The command's side: wire the pipes, move to a new process group, exec.
/// Reports errno through the report pipe. It runs vforked from the
/// supervisor, in its memory: its signals stay blocked (as the supervisor
/// blocks them) until just before exec, so no handler of tessel's runs here.
[[noreturn]] void exec_child(const launch& l) {
  const int in = l.in, out = l.out, err = l.err, report = l.report;
  const char* directory = l.directory;
  const void* cpus = l.cpus;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::setpgid(0, 0);
#ifdef __linux__
  if (cpus != nullptr)
    (void)::sched_setaffinity(0, sizeof(cpu_set_t), static_cast<const cpu_set_t*>(cpus));
#else
  (void)cpus;
#endif
  const std::array<int, 3> from{in, out, err};
  for (int target = 0; target < 3; ++target) {
    const int fd = from[static_cast<std::size_t>(target)];
    if (fd == target)
      ::fcntl(fd, F_SETFD, 0);  // dup2 onto itself would keep close-on-exec
    else
      ::dup2(fd, target);
  }
  if (directory != nullptr && ::chdir(directory) != 0) {
    send_report(report, report_exec_error, errno);
    ::_exit(127);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(l.path, l.argv, l.envp);
  send_report(report, report_exec_error, errno);
  ::_exit(127);
}

/// NUL-terminated pointers into `strings` (which must outlive them).
std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string path_variable_of(const std::vector<std::string>& environment) {
  for (const auto& e : environment)
    if (e.rfind("PATH=", 0) == 0) return e.substr(5);
  return "/usr/local/bin:/usr/bin:/bin";
}

/// Blocks SIGPIPE in the calling thread while it writes to a child that may
/// have closed its stdin; a SIGPIPE raised meanwhile is consumed, not delivered.
class sigpipe_guard {
 public:
  sigpipe_guard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;
  ~sigpipe_guard() {
    if (broke_ && !was_pending_) {
      const timespec zero{0, 0};
      while (::sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  void broke() noexcept { broke_ = true; }

 private:
  sigset_t pipe_{}, old_{};
  bool was_pending_ = false, broke_ = false;
};

/// The poll loop's state: the three pipes and the kill schedule.
struct session {
  const process_request& request;
  process_result& result;
  pid_t pid;    ///< the supervisor
  pid_t group;  ///< the command's process group (its pid); 0: unknown
  fd_guard& in;
  fd_guard& out;
  fd_guard& err;
  fd_guard& life;  ///< EOF: the supervisor is exiting
  sigpipe_guard& sigpipe;
  std::size_t written = 0;
  bool exited = false;
  clock::time_point exited_at{};
  bool term_sent = false, kill_sent = false;
  clock::time_point kill_at{};

  void write_input() {
    while (written < request.input.size()) {
      const auto n =
          ::write(in.get(), request.input.data() + written, request.input.size() - written);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        if (n < 0 && errno == EPIPE) sigpipe.broke();
        break;  // the program closed its stdin: it does not want the rest
      }
    }
    in.reset();
  }

  void read_from(fd_guard& fd, std::string& buffer, std::size_t limit, bool& truncated) {
    std::array<char, 65536> chunk{};
    for (;;) {
      const auto n = ::read(fd.get(), chunk.data(), chunk.size());
      if (n > 0) {
        append_tail(buffer, chunk.data(), static_cast<std::size_t>(n), limit, truncated);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        fd.reset();  // EOF or error
        return;
      }
    }
  }

  /// Signals the command's group while the run goes on: once the
  /// supervisor has exited it has reaped the command, and the group id may
  /// be another's.
  void signal_group(int sig) const {
    if (group > 0 && !has_exited(pid)) ::kill(-group, sig);
  }

  /// Sends the kills that are due; returns the milliseconds until the next one.
  int schedule(clock::time_point now, clock::time_point deadline, bool has_deadline) {
    if (has_deadline && !term_sent && now >= deadline) {
      result.timed_out = true;
      term_sent = true;
      signal_group(SIGTERM);
      kill_at = now + std::chrono::duration_cast<clock::duration>(
                          std::chrono::duration<double>(request.kill_grace_s));
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      kill_sent = true;
      signal_group(SIGKILL);
    }
    auto until = [&](clock::time_point t) {
      return static_cast<int>(std::max<long long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1));
    };
    if (has_deadline && !term_sent) return until(deadline);
    if (term_sent && !kill_sent) return until(kill_at);
    return -1;
  }

  void loop() {
    const auto start = clock::now();
    const bool has_deadline = request.timeout_s > 0;
    const auto deadline = start + std::chrono::duration_cast<clock::duration>(
                                      std::chrono::duration<double>(request.timeout_s));
    // The supervisor exits after it killed what the command left running;
    // then the pipes get at most this long to reach EOF (a process that
    // escaped it, outside Linux, may hold them).
    constexpr auto drain_limit = std::chrono::milliseconds(1000);
    for (;;) {
      if (!exited && has_exited(pid)) {
        exited = true;
        exited_at = clock::now();
      }
      const bool pipes_open = out.open() || err.open();
      if (exited && (!pipes_open || clock::now() - exited_at > drain_limit)) break;

      std::array<pollfd, 4> fds{};
      nfds_t n = 0;
      const auto watch = [&](const fd_guard& fd, short events) {
        if (fd.open()) fds[n++] = pollfd{fd.get(), events, 0};
      };
      watch(in, POLLOUT);
      watch(out, POLLIN);
      watch(err, POLLIN);
      watch(life, POLLIN);

      int wait_ms = schedule(clock::now(), deadline, has_deadline);
      // The life pipe wakes the loop when the supervisor exits. Once it is
      // closed, wake now and then to notice the exit (the pipes may be held
      // open by a process that escaped); once they are closed, closely.
      if (!life.open()) {
        const int tick = pipes_open ? 50 : 2;
        wait_ms = wait_ms < 0 ? tick : std::min(wait_ms, tick);
      }
      const int ready = ::poll(fds.data(), n, wait_ms);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) continue;
      for (nfds_t i = 0; i < n; ++i) {
        if (fds[i].revents == 0) continue;
        if (fds[i].fd == life.get()) {
          // Nobody writes to it: EOF. The supervisor has closed its files,
          // so it is exiting, and the wait for its end is short.
          life.reset();
          if (!exited && has_exited(pid, true)) {
            exited = true;
            exited_at = clock::now();
          }
        } else if (fds[i].fd == in.get()) {
          if ((fds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
            in.reset();
          else
            write_input();
        } else if (fds[i].fd == out.get()) {
          read_from(out, result.output, request.max_output_bytes, result.output_truncated);
        } else if (fds[i].fd == err.get()) {
          bool ignored = false;
          read_from(err, result.errors, request.max_error_bytes, ignored);
        }
      }
    }
  }
};

std::string error_text(int e) { return std::strerror(e); }

/// Writes `n` (>= 0) in decimal at `at`; returns the end.
char* put_decimal(char* at, long n) {
  std::array<char, 24> digits{};
  std::size_t k = 0;
  do {
    digits[k++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0);
  while (k > 0) *at++ = digits[--k];
  return at;
}

char* put_text(char* at, const char* text) {
  while (*text != '\0') *at++ = *text++;
  return at;
}

/// Closes the descriptors [first, last] (those that are open).
void close_between(int first, int last) {
  if (first > last) return;
#if defined(__linux__) && defined(SYS_close_range)
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), static_cast<unsigned>(last), 0U) ==
      0)
    return;
#endif
  rlimit limit{};
  const long most = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (1U << 16)
                        ? static_cast<long>(limit.rlim_cur)
                        : (1L << 16);
  for (long fd = first; fd <= last && fd < most; ++fd) ::close(static_cast<int>(fd));
}

/// Closes every descriptor of the supervisor but stdin, stdout, stderr and
/// the run's own pipe ends. It never execs, so close-on-exec would not close
/// them: it would hold the embedding program's files, and the pipe ends of
/// another run started at the same time (that run's EOF held until this
/// one ends).
void close_all_but(const launch& l) {
  std::array<int, 8> keep{0, 1, 2, l.in, l.out, l.err, l.report, l.life};
  std::sort(keep.begin(), keep.end());
  int from = 0;
  for (const int fd : keep) {
    close_between(from, fd - 1);
    from = std::max(from, fd + 1);
  }
  close_between(from, std::numeric_limits<int>::max());
}

#ifdef __linux__
/// SIGKILLs every process listed in the file at `path` (decimal pids
/// separated by spaces: /proc/self/task/TID/children); returns how many were
/// signalled, -1 when the file cannot be opened.
int kill_listed(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int killed = 0;
  long pid = -1;
  const auto flush = [&] {
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++killed;
    pid = -1;
  };
  std::array<char, 4096> chunk{};
  for (;;) {
    const auto n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      const char c = chunk[static_cast<std::size_t>(i)];
      if (c >= '0' && c <= '9')
        pid = pid < 0 ? c - '0' : (pid < (1L << 40) ? pid * 10 + (c - '0') : pid);
      else
        flush();
    }
  }
  flush();
  ::close(fd);
  return killed;
}

/// Where the kernel has no children files: SIGKILLs every process whose
/// /proc/PID/stat names `self` as its parent; -1 when /proc cannot be read.
int kill_by_scan(pid_t self) {
  const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -1;
  int killed = 0;
  alignas(8) std::array<char, 8192> entries{};
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, entries.data(), entries.size());
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name
      unsigned short length = 0;
      std::memcpy(&length, entries.data() + at + 16, sizeof length);
      const char* name = entries.data() + at + 19;
      at += length;
      long pid = 0;
      for (const char* c = name; pid >= 0 && *c != '\0'; ++c)
        pid = (*c >= '0' && *c <= '9' && pid < (1L << 40)) ? pid * 10 + (*c - '0') : -1;
      if (pid <= 0) continue;  // not a process
      std::array<char, 64> path{};
      *put_text(put_decimal(put_text(path.data(), "/proc/"), pid), "/stat") = '\0';
      const int fd = ::open(path.data(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      std::array<char, 512> stat{};
      const auto got = ::read(fd, stat.data(), stat.size() - 1);
      ::close(fd);
      if (got <= 0) continue;
      // "PID (NAME) STATE PPID ...": the name may hold ')', so the last one
      const char* end = nullptr;
      for (ssize_t i = 0; i < got; ++i)
        if (stat[static_cast<std::size_t>(i)] == ')') end = stat.data() + i;
      if (end == nullptr || end + 4 >= stat.data() + got) continue;
      long parent = 0;
      for (const char* c = end + 4; *c >= '0' && *c <= '9'; ++c) parent = parent * 10 + (*c - '0');
      if (parent == self && ::kill(static_cast<pid_t>(pid), SIGKILL) == 0) ++killed;
    }
  }
  ::close(dir);
  return killed;
}

/// Kills and reaps every process left among the supervisor's children: all
/// that was orphaned inside the run was reparented to it (it is a child
/// subreaper), marker or not, group or not. Each round's kills hand the
/// victims' children to the supervisor; rounds go on until it has no child
/// left. Where it cannot list its children they are left to init.
void kill_the_rest() {
  const pid_t self = ::getpid();
  std::array<char, 64> path{};
  *put_text(put_decimal(put_text(path.data(), "/proc/self/task/"), self), "/children") = '\0';
  for (int missed = 0; missed < 1000;) {
    int killed = kill_listed(path.data());
    if (killed < 0) killed = kill_by_scan(self);
    if (killed < 0) return;
    const pid_t reaped = ::waitpid(-1, nullptr, killed > 0 ? 0 : WNOHANG);
    if (reaped < 0 && errno == EINTR) continue;
    if (reaped < 0) return;  // ECHILD: none left
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (reaped == 0) {  // a child the list missed (it changed while read): look again
      ++missed;
      const timespec pause{0, 1000000};
      ::nanosleep(&pause, nullptr);
    }
  }
}
#endif

/// Ends the supervisor as its command ended: the same exit code, or the
/// same signal raised on itself (with no core file of its own).
[[noreturn]] void end_as(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
#ifdef __linux__
    (void)::prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L);
#endif
    const rlimit no_core{0, 0};
    (void)::setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
    ::kill(::getpid(), sig);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    ::sigprocmask(SIG_UNBLOCK, &only, nullptr);  // delivered here
    ::_exit(128 + sig);
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

/// The supervisor: a child subreaper in a process group of its own, which
/// forks the command, reaps what the run orphans as it exits, and once the
/// command has exited kills its group and every process left among its own
/// children, then ends as the command ended. Every signal is blocked: the
/// timeout's signals go to the command's group, which it is not in.
[[noreturn]] void supervise(const launch& l) {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  ::setpgid(0, 0);
#ifdef __linux__
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
  // Not dumpable: a process of the run (same user) cannot read the
  // supervisor's copy of tessel's memory through /proc/PID/mem; the command
  // is dumpable again once it execs (docs/gate.md, "Round nine").
  (void)::prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L);
#endif
  close_all_but(l);
  // vfork: the command borrows the supervisor's memory until it execs (it
  // only makes system calls on its own stack), so no page table is copied a
  // second time, and no atfork handler runs.
  const pid_t command = ::vfork();
  if (command < 0) {
    send_report(l.report, report_fork_error, errno);
    ::_exit(127);
  }
  if (command == 0) exec_child(l);
  ::setpgid(command, command);  // the group exists before the parent learns its id
  send_report(l.report, report_pid, static_cast<int>(command));
  for (const int fd : {l.in, l.out, l.err, l.report}) ::close(fd);

  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (info.si_pid == command) break;
    while (::waitpid(info.si_pid, nullptr, 0) < 0 && errno == EINTR) {  // an orphan that ended
    }
  }
  ::kill(-command, SIGKILL);  // its group, while its zombie keeps the group id reserved
  int status = 0;
  while (::waitpid(command, &status, 0) < 0 && errno == EINTR) {
  }
#ifdef __linux__
  kill_the_rest();
#endif
  end_as(status);
}

}  // namespace

std::optional<std::string> find_program(const std::string& program,
                                        const std::string& path_variable) {
  if (program.empty()) return std::nullopt;
  if (program.find('/') != std::string::npos) return program;
  std::size_t begin = 0;
  for (;;) {
    const auto end = path_variable.find(':', begin);
    std::string dir =
        path_variable.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir.append("/").append(program);
    struct stat info {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (end == std::string::npos) return std::nullopt;
    begin = end + 1;
  }
}

std::string signal_name(int signal) {
  static constexpr std::array<std::pair<int, const char*>, 16> names{{
      {SIGHUP, "SIGHUP"},
      {SIGINT, "SIGINT"},
      {SIGQUIT, "SIGQUIT"},
      {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"},
      {SIGABRT, "SIGABRT"},
      {SIGBUS, "SIGBUS"},
      {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"},
      {SIGUSR1, "SIGUSR1"},
      {SIGSEGV, "SIGSEGV"},
      {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"},
      {SIGALRM, "SIGALRM"},
      {SIGTERM, "SIGTERM"},
      {SIGXCPU, "SIGXCPU"},
  }};
  for (const auto& [number, name] : names)
    if (number == signal) return name;
  return "signal " + std::to_string(signal);
}

process_result run_process(const process_request& request) {
  process_result result;
  if (request.arguments.empty()) {
    result.start_error = "empty command";
    return result;
  }
  const auto path = find_program(request.arguments[0], path_variable_of(request.environment));
  if (!path) {
    result.start_error = "program not found in PATH: " + request.arguments[0];
    return result;
  }
  auto arguments = request.arguments;
  auto environment = request.environment;
  auto argv = c_array(arguments);
  auto envp = c_array(environment);
  const char* directory =
      request.working_directory.empty() ? nullptr : request.working_directory.c_str();
  const void* cpus = nullptr;
#ifdef __linux__
  cpu_set_t cpu_set;  // built before fork: the child only hands it to the kernel
  CPU_ZERO(&cpu_set);
  for (const int cpu : request.cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &cpu_set);
  if (!request.cpus.empty()) cpus = &cpu_set;
#endif

  fd_guard in_read, in_write, out_read, out_write, err_read, err_write, report_read, report_write,
      life_read, life_write;
  if (!make_pipe(in_read, in_write) || !make_pipe(out_read, out_write) ||
      !make_pipe(err_read, err_write) || !make_pipe(report_read, report_write) ||
      !make_pipe(life_read, life_write)) {
    result.start_error = "could not create pipes: " + error_text(errno);
    return result;
  }
  const launch plan{
      in_read.get(), out_write.get(), err_write.get(), report_write.get(), life_write.get(),
      directory,     path->c_str(),   argv.data(),     envp.data(),        cpus};
  sigpipe_guard sigpipe;
  const auto start = clock::now();
  const pid_t pid = ::fork();  // the supervisor
  if (pid < 0) {
    result.start_error = "fork failed: " + error_text(errno);
    return result;
  }
  if (pid == 0) supervise(plan);
  ::setpgid(pid, pid);  // also in the parent, as the supervisor does itself
  in_read.reset();
  out_write.reset();
  err_write.reset();
  report_write.reset();
  life_write.reset();

  // The records until EOF: the command's pid, then errno if it did not start.
  std::array<report_record, 4> records{};
  std::size_t got = 0;
  for (auto* bytes = reinterpret_cast<char*>(records.data()); got < sizeof records;) {
    const auto n = ::read(report_read.get(), bytes + got, sizeof records - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  pid_t command = 0;
  int exec_errno = 0, fork_errno = 0;
  for (std::size_t i = 0; i < got / sizeof(report_record); ++i) {
    const auto& r = records[i];
    if (r.kind == report_pid) command = static_cast<pid_t>(r.value);
    if (r.kind == report_exec_error) exec_errno = r.value;
    if (r.kind == report_fork_error) fork_errno = r.value;
  }
  if (exec_errno != 0 || fork_errno != 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (fork_errno != 0) {
      result.start_error = "fork failed: " + error_text(fork_errno);
      return result;
    }
    result.start_error = "could not run " + request.arguments[0] + ": " + error_text(exec_errno);
    if (directory != nullptr)
      result.start_error += " (in working directory " + request.working_directory + ")";
    return result;
  }
  result.started = true;

  set_nonblocking(in_write.get());
  set_nonblocking(out_read.get());
  set_nonblocking(err_read.get());
  if (request.input.empty()) in_write.reset();
  session s{request, result, pid, command, in_write, out_read, err_read, life_read, sigpipe};
  s.loop();
  if (!s.exited) s.signal_group(SIGKILL);  // the loop gave up (poll failed): leave nothing behind

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.wall_s = std::chrono::duration<double>(clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  trim_tail(result.output, request.max_output_bytes, result.output_truncated);
  bool ignored = false;
  trim_tail(result.errors, request.max_error_bytes, ignored);
  return result;
}

}  // namespace tessel::detail
