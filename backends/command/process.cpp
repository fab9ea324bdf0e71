// process.cpp: fork/exec with pipes, a poll loop and process-group kills
// (POSIX). Between fork and exec the child calls only async-signal-safe
// functions: everything it needs (path, argv, envp) is built beforehand.
// On Linux tessel is a child subreaper, and every run's processes carry a
// marker (TESSEL_RUN) by which what a run leaves behind is killed when its
// root exits, even after it left the process group (setsid, double fork).
#include "command/process.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
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
bool has_exited(pid_t pid) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0)
    if (errno != EINTR) return true;  // not our child any more: nothing to wait for
  return info.si_pid == pid;
}

/// Child side: wire the pipes, move to a new process group, exec. Reports
/// errno through `report` (close-on-exec: EOF there means exec succeeded).
[[noreturn]] void exec_child(int in, int out, int err, int report, const char* directory,
                             const char* path, char* const* argv, char* const* envp,
                             const void* cpus) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
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
    const int e = errno;
    (void)!::write(report, &e, sizeof e);
    ::_exit(127);
  }
  ::execve(path, argv, envp);
  const int e = errno;
  (void)!::write(report, &e, sizeof e);
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
  pid_t pid;
  fd_guard& in;
  fd_guard& out;
  fd_guard& err;
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

  void signal_group(int sig) const { ::kill(-pid, sig); }

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
    // After the leader exits, its group is killed and the pipes get at most
    // this long to reach EOF (a process that left the group may hold them).
    constexpr auto drain_limit = std::chrono::milliseconds(1000);
    for (;;) {
      if (!exited && has_exited(pid)) {
        exited = true;
        exited_at = clock::now();
        signal_group(SIGKILL);  // whatever it left running in its group
      }
      const bool pipes_open = out.open() || err.open();
      if (exited && (!pipes_open || clock::now() - exited_at > drain_limit)) break;

      std::array<pollfd, 3> fds{};
      nfds_t n = 0;
      const auto watch = [&](const fd_guard& fd, short events) {
        if (fd.open()) fds[n++] = pollfd{fd.get(), events, 0};
      };
      watch(in, POLLOUT);
      watch(out, POLLIN);
      watch(err, POLLIN);

      int wait_ms = schedule(clock::now(), deadline, has_deadline);
      // While the leader runs, wake now and then to notice its exit (its
      // pipes may be held open by a grandchild); once pipes are closed, poll
      // for the exit closely.
      const int tick = pipes_open ? 50 : 2;
      wait_ms = wait_ms < 0 ? tick : std::min(wait_ms, tick);
      const int ready = ::poll(fds.data(), n, wait_ms);
      if (ready < 0 && errno != EINTR) break;
      if (ready <= 0) continue;
      for (nfds_t i = 0; i < n; ++i) {
        if (fds[i].revents == 0) continue;
        if (fds[i].fd == in.get()) {
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

#ifdef __linux__
/// The environment variable that marks every process of one run.
constexpr const char* run_marker = "TESSEL_RUN=";

/// Makes this process a child subreaper, once: a process a run leaves
/// behind (its parent exited) is reparented to tessel, not to init, so
/// tessel can find it among its own children. Returns whether it is one.
bool become_subreaper() {
  static const bool is = ::prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L) == 0;
  return is;
}

/// The roots of the runs in progress in this process: never another run's
/// leftovers, even when a recycled pid or group id would say so.
std::mutex roots_mutex;
std::vector<pid_t> live_roots;

void add_root(pid_t pid) {
  const std::lock_guard lock(roots_mutex);
  live_roots.push_back(pid);
}

void remove_root(pid_t pid) {
  const std::lock_guard lock(roots_mutex);
  std::erase(live_roots, pid);
}

bool is_live_root(pid_t pid) {
  const std::lock_guard lock(roots_mutex);
  return std::find(live_roots.begin(), live_roots.end(), pid) != live_roots.end();
}

/// A fresh marker value: 128 random bits in hex (no order in it, so a
/// program cannot count its runs by it).
std::string new_run_id() {
  static std::mutex mutex;
  static std::mt19937_64 draw{[] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }()};
  const std::lock_guard lock(mutex);
  char text[40];
  const auto a = draw(), b = draw();
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return text;
}

/// A /proc file's text ("" when it cannot be read).
std::string read_file(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  std::array<char, 4096> chunk{};
  for (;;) {
    const auto n = ::read(fd, chunk.data(), chunk.size());
    if (n > 0)
      text.append(chunk.data(), static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fd);
  return text;
}

/// One process from /proc/PID/stat: its parent, group and state.
struct proc_stat {
  pid_t parent = 0, group = 0;
  char state = '?';
};

bool read_stat(pid_t pid, proc_stat& out) {
  const auto text = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = text.rfind(')');  // the name may hold spaces and parentheses
  if (close == std::string::npos) return false;
  int parent = 0, group = 0;
  char state = '?';
  if (std::sscanf(text.c_str() + close + 1, " %c %d %d", &state, &parent, &group) != 3)
    return false;
  out = {static_cast<pid_t>(parent), static_cast<pid_t>(group), state};
  return true;
}

/// This process's children: /proc/self/task/*/children (each thread's), or
/// a scan of /proc where the kernel has no such files.
std::vector<pid_t> own_children() {
  std::vector<pid_t> out;
  bool listed = false;
  if (DIR* tasks = ::opendir("/proc/self/task")) {
    listed = true;
    while (const dirent* t = ::readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      std::ifstream in(std::string("/proc/self/task/") + t->d_name + "/children");
      if (!in) {
        listed = false;
        break;
      }
      for (long pid = 0; in >> pid;) out.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(tasks);
  }
  if (listed) return out;
  out.clear();
  const pid_t self = ::getpid();
  if (DIR* all = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(all)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      proc_stat st;
      if (end != e->d_name && *end == '\0' && read_stat(static_cast<pid_t>(pid), st) &&
          st.parent == self)
        out.push_back(static_cast<pid_t>(pid));
    }
    ::closedir(all);
  }
  return out;
}

/// Whether the environment of `pid` holds `marker` ("TESSEL_RUN=ID").
bool marked(pid_t pid, const std::string& marker) {
  const auto environment = read_file("/proc/" + std::to_string(pid) + "/environ");
  for (std::size_t at = 0; at < environment.size();) {
    const auto end = std::min(environment.find('\0', at), environment.size());
    if (environment.compare(at, end - at, marker) == 0) return true;
    at = end + 1;
  }
  return false;
}

/// Kills and reaps what run `id` (root `root`, already reaped) left among
/// this process's children: the processes whose environment holds its
/// marker, and the members of its process group (killed when the root
/// exited, maybe zombies already, whose environment cannot be read). Each
/// round's kills hand their own children to this process; rounds go on
/// until one finds none.
/// Processes of other runs, and every other child, are left alone.
void reap_leftovers(const std::string& id, pid_t root) {
  const std::string marker = std::string(run_marker) + id;
  const pid_t self = ::getpid();
  for (int round = 0; round < 1000; ++round) {
    std::vector<pid_t> found;
    for (const pid_t child : own_children()) {
      proc_stat st;
      if (!read_stat(child, st) || st.parent != self || is_live_root(child)) continue;
      // The group's members, killed when the root exited (a zombie's
      // environment cannot be read; the group id stays the run's while
      // one is left), and the marked ones.
      const bool ours = st.group == root || marked(child, marker);
      if (ours) found.push_back(child);
    }
    if (found.empty()) return;
    for (const pid_t child : found) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
}
#endif

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
#ifdef __linux__
  const bool reaper = become_subreaper();
  const std::string run_id = reaper ? new_run_id() : std::string();
  if (reaper) {
    std::erase_if(environment, [](const std::string& e) { return e.rfind(run_marker, 0) == 0; });
    environment.push_back(run_marker + run_id);
  }
#endif
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

  fd_guard in_read, in_write, out_read, out_write, err_read, err_write, report_read, report_write;
  if (!make_pipe(in_read, in_write) || !make_pipe(out_read, out_write) ||
      !make_pipe(err_read, err_write) || !make_pipe(report_read, report_write)) {
    result.start_error = "could not create pipes: " + error_text(errno);
    return result;
  }
  sigpipe_guard sigpipe;
  const auto start = clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.start_error = "fork failed: " + error_text(errno);
    return result;
  }
  if (pid == 0)
    exec_child(in_read.get(), out_write.get(), err_write.get(), report_write.get(), directory,
               path->c_str(), argv.data(), envp.data(), cpus);
  ::setpgid(pid, pid);  // also in the parent, so a kill never races the child's own setpgid
#ifdef __linux__
  if (reaper) add_root(pid);
#endif
  in_read.reset();
  out_write.reset();
  err_write.reset();
  report_write.reset();

  int exec_errno = 0;
  ssize_t got = 0;
  while ((got = ::read(report_read.get(), &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
#ifdef __linux__
    if (reaper) remove_root(pid);
#endif
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
  session s{request, result, pid, in_write, out_read, err_read, sigpipe};
  s.loop();
  if (!s.exited) s.signal_group(SIGKILL);  // the loop gave up (poll failed): leave nothing behind

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.wall_s = std::chrono::duration<double>(clock::now() - start).count();
#ifdef __linux__
  if (reaper) {
    remove_root(pid);
    reap_leftovers(run_id, pid);  // after wall_s: not the program's time
  }
#endif
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  trim_tail(result.output, request.max_output_bytes, result.output_truncated);
  bool ignored = false;
  trim_tail(result.errors, request.max_error_bytes, ignored);
  return result;
}

}  // namespace tessel::detail
