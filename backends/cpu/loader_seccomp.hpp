// loader_seccomp.hpp: the seccomp filter the loader's kernel process
// installs before it loads the kernel (docs/gate.md, "Round thirteen"), so
// that the kernel cannot create processes (whose CPU time the CPU rule does
// not count), run another program in its place, or reach another process's
// memory (its timing parent's, as root). Part of the loader's source:
// embed.cmake writes it in place of its #include, so the loader is still
// built from one file.
//
// Refused: fork, vfork, clone without CLONE_THREAD, execve, execveat,
// ptrace, process_vm_readv, process_vm_writev and pidfd_getfd (round
// thirteen); rt_sigaction that sets a new action for SIGSYS, so the handler
// that records refusals stays the loader's (round fourteen), or for SIGSEGV,
// so a SIGSYS that cannot be delivered ends the process (round seventeen);
// adjtimex, clock_adjtime, clock_settime and settimeofday, by which a kernel
// running as root slowed CLOCK_MONOTONIC, the timing parent's clock (round
// fourteen); kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo and
// prlimit64 aimed at another process than its own, and pidfd_send_signal
// (round fifteen). They fail with EPERM, and the refusal is reported to the
// timing parent at once (a SIGSYS handler, see `refused`), so the loader
// answers "suspicious" with the call's name (a call made with SIGSYS
// blocked, as posix_spawn makes its clone, ends the process by SIGSYS
// instead: also "suspicious", see `killed`); clone3 fails with ENOSYS,
// unrecorded (its flags are behind a pointer a filter cannot read; glibc
// then makes its threads with clone, whose flags it can). Threads
// (clone with CLONE_THREAD) are allowed: their CPU time is the process's.
// A system call of another ABI than the loader's (i386's int 0x80, x32's
// numbers on x86_64) is refused the same way, since the numbers above would
// not match it. Before the filter, the process gives up every capability
// (drop_capabilities: round thirteen gave up CAP_SYS_PTRACE, so that a kernel
// running as root could not open its parent's memory or files through /proc;
// round fifteen gives up the rest), and where it is root it first becomes
// another user (become_user, round sixteen: root's files and processes).
//
// Hand-written BPF from the kernel's headers, not libseccomp: the loader is
// compiled on the user's machine at run time, where libseccomp's headers
// and library would then be needed too, for a filter of twenty
// instructions. On an architecture the filter does not know (anything but
// x86_64 and aarch64), or on a system that refuses filters, the loader
// refuses to run a kernel, unless TESSEL_CPU_SECCOMP=off is in its
// environment (the protection of round twelve only: docs/cpu.md).
#pragma once

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

