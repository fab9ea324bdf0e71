// namespaces.cpp: the run's supervisor, cloned into a PID namespace or
// forked (namespaces.hpp). A clone the system refuses has already copied
// tessel's page tables (the kernel copies the memory before it makes the
// namespaces), so what the system refuses is remembered: for the process
// when the refusal lasts, for a back-off when it passes.
#include "command/namespaces.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <sched.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

namespace tessel::detail {
namespace {

/// TESSEL_NO_PID_NAMESPACE set (not empty, not "0"): every run gets the
/// supervisor alone, as where the system refuses namespaces.
bool namespaces_turned_off() {
  const char* value = std::getenv("TESSEL_NO_PID_NAMESPACE");
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

#ifdef __linux__
using clock = std::chrono::steady_clock;

/// What the runs so far learnt the system allows: tried once, then kept.
enum class isolation : int { untried, pid, user_and_pid, refused };
std::atomic<isolation> allowed{isolation::untried};

/// errno of a clone(CLONE_NEWPID ...) the system refuses for as long as the
/// process lives: the process's privileges or the system's policy, which no
/// later run changes. EPERM: not privileged for a PID namespace alone, or
/// user namespaces refused (a seccomp filter, as in many containers;
/// kernel.unprivileged_userns_clone 0; a chroot). EINVAL: a kernel built
/// without PID or user namespaces. ENOSYS: no clone3 (before Linux 5.3).
/// EACCES: a security module's policy (SELinux). EUSERS: what kernels
/// before 4.9 said for nesting too deeply (32 user namespaces), which a
/// process cannot leave; they have no clone3 either.
bool lasting_refusal(int e) {
  return e == EPERM || e == EINVAL || e == ENOSYS || e == EACCES || e == EUSERS;
}

/// errno of a refusal that may pass. ENOSPC: the user's namespaces of the
/// kind alive at this moment reached user.max_pid_namespaces or
/// user.max_user_namespaces, many runs at once (each holds one until it
/// ends) or other programs of the user's; the count falls as they end. The
/// same errno means a limit set to 0 and a nesting too deep (32 levels),
/// which do not pass and cannot be told apart: each is retried after a
/// back-off that doubles with each refusal in a row (at most 32 s), so a
/// lasting one costs one failed clone, about a fork, every 32 s.
bool passing_refusal(int e) { return e == ENOSPC; }

/// The back-off: until when runs fall back without asking (steady clock
/// ticks; 0: they ask), and how many passing refusals came in a row.
std::atomic<clock::rep> paused_until{0};
std::atomic<int> refused_in_a_row{0};
constexpr auto first_pause = std::chrono::milliseconds(250);
constexpr int most_doublings = 7;  // 250 ms * 2^7 = 32 s

bool paused() {
  const auto until = paused_until.load(std::memory_order_relaxed);
  return until != 0 && clock::now().time_since_epoch().count() < until;
}

/// After a passing refusal. Refusals of runs that asked at the same moment
/// (before the pause began) do not lengthen it: the first to swap the
/// pause's end (to "for ever", for the moment) doubles it.
void pause_after_refusal() {
  const auto now = clock::now();
  auto until = paused_until.load();
  if (until != 0 && now.time_since_epoch().count() < until) return;
  if (!paused_until.compare_exchange_strong(until, std::numeric_limits<clock::rep>::max())) return;
  const int doublings = std::min(refused_in_a_row.fetch_add(1), most_doublings);
  paused_until.store((now + first_pause * (1 << doublings)).time_since_epoch().count());
}

/// After a namespace was granted: the next refusal pauses for the first
/// pause again. Written only when there is something to reset (the runs
/// that share these counters then only read them).
void granted() {
  if (refused_in_a_row.load(std::memory_order_relaxed) != 0) refused_in_a_row.store(0);
  if (paused_until.load(std::memory_order_relaxed) != 0) paused_until.store(0);
}

/// refuse_next_namespaces: how many clones are still to fail, and how.
std::atomic<int> refusals_to_inject{0};
std::atomic<int> injected_errno{0};

/// Whether this clone is one a test asked to fail (errno set).
bool injected_refusal() {
  if (!take_one(refusals_to_inject)) return false;
  errno = injected_errno.load();
  return true;
}

/// fork with namespaces: clone3 with no stack of its own, so the child goes
/// on from here on its copy of this thread's stack, as after fork (no atfork
/// handler runs). -1 with ENOSYS where the kernel (before 5.3) or the
/// headers have no clone3.
pid_t clone_into(std::uint64_t namespaces) {
  if (injected_refusal()) return -1;
#ifdef SYS_clone3
  struct {
    std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  } args{namespaces, 0, 0, 0, SIGCHLD, 0, 0, 0};  // struct clone_args, its first version
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
#else
  (void)namespaces;
  errno = ENOSYS;
  return -1;
#endif
}
#endif

}  // namespace

pid_t start_supervisor(launch& plan) {
#ifdef __linux__
  if (!namespaces_turned_off() && allowed.load() != isolation::refused && !paused()) {
    // A process that is not dumpable cannot write its own /proc/self/uid_map
    // (its /proc files are root's): no user namespace for its runs.
    const bool may_map = ::prctl(PR_GET_DUMPABLE, 0L, 0L, 0L, 0L) == 1;
    plan.uid = static_cast<unsigned>(::getuid());
    plan.gid = static_cast<unsigned>(::getgid());
    bool alone_refused = false;  // a PID namespace alone, for good
    for (const bool user : {false, true}) {
      if ((!user && allowed.load() == isolation::user_and_pid) || (user && !may_map)) continue;
      plan.pid_namespace = true;
      plan.user_namespace = user;
      const pid_t pid = clone_into(CLONE_NEWPID | (user ? CLONE_NEWUSER : 0));
      if (pid == 0) return 0;
      if (pid > 0) {
        allowed.store(user ? isolation::user_and_pid : isolation::pid);
        granted();
        return pid;
      }
      // A PID namespace in a user namespace counts against the same limit:
      // not asked for after a passing refusal of one alone.
      if (passing_refusal(errno)) {
        pause_after_refusal();
        break;
      }
      if (!lasting_refusal(errno)) break;  // EAGAIN, ENOMEM: a fork would fail too
      if (user)
        allowed.store(isolation::refused);
      else
        alone_refused = true;
    }
    if (!may_map && alone_refused && allowed.load() == isolation::untried)
      allowed.store(isolation::refused);
  }
  plan.pid_namespace = false;
  plan.user_namespace = false;
#endif
  plan.parent = static_cast<int>(::getpid());
  return ::fork();
}

void refuse_namespaces_for_good() {
#ifdef __linux__
  allowed.store(isolation::refused);
#endif
}

bool take_one(std::atomic<int>& left) {
  int now = left.load(std::memory_order_relaxed);
  while (now > 0 && !left.compare_exchange_weak(now, now - 1)) {
  }
  return now > 0;
}

void refuse_next_namespaces(int error, int count) {
#ifdef __linux__
  injected_errno.store(error);
  refusals_to_inject.store(count);
#else
  (void)error;
  (void)count;
#endif
}

}  // namespace tessel::detail
