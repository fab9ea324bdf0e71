// process.cpp: fork/exec with pipes, a poll loop and process-group kills
// (POSIX). Each run has a supervisor process of its own (supervisor.cpp):
// tessel clones it as the init of a new PID namespace where the system
// allows one, else forks it (namespaces.cpp), it forks and waits for the command, and when
// the command has exited it kills what the run left behind. This file is
// tessel's side: everything the supervisor and the command need (path,
// argv, envp, the cpu set) is built here before the fork; then the pipes are
// fed and read until the supervisor exits, with the time limit's signals
// sent to the command's process group (through the supervisor, in a
// namespace).
#include "command/process.hpp"
#include "command/namespaces.hpp"
#include "command/supervisor.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <limits>
#include <new>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tessel::detail {
namespace {

using clock = std::chrono::steady_clock;

/// A file descriptor closed on destruction.
class fd_guard {
 public:
  fd_guard() = default;
  explicit fd_guard(int fd) : fd_(fd) {}
  fd_guard(fd_guard&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
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

/// throw_in_next_runs: how many throws are still to come, and where.
std::atomic<int> throws_to_inject{0};
std::atomic<run_step> injected_step{run_step::output};

/// Throws std::bad_alloc where a test asked for it (throw_in_next_runs).
void injected_throw(run_step step) {
  if (injected_step.load(std::memory_order_relaxed) == step && take_one(throws_to_inject))
    throw std::bad_alloc();
}

/// delay_next_supervisors: how many supervisors are still to wait, and how long.
std::atomic<int> delays_to_inject{0};
std::atomic<int> injected_delay_ms{0};

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

/// `seconds` (>= 0) on the steady clock, at most a century: in its
/// nanoseconds a longer time (1e300 s is finite, and a valid time limit)
/// would overflow, and a deadline would come before its start.
clock::duration span(double seconds) {
  constexpr double century = 100.0 * 365.25 * 24 * 3600;
  return std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(std::min(seconds, century)));
}

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

/// The run's supervisor, from its start until it is reaped, and tessel's
/// end of its tether (supervisor.hpp). Whichever way run_process leaves
/// before it reaped it (an exception: the output's buffer could not grow,
/// ...), the destructor ends the run and reaps it: left alone, the run
/// would go on with no time limit, its supervisor never reaped.
class run_owner {
 public:
  run_owner(pid_t pid, bool namespaced, fd_guard tether)
      : pid_(pid), namespaced_(namespaced), tether_(std::move(tether)) {}
  run_owner(const run_owner&) = delete;
  run_owner& operator=(const run_owner&) = delete;
  ~run_owner() {
    if (pid_ > 0) end();
  }
  /// The command's process group, once the supervisor has reported it.
  void set_group(pid_t group) noexcept { group_ = group; }
  /// Waits for the supervisor's end; returns its wait status.
  int reap() noexcept {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = 0;
    tether_.reset();
    return status;
  }

 private:
  /// In a namespace SIGKILL ends its init, and the kernel kills the rest.
  /// In the fallback the tether hangs up, and the supervisor (told by
  /// SIGHUP, or looking before it starts the command) kills the command's
  /// group and what else the run left among its children and exits, as at
  /// a normal end. It gets a second (a process of the run may have stopped
  /// it; a process the embedding program forked may hold the tether), then
  /// SIGKILL, the command's group's too.
  void end() noexcept {
    tether_.reset();
    if (namespaced_) {
      ::kill(pid_, SIGKILL);
    } else {
      const timespec pause{0, 1000000};
      for (int waited = 0; waited < 1000 && !has_exited(pid_); ++waited)
        ::nanosleep(&pause, nullptr);
      if (!has_exited(pid_)) {
        if (group_ > 0) ::kill(-group_, SIGKILL);
        ::kill(pid_, SIGKILL);
      }
    }
    (void)reap();
  }