namespace {

namespace seccomp {

#if defined(__x86_64__)
constexpr unsigned arch = AUDIT_ARCH_X86_64;
constexpr const char* arch_name = "x86_64";
#elif defined(__aarch64__) && defined(__AARCH64EL__)
constexpr unsigned arch = AUDIT_ARCH_AARCH64;
constexpr const char* arch_name = "aarch64";
#else
constexpr unsigned arch = 0;  ///< none known: no filter (the loader refuses, or is told not to)
constexpr const char* arch_name = "";
#endif

/// The system call a kernel's process was refused first (0: none), set by
/// `refused` (so from a signal handler, in any of its threads) once its
/// report is written.
volatile std::sig_atomic_t refused_call = 0;
/// Where `refused` reports a refusal the moment it is made: the kernel's
/// process's reply channel to its timing parent (install's `report`); -1:
/// nowhere.
int report_channel = -1;
/// Set by the first refusal's handler, which alone reports.
int refusal_taken = 0;
/// The first refusal's ABI (set when it was another's than the loader's)
/// and first argument, and whether its report was written whole.
volatile std::sig_atomic_t refused_foreign = 0, refused_signal = 0, reported = 0;

/// What a refused call would have done, for the message; `signal`:
/// rt_sigaction's first argument.
const char* refused_what(long nr, long signal) {
  if (nr == SYS_rt_sigaction && signal == SIGSEGV)
    return "set an action for SIGSEGV (rt_sigaction), by which a refused call whose SIGSYS "
           "cannot be delivered would go unrecorded";
  struct named {
    long nr;
    const char* what;
  };
  static const named calls[] = {
#ifdef SYS_fork
      {SYS_fork, "create a process (fork)"},
#endif
#ifdef SYS_vfork
      {SYS_vfork, "create a process (vfork)"},
#endif
      {SYS_clone, "create a process (clone without CLONE_THREAD)"},
      {SYS_execve, "run a program in its place (execve)"},
#ifdef SYS_execveat
      {SYS_execveat, "run a program in its place (execveat)"},
#endif
      {SYS_ptrace, "reach another process (ptrace)"},
      {SYS_kill, "signal another process (kill)"},
      {SYS_tkill, "signal another process (tkill)"},
      {SYS_tgkill, "signal another process (tgkill)"},
      {SYS_rt_sigqueueinfo, "signal another process (rt_sigqueueinfo)"},
      {SYS_rt_tgsigqueueinfo, "signal another process (rt_tgsigqueueinfo)"},
      {SYS_prlimit64, "change another process's limits (prlimit64)"},
#ifdef SYS_pidfd_send_signal
      {SYS_pidfd_send_signal, "signal a process by its pidfd (pidfd_send_signal)"},
#endif
      {SYS_rt_sigaction, "replace the loader's SIGSYS handler (rt_sigaction)"},
#ifdef SYS_adjtimex
      {SYS_adjtimex, "change the system clock (adjtimex)"},
#endif
      {SYS_clock_adjtime, "change the system clock (clock_adjtime)"},
      {SYS_clock_settime, "change the system clock (clock_settime)"},
      {SYS_settimeofday, "change the system clock (settimeofday)"},
#ifdef SYS_process_vm_readv
      {SYS_process_vm_readv, "read another process's memory (process_vm_readv)"},
      {SYS_process_vm_writev, "write another process's memory (process_vm_writev)"},
#endif
#ifdef SYS_pidfd_getfd
      {SYS_pidfd_getfd, "take another process's files (pidfd_getfd)"},
#endif
  };
  for (const auto& c : calls)
    if (c.nr == nr) return c.what;
  return "make a system call a kernel's process may not make";
}

/// Appends `text` to `out` (`size` bytes, `n` used), as much as fits, and
/// ends it with a 0: async-signal-safe, as `refused` needs.
void append(char* out, std::size_t size, std::size_t& n, const char* text) {
  for (; *text != 0 && n + 1 < size; ++text) out[n++] = *text;
  out[n] = 0;
}

/// The message for refused call `nr` (of another ABI than the loader's
/// when `foreign`; `signal`: its first argument), written to `out`: its
/// length. Async-signal-safe (no allocation), as `refused` needs.
std::size_t describe(char* out, std::size_t size, long nr, bool foreign, long signal) {
  std::size_t n = 0;
  append(out, size, n, "the kernel's process tried to ");
  if (foreign) {
    char digits[24] = {0};
    std::size_t d = sizeof digits - 1;
    const unsigned long magnitude =
        nr < 0 ? 0UL - static_cast<unsigned long>(nr) : static_cast<unsigned long>(nr);
    for (unsigned long v = magnitude; d == sizeof digits - 1 || v != 0; v /= 10)
      digits[--d] = static_cast<char>('0' + v % 10);
    if (nr < 0) digits[--d] = '-';
    append(out, size, n, "make a system call of another ABI than the loader's (number ");
    append(out, size, n, digits + d);
    append(out, size, n, ")");
  } else {
    append(out, size, n, refused_what(nr, signal));
  }
  append(out, size, n,
         ", which a kernel may not: it was refused (docs/gate.md, \"Round thirteen\" to \"Round "
         "seventeen\")");
  return n;
}

/// The message for the first refusal (refused_call not 0).
std::string refusal() {
  char text[1024];
  describe(text, sizeof text, refused_call, refused_foreign != 0, refused_signal);
  return text;
}

/// The SIGSYS the filter raises for a refused call (SECCOMP_RET_TRAP): the
/// call returns -EPERM to its caller, as a refused call would, and the first
/// refusal is reported to the timing parent at once ('s' and its message,
/// one write, as `fail` writes a failure), so a kernel that clears the
/// record or ends its process after the refusal cannot take it back; the
/// loader ends the process after the kernel's call (serve; answering with
/// `refusal()` there where the report could not be written). A kernel may not
/// install a SIGSYS handler of its own: that is a refused call (round
/// fourteen); one that blocks or ignores SIGSYS is killed by it. One that
/// makes the call where its SIGSYS cannot be delivered (its stack pointer at
/// an unmapped page) gets the SIGSEGV Linux forces instead, which ends it:
/// its own SIGSEGV handler is a refused call (round seventeen).
void refused(int, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  if (__atomic_exchange_n(&refusal_taken, 1, __ATOMIC_ACQ_REL) == 0) {
    const long nr = info->si_syscall != 0 ? info->si_syscall : -1;
#if defined(__x86_64__)
    const long signal = static_cast<int>(uc->uc_mcontext.gregs[REG_RDI]);  // the low word
#elif defined(__aarch64__)
    const long signal = static_cast<int>(uc->uc_mcontext.regs[0]);
#else
    const long signal = 0;
#endif
    char report[1024] = {'s'};
    const std::size_t n = 1 + describe(report + 1, sizeof report - 1, nr,
                                       static_cast<unsigned>(info->si_arch) != arch, signal);
    reported = report_channel >= 0 && ::write(report_channel, report, n) == static_cast<ssize_t>(n);
    refused_foreign = static_cast<unsigned>(info->si_arch) != arch;
    refused_signal = static_cast<std::sig_atomic_t>(signal);
    refused_call = static_cast<std::sig_atomic_t>(nr);  // after the report: serve ends the process
  }
#if defined(__x86_64__)
  uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
  uc->uc_mcontext.regs[0] = static_cast<unsigned long long>(-EPERM);
#else
  (void)uc;
#endif
}

sock_filter statement(unsigned code, unsigned k) {
  return {static_cast<unsigned short>(code), 0, 0, k};
}
sock_filter jump(unsigned code, unsigned k, unsigned char if_true, unsigned char if_false) {
  return {static_cast<unsigned short>(code), if_true, if_false, k};
}

/// The message for a kernel's process that SIGSYS ended: a refused call
/// made with SIGSYS blocked (posix_spawn blocks every signal around its
/// clone: system and popen use it), which the kernel forces on it.
constexpr const char* killed =
    "the kernel's process was killed by SIGSYS: it made a system call a kernel may not (to create "
    "a process, run a program, reach or signal another process or change the system clock; "
    "posix_spawn, "
    "system and popen block SIGSYS around theirs), which was refused (docs/gate.md, \"Round "
    "thirteen\")";

/// The filter for the process `self` (its pid): `refused` for every call
/// above, ENOSYS for clone3, any other call allowed. (The machines it knows
/// are little-endian: an argument's low word is at its offset, its high word
/// 4 bytes on.)
std::vector<sock_filter> program(pid_t self) {
  const sock_filter trap = statement(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
  std::vector<sock_filter> p{
      statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      jump(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
      trap,
      statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
#if defined(__x86_64__)
  p.push_back(jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));  // x32's numbers
  p.push_back(trap);
#endif
  const auto refuse = [&p](long nr, const sock_filter& how) {
    p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 1));
    p.push_back(how);
  };
  for (const long nr : {
#ifdef SYS_fork
           static_cast<long>(SYS_fork),
#endif
#ifdef SYS_vfork
           static_cast<long>(SYS_vfork),
#endif
#ifdef SYS_execveat
           static_cast<long>(SYS_execveat),
#endif
#ifdef SYS_process_vm_readv
           static_cast<long>(SYS_process_vm_readv), static_cast<long>(SYS_process_vm_writev),
#endif
#ifdef SYS_pidfd_getfd
           static_cast<long>(SYS_pidfd_getfd),
#endif
#ifdef SYS_adjtimex
           static_cast<long>(SYS_adjtimex),
#endif
           static_cast<long>(SYS_clock_adjtime), static_cast<long>(SYS_clock_settime),
           static_cast<long>(SYS_settimeofday), static_cast<long>(SYS_execve),
           static_cast<long>(SYS_ptrace)})
    refuse(nr, trap);
  const sock_filter allow = statement(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  const auto word = [](int arg, int high) {
    return statement(BPF_LD | BPF_W | BPF_ABS,
                     static_cast<unsigned>(offsetof(seccomp_data, args) + 8 * arg + 4 * high));
  };
  // A signal to its own process only (round fifteen): the first argument
  // of each (a pid, a thread group, a thread: its low word, as the kernel
  // reads a pid_t) is its own pid. glibc's raise, abort and pthread_kill
  // send tgkill(getpid(), tid). Uid 0 without capabilities may signal every
  // process of root's (tessel, another run) where a run has no PID
  // namespace, and its timing parent where it has one.
  // So are prlimit64's limits, whose pid may also be 0 (itself: glibc's
  // getrlimit and setrlimit): a process of the same uid and gid may lower
  // another's (RLIMIT_CPU below the CPU time it has used kills it by
  // SIGXCPU, RLIMIT_NOFILE at 0 fails its every open).
  const auto own = [&](long nr, bool or_zero) {
    p.insert(p.end(),
             {jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), 0, 5), word(0, 0),
              jump(BPF_JMP | BPF_JEQ | BPF_K, 0, or_zero ? 1 : 0, 0),
              jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(self), 0, 1), allow, trap});
  };
  for (const long nr :
       {static_cast<long>(SYS_kill), static_cast<long>(SYS_tkill), static_cast<long>(SYS_tgkill),
        static_cast<long>(SYS_rt_sigqueueinfo), static_cast<long>(SYS_rt_tgsigqueueinfo)})
    own(nr, false);
  own(SYS_prlimit64, true);
#ifdef SYS_pidfd_send_signal
  refuse(SYS_pidfd_send_signal, trap);  // a pidfd names another process, or its own
#endif
  // rt_sigaction that sets SIGSYS's or SIGSEGV's action (its signal's low
  // word, as the kernel reads an int; a new action: args[1] not NULL): the
  // handler that records refusals stays the loader's, and the SIGSEGV Linux
  // forces when it cannot deliver a SIGSYS (a stack pointer at an unmapped
  // page) takes its default action, the process's end. Reading is allowed.
  p.insert(p.end(), {jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(SYS_rt_sigaction), 0, 9),
                     word(0, 0), jump(BPF_JMP | BPF_JEQ | BPF_K, SIGSYS, 1, 0),
                     jump(BPF_JMP | BPF_JEQ | BPF_K, SIGSEGV, 0, 5), word(1, 0),
                     jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 2), word(1, 1),
                     jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), trap, allow});
