// supervisor.cpp: the per-run supervisor (supervisor.hpp). tessel clones
// it as the init of a PID namespace of its own where the system allows one,
// else forks it; it becomes a child subreaper in a process group of its
// own, vforks the command, and when the command has exited (or tessel is
// gone) kills its group and everything else the run left behind (even after it left the group:
// setsid, double fork): in a namespace every other process in it, else, on
// Linux, every process left among its own children. Then it reports the
// command's end on the life pipe and ends as the command ended. Everything
// here runs after fork in a process whose parent may have threads:
// async-signal-safe calls only, no allocation.
#include "command/supervisor.hpp"

#include "command/process.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <limits>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

namespace tessel::detail {
namespace {

/// Writes one record with one write(2), atomic on the pipe.
void send_report(int fd, report_record::kind tag, int value) {
  const report_record r{tag, value};
  (void)!::write(fd, &r, sizeof r);
}

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
    send_report(report, report_record::kind::exec_error, errno);
    ::_exit(127);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(l.path, l.argv, l.envp);
  send_report(report, report_record::kind::exec_error, errno);
  ::_exit(127);
}

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
  constexpr std::size_t own = 9;  // the standard three and the run's pipe ends
  std::array<int, own + max_inherited> keep{0,     1,        2,      l.in,    l.out,
                                            l.err, l.report, l.life, l.tether};
  const std::size_t kept = own + std::min(l.inherited_count, max_inherited);
  std::copy_n(l.inherited, kept - own, keep.begin() + own);
  std::sort(keep.begin(), keep.begin() + static_cast<std::ptrdiff_t>(kept));
  int from = 0;
  for (std::size_t i = 0; i < kept; ++i) {
    close_between(from, keep[i] - 1);
    from = std::max(from, keep[i] + 1);
  }
  close_between(from, std::numeric_limits<int>::max());
  // tessel opened them close-on-exec; the command keeps them across its exec.
  for (std::size_t i = 0; i < kept - own; ++i) (void)::fcntl(l.inherited[i], F_SETFD, 0);
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

/// Writes `text` to the file at `path` (a /proc/self file); whether it was
/// written whole.
bool write_file(const char* path, const char* text, std::size_t size) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool whole = ::write(fd, text, size) == static_cast<ssize_t>(size);
  ::close(fd);
  return whole;
}

/// In a user namespace of its own, maps tessel's uid and gid to themselves
/// (as `unshare -r` does for 0): unmapped, the command would run as the
/// overflow user and could not write its own files. setgroups must be
/// denied before an unprivileged gid_map is written.
bool map_user(const launch& l) {
  std::array<char, 64> line{};
  const auto map = [&](const char* path, unsigned id) {
    char* end = put_text(put_decimal(put_text(put_decimal(line.data(), id), " "), id), " 1\n");
    return write_file(path, line.data(), static_cast<std::size_t>(end - line.data()));
  };
  static constexpr char deny[] = "deny";
  return map("/proc/self/uid_map", l.uid) &&
         write_file("/proc/self/setgroups", deny, sizeof deny - 1) &&
         map("/proc/self/gid_map", l.gid);
}

/// As the init of the run's PID namespace: kills every other process in it
/// (kill(-1) reaches the whole namespace but its init) and reaps them.
/// The kernel would kill them when the init exits; doing it first lets the
/// init report the command's end only once the run is over.
void kill_the_namespace() {
  (void)::kill(-1, SIGKILL);
  for (;;) {
    if (::waitpid(-1, nullptr, 0) > 0) continue;
    if (errno == EINTR) continue;
    return;  // ECHILD: none left
  }
}

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

/// Whether tessel is gone or done with the run: the tether hung up (every
/// write end closed: tessel's, at its death or when run_process leaves
/// early), or, outside a PID namespace (whose init sees no parent), the
/// supervisor has another parent (init, or a subreaper above tessel).
bool tessel_gone(const launch& l) {
  pollfd tether{l.tether, POLLIN, 0};
  while (::poll(&tether, 1, 0) < 0 && errno == EINTR) {
  }
  if ((tether.revents & (POLLHUP | POLLERR)) != 0) return true;
  return !l.pid_namespace && ::getppid() != static_cast<pid_t>(l.parent);
}