  pid_t pid_;
  bool namespaced_;
  fd_guard tether_;
  pid_t group_ = 0;
};

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

/// Reads the records a pipe holds (supervisor.hpp) into `r`, of which `got`
/// bytes have come so far, and hands each whole one to `take`. Returns
/// false at EOF or on an error, true when a non-blocking pipe is empty.
template <class Take>
bool read_records(int fd, report_record& r, std::size_t& got, Take&& take) {
  auto* bytes = reinterpret_cast<char*>(&r);
  for (;;) {
    const auto n = ::read(fd, bytes + got, sizeof r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
    if (got < sizeof r) continue;  // each record is written whole: the rest follows
    got = 0;
    take(r);
  }
}

/// The poll loop's state: the three pipes and the kill schedule.
struct session {
  const process_request& request;
  process_result& result;
  pid_t pid;    ///< the supervisor
  pid_t group;  ///< the command's process group (its pid); 0: unknown
  fd_guard& in;
  fd_guard& out;
  fd_guard& err;
  fd_guard& life;  ///< the command's end, then EOF: the supervisor is exiting
  sigpipe_guard& sigpipe;
  std::optional<int> status{};  ///< the command's wait status, as the supervisor reported it
  report_record record{};
  std::size_t record_got = 0;
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
        injected_throw(run_step::output);
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

  /// Reads what the life pipe holds (the command's end, the supervisor's
  /// last record); at its EOF closes it and returns false.
  bool read_life() {
    if (!life.open()) return false;
    if (read_records(life.get(), record, record_got, [&](const report_record& r) {
          if (r.tag == report_record::kind::command_status) status = r.value;
        }))
      return true;
    life.reset();
    return false;
  }

  /// Signals the command's group while the run goes on: once the
  /// supervisor has exited it has reaped the command, and the group id may
  /// be another's. In a PID namespace the group's id is the namespace's, so
  /// the signal goes to the supervisor: it passes SIGTERM on to the group,
  /// and SIGKILL ends it, the namespace's init, and the kernel kills the rest.
  void signal_group(int sig) const {
    if (has_exited(pid)) return;
    if (result.pid_namespace)
      ::kill(pid, sig);
    else if (group > 0)
      ::kill(-group, sig);
  }

  /// Sends the kills that are due; returns the milliseconds until the next one.
  int schedule(clock::time_point now, clock::time_point deadline, bool has_deadline) {
    if (has_deadline && !term_sent && now >= deadline) {
      injected_throw(run_step::time_limit);
      result.timed_out = true;
      term_sent = true;
      signal_group(SIGTERM);
      kill_at = now + span(request.kill_grace_s);
    }
    if (term_sent && !kill_sent && now >= kill_at) {
      kill_sent = true;
      signal_group(SIGKILL);
    }
    auto until = [&](clock::time_point t) {
      return static_cast<int>(std::clamp<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1, 0,
          std::numeric_limits<int>::max()));
    };
    if (has_deadline && !term_sent) return until(deadline);
    if (term_sent && !kill_sent) return until(kill_at);
    return -1;
  }

  void loop() {
    const auto start = clock::now();
    const bool has_deadline = request.timeout_s > 0;
    const auto deadline = start + span(request.timeout_s);
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
          // The supervisor's last record, then EOF: it has closed its
          // files, so it is exiting, and the wait for its end is short.
          if (read_life()) continue;
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

/// What the report pipe said about the start (supervisor.hpp), one field a
/// record kind.
struct start_report {
  pid_t command = 0;   ///< the command's pid and process group; 0: not forked
  int exec_errno = 0;  ///< the command's chdir or exec failed
  int fork_errno = 0;  ///< the supervisor could not fork the command
  int map_errno = 0;   ///< the supervisor could not map tessel's uid in its user namespace
};

/// Reads the report pipe's records until its EOF (the command's exec, or
/// the end of the supervisor and the command) and sorts them by their tag:
/// the command's pid, then errno if it did not start.
start_report read_reports(int fd) {
  start_report out;
  report_record r{};
  std::size_t got = 0;
  (void)read_records(fd, r, got, [&](const report_record& each) {
    switch (each.tag) {
      case report_record::kind::command_pid: out.command = static_cast<pid_t>(each.value); break;
      case report_record::kind::exec_error: out.exec_errno = each.value; break;
      case report_record::kind::fork_error: out.fork_errno = each.value; break;
      case report_record::kind::map_error: out.map_errno = each.value; break;
      case report_record::kind::command_status: break;  // on the life pipe only
    }
  });
  return out;
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

void delay_next_supervisors(int ms, int count) {
  injected_delay_ms.store(ms);
  delays_to_inject.store(count);
}

void throw_in_next_runs(run_step step, int count) {
  injected_step.store(step);
  throws_to_inject.store(count);
}

process_result run_process(const process_request& request) {
  process_result result;
  if (request.arguments.empty()) {
    result.start_error = "empty command";
    return result;
  }
  if (request.inherited.size() > max_inherited) {
    result.start_error = "more than " + std::to_string(max_inherited) + " descriptors to inherit";
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
      life_read, life_write, tether_read, tether_write;
  if (!make_pipe(in_read, in_write) || !make_pipe(out_read, out_write) ||
      !make_pipe(err_read, err_write) || !make_pipe(report_read, report_write) ||
      !make_pipe(life_read, life_write) || !make_pipe(tether_read, tether_write)) {
    result.start_error = "could not create pipes: " + error_text(errno);
    return result;
  }
  launch plan{in_read.get(),
              out_write.get(),
              err_write.get(),
              report_write.get(),
              life_write.get(),
              tether_read.get(),
              directory,
              path->c_str(),
              argv.data(),
              envp.data(),
              cpus,
              request.inherited.data(),
              request.inherited.size()};
  if (take_one(delays_to_inject)) plan.delay_ms = injected_delay_ms.load();
  sigpipe_guard sigpipe;
  const auto start = clock::now();
  const pid_t pid = start_supervisor(plan);
  if (pid < 0) {
    result.start_error = "fork failed: " + error_text(errno);
    return result;
  }
  if (pid == 0) supervise(plan);
  // From here on, no way out leaves the run behind.
  run_owner owner(pid, plan.pid_namespace, std::move(tether_write));
  result.pid_namespace = plan.pid_namespace;
  result.user_namespace = plan.user_namespace;
  ::setpgid(pid, pid);  // also in the parent, as the supervisor does itself
  in_read.reset();
  out_write.reset();
  err_write.reset();
  report_write.reset();
  life_write.reset();
  tether_read.reset();

  const auto [command, exec_errno, fork_errno, map_errno] = read_reports(report_read.get());
  if (exec_errno != 0 || fork_errno != 0 || map_errno != 0) {
    (void)owner.reap();
#ifdef __linux__
    if (map_errno != 0) {  // the command never started: run it without namespaces
      refuse_namespaces_for_good();
      return run_process(request);
    }
#endif
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
  owner.set_group(command);

  set_nonblocking(in_write.get());
  set_nonblocking(out_read.get());
  set_nonblocking(err_read.get());
  set_nonblocking(life_read.get());
  if (request.input.empty()) in_write.reset();
  session s{request, result, pid, command, in_write, out_read, err_read, life_read, sigpipe};
  s.loop();
  if (!s.exited) s.signal_group(SIGKILL);  // the loop gave up (poll failed): leave nothing behind

  int status = owner.reap();
  // The command's end as the supervisor reported it: as a namespace's init
  // it cannot end by the command's signal. The loop may have seen the
  // supervisor's exit before its record, which the pipe still holds.
  // Without the record (the supervisor was killed), the supervisor's end.
  (void)s.read_life();
  status = s.status.value_or(status);
  result.wall_s = std::chrono::duration<double>(clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  trim_tail(result.output, request.max_output_bytes, result.output_truncated);
  bool ignored = false;
  trim_tail(result.errors, request.max_error_bytes, ignored);
  return result;
}

}  // namespace tessel::detail