#ifdef SYS_clone3
  refuse(SYS_clone3, statement(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)));
#endif
  // clone: a thread (CLONE_THREAD, in the low word of its flags) is allowed.
  p.push_back(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(SYS_clone), 0, 3));
  p.push_back(statement(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  p.push_back(jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0));
  p.push_back(trap);
  p.push_back(allow);
  return p;
}

/// Whether the loader's environment turns the filter off (TESSEL_CPU_SECCOMP=off).
bool turned_off() {
  const char* v = std::getenv("TESSEL_CPU_SECCOMP");  // NOLINT(concurrency-mt-unsafe)
  return v != nullptr && std::strcmp(v, "off") == 0;
}

/// The first step of giving up root's rights (serve calls it before
/// become_user, whose change of uid clears CAP_SETPCAP, and
/// drop_capabilities): RLIMIT_RTPRIO and RLIMIT_NICE to 0, and the bounding
/// set emptied while CAP_SETPCAP is still held.
void drop_bounding_set() {
  const rlimit none{0, 0};
  (void)::setrlimit(RLIMIT_RTPRIO, &none);
  (void)::setrlimit(RLIMIT_NICE, &none);
  // EINVAL past the last capability the system knows, EPERM without
  // CAP_SETPCAP (none to drop).
  for (unsigned long cap = 0; cap < 64 && ::prctl(PR_CAPBSET_DROP, cap, 0L, 0L, 0L) == 0; ++cap) {
  }
}

