// redteam_tricks.hpp: what the red team's programs (gate_program.cpp's modes,
// redteam_kernels.cpp's kernels) both do: leave a daemon behind (setsid and a
// double fork, so it is in none of the run's process groups and its parent
// has exited), look at other processes through /proc (their parent, their
// memory), and write the red team's log (note; process_kernels.cpp's and
// forge_kernels.cpp's kernels too). redteam_kernels.cpp is compiled by the
// cpu backend at test time and finds this file beside itself (a quoted
// include); each
// build's manifest lists it (docs/cpu.md, "How the cache decides"), so a
// change here is compiled again in the test cache like a change there.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <fcntl.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tessel_redteam {

/// Appends `line` to the red team's log, $TESSEL_REDTEAM_LOG (nothing when
/// it is not set): what the kernels and programs tell their tests.
inline void note(const std::string& line) {
  const char* path = std::getenv("TESSEL_REDTEAM_LOG");  // NOLINT(concurrency-mt-unsafe)
  if (path != nullptr) std::ofstream(path, std::ios::app) << line << '\n';
}

/// How the daemon hides from a search by environment (tessel marked each
/// run's processes with TESSEL_RUN in their environment until session 13).
enum class disguise {
  none,    ///< keeps the environment it inherited
  erased,  ///< overwrites its environment block with zeros (/proc/PID/environ)
  bare,    ///< execs /bin/sleep with an empty environment
};

/// This process's pid as this machine numbers it. In a run's PID namespace
/// getpid() and getppid() give the namespace's numbers, but /proc is the
/// machine's (the namespace does not remount it): every pid read from or
/// looked up in /proc must be the machine's (docs/gate.md, "A run's PID
/// namespace"). kill() takes the namespace's.
inline long machine_pid() {
  char link[32] = {0};
  return ::readlink("/proc/self", link, sizeof link - 1) > 0 ? std::atol(link) : 0;
}

/// Leaves a daemon that sleeps 300 s and holds none of the caller's files;
/// returns its pid (0 when it could not) once its first parent has exited.
inline pid_t leave_daemon(disguise how) {
  int channel[2];
  if (::pipe(channel) != 0) return 0;
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    const pid_t daemon = ::fork();
    if (daemon == 0) {
      const auto pid = static_cast<pid_t>(machine_pid());  // the test looks it up
      (void)!::write(channel[1], &pid, sizeof pid);
      for (int fd = 0; fd < 1024; ++fd) ::close(fd);  // holds no pipe of tessel's
      if (how == disguise::erased)
        for (char** e = environ; *e != nullptr; ++e) std::memset(*e, 0, std::strlen(*e));
      if (how == disguise::bare) {
        char name[] = "sleep", seconds[] = "300";
        char* argv[] = {name, seconds, nullptr};
        char* envp[] = {nullptr};
        ::execve("/bin/sleep", argv, envp);
      }
      ::sleep(300);
      ::_exit(0);
    }
    if (daemon < 0) {
      const pid_t none = 0;
      (void)!::write(channel[1], &none, sizeof none);
    }
    ::_exit(0);
  }
  ::close(channel[1]);
  pid_t daemon = 0;
  if (child > 0) {
    if (::read(channel[0], &daemon, sizeof daemon) != static_cast<ssize_t>(sizeof daemon))
      daemon = 0;
    ::waitpid(child, nullptr, 0);  // out of the group before the caller goes on
  }
  ::close(channel[0]);
  return daemon > 0 ? daemon : 0;
}

/// The parent of process `pid` (/proc/PID/stat; 0 when it cannot be read).
inline long parent_of(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  long parent = 0;
  if (const auto end = text.rfind(')'); end != std::string::npos)  // the name may hold ')'
    std::sscanf(text.c_str() + end + 1, " %*c %ld", &parent);
  return parent;
}

/// This process's parent as this machine numbers it (machine_pid).
inline long machine_parent() { return parent_of(machine_pid()); }

/// Whether `pid`'s memory can be read: a read at the start of its first
/// readable mapping (/proc/PID/maps, /proc/PID/mem).
inline bool read_memory(long pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long begin = 0, end = 0;
    char perms[5] = {0};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) != 3 || perms[0] != 'r')
      continue;
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY);
    if (fd < 0) return false;
    char bytes[64];
    const auto n = ::pread(fd, bytes, sizeof bytes, static_cast<off_t>(begin));
    ::close(fd);
    return n > 0;
  }
  return false;
}

}  // namespace tessel_redteam