/// Waits for the command's end, reaping whatever else of the run ends
/// meanwhile. Signals stay blocked and are taken here one at a time: a
/// SIGTERM sent from outside the supervisor's PID namespace (si_pid 0, by
/// kill: tessel's time limit, which cannot name the command's group by a
/// pid of the namespace) goes on to the command's group; a SIGHUP, once
/// tessel is gone or done with the run (the fallback's death signal, the
/// tether's hang-up), ends the wait as the command's end would; others are
/// dropped (those the run sends its init, or its parent, too).
int wait_for(const launch& l, pid_t command) {
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, SIGTERM);
  sigaddset(&wake, SIGHUP);
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break;  // no child at all
    }
    if (info.si_pid == command) break;
    if (info.si_pid != 0) {  // an orphan that ended: reap it, look again
      while (::waitpid(info.si_pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      continue;
    }
    siginfo_t got{};
    if (::sigwaitinfo(&wake, &got) < 0) continue;
    if (got.si_signo == SIGTERM && got.si_code == SI_USER && got.si_pid == 0)
      (void)::kill(-command, SIGTERM);
    if (got.si_signo == SIGHUP && tessel_gone(l)) break;
  }
  ::kill(-command, SIGKILL);  // its group, while its zombie keeps the group id reserved
  int status = 0;
  while (::waitpid(command, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

/// The supervisor: a child subreaper in a process group of its own, which
/// forks the command, reaps what the run orphans as it exits, and once the
/// command has exited kills its group and everything else of the run, then
/// reports and ends as the command ended. Every signal is blocked: the time
/// limit's signals go to the command's group, which it is not in, or, in a
/// PID namespace, to the supervisor, which passes SIGTERM on (SIGKILL from
/// outside ends the namespace's init, and the kernel kills the rest).
void supervise(const launch& l) {
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  if (l.user_namespace && !map_user(l)) {
    send_report(l.report, report_record::kind::map_error, errno);
    ::_exit(127);
  }
  ::setpgid(0, 0);
#ifdef __linux__
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
  // Not dumpable: a process of the run (same user) cannot read the
  // supervisor's copy of tessel's memory through /proc/PID/mem; the command
  // is dumpable again once it execs (docs/gate.md, "Round nine").
  (void)::prctl(PR_SET_DUMPABLE, 0L, 0L, 0L, 0L);
  if (l.delay_ms > 0) {  // a test's: tessel may be killed meanwhile
    const timespec delay{l.delay_ms / 1000, (l.delay_ms % 1000) * 1000000L};
    ::nanosleep(&delay, nullptr);
  }
  // The run ends with tessel: killed, its runs' time limits would die with
  // it, and a hanging run would never end. The thread that forked or cloned
  // the supervisor waits in run_process until the supervisor ends, so the
  // death signal, which follows that thread, comes only when tessel is gone.
  // In a namespace SIGKILL ends the init, and the kernel kills the rest. In
  // the fallback SIGKILL would end the supervisor alone and leave the
  // command's group, so it asks for SIGHUP, which wait_for takes (blocked,
  // it waits) and acts on only once tessel_gone says so (a process of the
  // run may send SIGHUP too): it kills the run as at a normal end.
  (void)::prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(l.pid_namespace ? SIGKILL : SIGHUP),
                0L, 0L, 0L);
#endif
  close_all_but(l);  // and with them the supervisor's copy of the tether's write end
#ifdef __linux__
  // Were tessel gone before the prctl, no death signal would come, and in a
  // namespace getppid() says nothing (0). The tether says it whenever it
  // happens: SIGHUP when its last write end closes from now on (tessel's,
  // or one another run's supervisor, forked meanwhile, still held), and a
  // look now for one closed before. Then the command is never started.
  (void)::fcntl(l.tether, F_SETOWN, ::getpid());
  (void)::fcntl(l.tether, F_SETSIG, SIGHUP);
  (void)::fcntl(l.tether, F_SETFL, O_ASYNC);
#endif
  if (tessel_gone(l)) ::_exit(127);
  // vfork: the command borrows the supervisor's memory until it execs (it
  // only makes system calls on its own stack), so no page table is copied a
  // second time, and no atfork handler runs.
  const pid_t command = ::vfork();
  if (command < 0) {
    send_report(l.report, report_record::kind::fork_error, errno);
    ::_exit(127);
  }
  if (command == 0) exec_child(l);
  ::setpgid(command, command);  // the group exists before the parent learns its id
  send_report(l.report, report_record::kind::command_pid, static_cast<int>(command));
  for (const int fd : {l.in, l.out, l.err, l.report}) ::close(fd);

  const int status = wait_for(l, command);
  if (l.pid_namespace) kill_the_namespace();
#ifdef __linux__
  else
    kill_the_rest();
#endif
  send_report(l.life, report_record::kind::command_status, status);
  end_as(status);
}

}  // namespace tessel::detail