/// Makes the calling process (the kernel's, before the kernel is loaded)
/// user `uid` and group `gid`, no supplementary groups, when it runs as uid
/// 0 (docs/gate.md, "Round sixteen"; docs/cpu.md, "The kernel's user"):
/// without a capability, uid 0 still owns root's files (the study, the
/// cache) and may renice or re-pin root's processes; another uid owns
/// neither. Nothing it needs after is opened by a path root alone may open:
/// its tensors are mapped and its pipes open, and its library is a memfd
/// anyone may open through /proc/self/fd. Linux clears the parent-death
/// signal when the uid changes, so it is set again here, and the process
/// ends if its parent is already gone. `uid` < 0 (no --kernel-user: root
/// kept, or tessel is not root), or a process that is not uid 0 (a user's,
/// already unprivileged): nothing to do, "". Else "" when it is the user,
/// or why not. After drop_bounding_set.
std::string become_user(long uid, long gid) {
  if (uid < 0 || ::geteuid() != 0) return {};
  const pid_t parent = ::getppid();
  const auto why = [uid, gid](const char* call) {
    return std::string("cannot become the kernel's user ") + std::to_string(uid) + ":" +
           std::to_string(gid) + " (" + call + ": " + std::strerror(errno) +
           "; cpu setting kernel_user chooses another, kernel_user=root keeps uid 0)";
  };
  if (::setgroups(0, nullptr) != 0) return why("setgroups");
  if (::setresgid(static_cast<gid_t>(gid), static_cast<gid_t>(gid), static_cast<gid_t>(gid)) != 0)
    return why("setresgid");
  if (::setresuid(static_cast<uid_t>(uid), static_cast<uid_t>(uid), static_cast<uid_t>(uid)) != 0)
    return why("setresuid");
  uid_t r = 0, e = 0, s = 0;
  if (::getresuid(&r, &e, &s) != 0 || r != static_cast<uid_t>(uid) || e != r || s != r)
    return "the kernel's process is not its user after becoming it";
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);        // cleared by the change
  if (::getppid() != parent) std::_Exit(0);  // the parent went before it was set again
  return {};
}

