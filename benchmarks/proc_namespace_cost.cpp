// benchmarks/proc_namespace_cost.cpp: what a fresh /proc per run would cost
// (session 18; docs/backends.md, "What the program sees"). --runs bare runs
// of /bin/true started as tessel starts a namespaced run (clone3 into a PID
// namespace, inside a user namespace with the uid and gid mapped when not
// root; a vfork and exec; the init waits), rotating run by run between
// three modes, so all see the same machine load: that alone; with a mount
// namespace too (CLONE_NEWNS); and with a mount namespace and a fresh proc
// mounted on /proc (the machine's /proc mount made private in it first, so
// the new mount does not propagate back). Per mode: the wall time of each
// run and the CPU time of this process and its children (getrusage), and
// the ratios to the first. Linux only.
//
//   bench_proc_namespace [--runs 3000]
#include "common.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

enum mode : std::size_t { pid_only, mount_namespace, fresh_proc };
constexpr std::array<const char*, 3> mode_names{"PID namespace", "+ mount namespace",
                                                "+ fresh /proc"};

bool write_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return whole;
}

/// In the clone: what tessel's supervisor does before its command (the
/// maps; the mounts of the mode), then vfork, exec /bin/true and wait. Its
/// exit code: the command's, or 10 + the step that failed. The strings are
/// built before the clone.
[[noreturn]] void child(mode m, bool user, const std::string& uid_map, const std::string& gid_map) {
  if (user &&
      (!write_file("/proc/self/uid_map", uid_map) || !write_file("/proc/self/setgroups", "deny") ||
       !write_file("/proc/self/gid_map", gid_map)))
    ::_exit(10);
  if (m == fresh_proc) {
    if (::mount(nullptr, "/proc", nullptr, MS_PRIVATE, nullptr) != 0) ::_exit(11);
    if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
      ::_exit(12);
  }
  const pid_t command = ::vfork();
  if (command == 0) {
    ::execl("/bin/true", "true", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(command, &status, 0) < 0 && errno == EINTR) {
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 13);
}

/// One run; its exit code (0: /bin/true ran), or -1 when the clone failed.
int run(mode m, bool user, const std::string& uid_map, const std::string& gid_map) {
  std::uint64_t flags = CLONE_NEWPID;
  if (user) flags |= CLONE_NEWUSER;
  if (m != pid_only) flags |= CLONE_NEWNS;
  struct {
    std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  } args{flags, 0, 0, 0, SIGCHLD, 0, 0, 0};
  const auto pid = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
  if (pid < 0) return -1;
  if (pid == 0) child(m, user, uid_map, gid_map);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 14;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3000;
  CLI::App app("bench_proc_namespace: the cost of a mount namespace and a fresh /proc per run");
  app.add_option("--runs", runs, "runs, a third in each mode")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const bool user = ::geteuid() != 0;  // as tessel: a user namespace when not root
  const std::string uid_map = fmt::format("{0} {0} 1\n", ::getuid());
  const std::string gid_map = fmt::format("{0} {0} 1\n", ::getgid());
  std::array<double, 3> wall{}, cpu{};
  std::array<int, 3> count{};
  for (int i = 0; i < runs; ++i) {
    const auto m = static_cast<mode>(i % 3);
    const double cpu_before = tessel::bench::cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    const int code = run(m, user, uid_map, gid_map);
    wall[m] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cpu[m] += tessel::bench::cpu_seconds() - cpu_before;
    ++count[m];
    if (code != 0) {
      fmt::print(stderr, "{}: {}\n", mode_names[m],
                 code < 0 ? fmt::format("clone3: {}", std::strerror(errno))
                          : fmt::format("the run failed (exit code {})", code));
      return 1;
    }
  }
  for (std::size_t m = 0; m < 3; ++m)
    fmt::print("{:<18} wall {:.3f} ms  cpu {:.3f} ms per run  ({} runs)\n", mode_names[m],
               1e3 * wall[m] / count[m], 1e3 * cpu[m] / count[m], count[m]);
  for (std::size_t m = 1; m < 3; ++m)
    fmt::print("{} / {}: wall {:.3f}, cpu {:.3f}\n", mode_names[m], mode_names[0],
               (wall[m] / count[m]) / (wall[0] / count[0]),
               (cpu[m] / count[m]) / (cpu[0] / count[0]));
  return 0;
}
