// class17_test.cpp: round thirteen, host kernels that reach for processes
// (docs/gate.md, "Round thirteen: a kernel may not create processes").
// Until this round the cpu loader's kernel process could fork workers that
// share the tensors (their CPU time not counted by the CPU rule), run a
// program in its place, and, as root, attach to its timing parent or read
// its memory. Now it installs a seccomp filter before it loads the kernel
// (backends/cpu/loader_seccomp.hpp): those calls fail and the loader
// answers "suspicious", naming what the kernel tried; threads still work.
// Each kernel is real (programs/process_kernels.cpp), compiled and run by
// the backend as a user's kernel is, beside the honest control.
#include "process_run.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

#include <unistd.h>

namespace {

using tessel::status;
using tessel::testing::check_refused;
using tessel::testing::count;
using tessel::testing::cpu_run;
using tessel::testing::filtered;
using tessel::testing::has;

cpu_run run_quietly(const std::string& function, const std::string& flags = "-O1",
                    const std::map<std::string, std::string>& environment = {},
                    const std::string& cache = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE)) {
  return tessel::testing::run_process_kernel("tessel-class17", function, flags, environment, cache);
}

cpu_run run_cpu(const std::string& function, const std::string& flags = "-O1",
                const std::map<std::string, std::string>& environment = {},
                const std::string& cpus = "off") {
  return tessel::testing::run_told("tessel-class17", function, flags, environment, cpus);
}

}  // namespace

TEST_CASE("class 17: the honest kernel runs under the filter") {
  const cpu_run r = run_cpu("pk_honest");
  CHECK(r.m.ok());
  CHECK(filtered(r));
  CHECK(r.m.metrics.at("seccomp") == 1);  // the measurement says it
}

TEST_CASE("class 17: a kernel that does its work in forked processes is refused") {
  // Before (3488752): its workers, one per CPU, share its 200 us of work,
  // the CPU rule counts none of their CPU time, and it was ok (at a
  // fraction of the honest kernel's time where CPUs are free: next case).
  // Now its fork fails (EPERM, which it logs) and the loader answers what
  // it tried.
  check_refused(run_cpu("pk_fork_workers"), "create a process", "forked workers", "fork");
}

TEST_CASE("class 17: with the filter turned off, forked workers are timed as before") {
  // TESSEL_CPU_SECCOMP=off (for a system the filter cannot run on): the
  // protection of round twelve only, and the gap this round closes. Timed
  // on one CPU: its workers, one per CPU of the machine, do its work on all
  // of them, and the CPU rule counts none of it.
  const std::map<std::string, std::string> off{{"TESSEL_CPU_SECCOMP", "off"}};
  const cpu_run honest = run_cpu("pk_honest", "-O1", off, "auto");
  const cpu_run r = run_cpu("pk_fork_workers", "-O1", off, "auto");
  REQUIRE(honest.m.ok());
  CHECK(r.m.ok());
  CHECK(count(r.log, "forked workers") > 0);
  CHECK(count(r.log, "seccomp 2") == 0);
  CHECK(honest.m.metrics.at("seccomp") == 0);
  MESSAGE("forked workers / honest, unfiltered, on one CPU of "
          << ::sysconf(_SC_NPROCESSORS_ONLN) << ": " << r.m.objective / honest.m.objective);
}

TEST_CASE("class 17: a kernel that runs a program in its place is refused") {
  // Before: the shell ran in the kernel's process, which the loader saw exit
  // before its calls were done (a runtime error); any program could run
  // there, with the tensors' pipes. Now execv fails (EPERM).
  check_refused(run_cpu("pk_exec"), "run a program in its place (execve)", "exec ran", "exec");
}

TEST_CASE("class 17: a kernel that runs a command by system(3) is refused") {
  // posix_spawn blocks every signal around its clone, so the filter's SIGSYS
  // kills the kernel's process (a blocked forced signal takes its default
  // action); the loader answers that death as a refusal. Before: the
  // command ran, and the kernel was ok.
  const cpu_run r = run_cpu("pk_system");
  CHECK(r.m.status == status::suspicious);
  CHECK(has(r, "was killed by SIGSYS"));
  CHECK(count(r.log, "system ran") == 0);
}

TEST_CASE("class 17: a kernel running as root cannot reach its parent") {
  // As root (CAP_SYS_PTRACE) a kernel attaches to its parent and reads its
  // memory whatever the parent set (it is not dumpable): before, it read a
  // word of the timing parent's memory all three ways (ptrace,
  // process_vm_readv, /proc/PID/mem). Now both calls fail, and the kernel's
  // process has given up CAP_SYS_PTRACE, which /proc/PID/mem asks for.
  if (::geteuid() != 0) {
    MESSAGE("skipped: not root");
    return;
  }
  const cpu_run r = run_cpu("pk_ptrace");
  check_refused(r, "reach another process (ptrace)", "ptrace attached", "ptrace");
  CHECK(count(r.log, "read parent's memory") == 0);
  CHECK(count(r.log, "read parent's memory through /proc") == 0);  // CAP_SYS_PTRACE given up
}

TEST_CASE("class 17: an honest OpenMP kernel is ok under the filter") {
  // Its threads are clones with CLONE_THREAD (glibc tries clone3 first,
  // which the filter answers ENOSYS): allowed, and counted by the CPU rule.
  const cpu_run r = run_cpu("pk_threads", "-O1 -fopenmp");
  CHECK(r.m.ok());
  CHECK(filtered(r));
}

TEST_CASE("class 17: a user who is not root gets the filter too") {
  // Without root, a filter needs PR_SET_NO_NEW_PRIVS, which the loader sets.
  // A forked child gives up root (the tests run as root here), with a cache
  // of its own.
  CHECK(tessel::testing::exit_code_as_nobody("tessel-class17-user", [](const std::string& cache) {
          const cpu_run honest = run_quietly("pk_honest", "-O1", {}, cache);
          if (!honest.m.ok() || !filtered(honest)) return 11;
          const cpu_run cheat = run_quietly("pk_fork_workers", "-O1", {}, cache);
          if (cheat.m.status != status::suspicious || !has(cheat, "tried to create a process"))
            return 12;
          return 0;
        }) == 0);
}