/// Gives up every capability the calling process holds (effective,
/// permitted, inheritable, ambient; the bounding set was emptied by
/// drop_bounding_set), and sets PR_SET_NO_NEW_PRIVS, so no program it runs gets any back
/// (docs/gate.md, "Round fifteen"). A kernel run by root kept them all but
/// CAP_SYS_PTRACE until then: it made itself real-time (CAP_SYS_NICE), killed
/// any process (CAP_KILL), wrote, chmod'ed and chown'ed any file
/// (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN), and as round thirteen found,
/// opened its timing parent's memory and files through /proc
/// (CAP_SYS_PTRACE), which no filter of system calls can refuse. Its
/// RLIMIT_RTPRIO and RLIMIT_NICE go to 0 first, hard limits too (raising
/// them back needs CAP_SYS_RESOURCE): a system may set them (limits.conf's
/// rtprio) to let a process without CAP_SYS_NICE make itself real-time or
/// raise its priority. Nothing the kernel's process does after the fork
/// needs a capability: its tensors are mapped and its pipes open before it,
/// and the kernel's library is opened through /proc/self/fd. A process
/// without capabilities (a user who is not root) has none to give up: ""
/// then too. "" when none is left, else why not. After drop_bounding_set
/// (the bounding set and the limits) and become_user.
std::string drop_capabilities() {
  (void)::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0L, 0L, 0L);  // EINVAL before Linux 4.3
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capset, &header, data) != 0)
    return std::string("cannot give up its capabilities: ") + std::strerror(errno);
  if (::syscall(SYS_capget, &header, data) != 0)
    return std::string("cannot read its capabilities: ") + std::strerror(errno);
  for (const auto& word : data)
    if (word.effective != 0 || word.permitted != 0 || word.inheritable != 0)
      return "its capabilities are still held after giving them up";
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0)
    return std::string("PR_SET_NO_NEW_PRIVS failed: ") + std::strerror(errno);
  return {};
}

/// Installs the filter in the calling process (the kernel's, single
/// threaded: its threads inherit it), after drop_capabilities (whose
/// PR_SET_NO_NEW_PRIVS lets a process that is not root install one),
/// refusals reported on `report` (the reply channel to the timing parent):
/// "" when it is in place, else why not.
std::string install(int report) {
  report_channel = report;
  if (arch == 0)
    return "this loader has no seccomp filter for its architecture (x86_64 and aarch64 have one)";
  struct sigaction action {};
  action.sa_sigaction = refused;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGSYS, &action, nullptr) != 0)
    return std::string("cannot handle SIGSYS: ") + std::strerror(errno);
  std::vector<sock_filter> p = program(::getpid());
  sock_fprog prog{static_cast<unsigned short>(p.size()), p.data()};
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0L, 0L) != 0)
    return std::string("the system refused the seccomp filter: ") + std::strerror(errno);
  return {};
}

}  // namespace seccomp

}  // namespace
