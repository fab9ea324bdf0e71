// class19_test.cpp: round fifteen (docs/gate.md, "Round fifteen: what a
// kernel run by root can still do"). Until this round the cpu loader's
// kernel process, run by root (every test here, CI, many containers), kept
// every capability but CAP_SYS_PTRACE: it could make itself real-time
// (CAP_SYS_NICE), kill a process of any user (CAP_KILL), and write, chmod
// and chown any file (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN). Now it gives
// up every capability before the kernel is loaded
// (backends/cpu/loader_seccomp.hpp). Round sixteen (docs/gate.md, "Round
// sixteen"): a root loader's kernel process also becomes another user
// (nobody, cpu_options::kernel_user), so uid 0's own rights (root's files,
// root's processes' priority and CPUs) go too. Each kernel is real
// (programs/process_kernels.cpp), compiled and run by the backend as a
// user's kernel is.
#include "process_run.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using tessel::status;
using namespace tessel::testing;

cpu_run run_cpu(const std::string& function,
                const std::map<std::string, std::string>& environment = {},
                const std::string& kernel_user = "nobody") {
  return run_told("tessel-class19", function, "-O1", environment, "off", kernel_user);
}

/// A user neither root nor the kernel's (nobody), whose process and file a
/// kernel must not reach.
constexpr int another_user = 4321;

/// A child of the test that waits to be killed, as `uid` (as_is: root),
/// holding no capability where `capless` (as a root tessel's kernel process
/// since round fifteen).
class victim {
 public:
  explicit victim(int uid, bool capless = false) {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (uid != as_is && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
                           ::setuid(static_cast<uid_t>(uid)) != 0))
        ::_exit(100);
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct none[2]{};
      if (capless && ::syscall(SYS_capset, &header, none) != 0) ::_exit(101);
      (void)!::write(ready[1], "r", 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);  // it is the user now
    ::close(ready[0]);
  }
  ~victim() {
    if (!reaped_) ::kill(pid_, SIGKILL);
    if (!reaped_) ::waitpid(pid_, nullptr, 0);
  }
  victim(const victim&) = delete;
  victim& operator=(const victim&) = delete;

  [[nodiscard]] std::string pid() const { return std::to_string(pid_); }
  [[nodiscard]] pid_t id() const { return pid_; }
  /// Its RLIMIT_NOFILE (soft).
  [[nodiscard]] rlim_t open_files() const {
    rlimit now{};
    REQUIRE(::prlimit(pid_, RLIMIT_NOFILE, nullptr, &now) == 0);
    return now.rlim_cur;
  }
  /// Whether SIGKILL ended it (a signal the kernel sent is long delivered
  /// when its run has ended).
  bool killed() {
    int status = 0;
    reaped_ = ::waitpid(pid_, &status, WNOHANG) == pid_;
    return reaped_ && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

/// Runs without a PID namespace while it lives (TESSEL_NO_PID_NAMESPACE=1),
/// so the kernel's pids are this machine's: a run in a namespace of its own
/// cannot name a process outside it (docs/gate.md, "A run's PID namespace").
struct no_pid_namespace {
  no_pid_namespace() { ::setenv("TESSEL_NO_PID_NAMESPACE", "1", 1); }
  ~no_pid_namespace() { ::unsetenv("TESSEL_NO_PID_NAMESPACE"); }
  no_pid_namespace(const no_pid_namespace&) = delete;
  no_pid_namespace& operator=(const no_pid_namespace&) = delete;
};

/// `function` run without a PID namespace, `target`'s pid in
/// $TESSEL_REDTEAM_VICTIM, checked refused for trying to `what` (never
/// logging `done`, logging `call` failing with EPERM: check_refused).
cpu_run refused_against(const victim& target, const std::string& function, const std::string& what,
                        const std::string& done, const std::string& call) {
  const no_pid_namespace machine_pids;
  cpu_run r = run_cpu(function, {{"TESSEL_REDTEAM_VICTIM", target.pid()}});
  check_refused(r, what, done, call);
  return r;
}

/// pk_files on a file of `uid`'s, mode 0600, in a folder of its own: the
/// run (its kernel as `kernel_user`), and whether the file is as it was
/// (empty, 0600, `uid`'s).
std::pair<cpu_run, bool> files_of(int uid, const std::string& kernel_user = "nobody") {
  const temp_folder folder("tessel-class19-file");
  const auto file = folder.file("theirs");
  std::ofstream(file).flush();
  REQUIRE(::chown(file.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) == 0);
  REQUIRE(::chmod(file.c_str(), 0600) == 0);
  std::filesystem::permissions(folder.path(), std::filesystem::perms::all);  // any kernel's way in
  cpu_run r = run_cpu("pk_files", {{"TESSEL_REDTEAM_FILE", file.string()}}, kernel_user);
  struct stat after {};
  REQUIRE(::stat(file.c_str(), &after) == 0);
  const bool untouched = after.st_size == 0 && (after.st_mode & 07777) == 0600 &&
                         after.st_uid == static_cast<uid_t>(uid);
  return {std::move(r), untouched};
}

/// files_of(`uid`): the kernel ok, each call refused (EACCES, EPERM,
/// EPERM), the file as it was.
void check_files_refused(int uid) {
  const auto [r, untouched] = files_of(uid);
  CHECK(r.m.ok());
  CHECK(untouched);
  CHECK(count(r.log, "open failed: Permission denied") > 0);
  CHECK(count(r.log, "chmod failed: Operation not permitted") > 0);
  CHECK(count(r.log, "chown failed: Operation not permitted") > 0);
}

bool root() {
  if (::geteuid() == 0) return true;
  MESSAGE("skipped: not root, so no capability to give up");
  return false;
}

}  // namespace

TEST_CASE("class 19: the kernel's process holds no capability") {
  // Before (53425e5), as root: CapEff, CapPrm and CapBnd were every
  // capability but CAP_SYS_PTRACE. Now all five sets are empty (the bounding
  // set too: root holds CAP_SETPCAP, which empties it).
  if (!root()) return;
  const cpu_run r = run_cpu("pk_caps");
  CHECK(r.m.ok());
  CHECK(filtered(r));
  const auto caps = starting(r.log, "caps ");  // one line a loader run
  REQUIRE(!caps.empty());
  MESSAGE("CapInh CapPrm CapEff CapBnd CapAmb: " << caps[0]);
  const std::string none = "0000000000000000";
  CHECK(count(caps, none + " " + none + " " + none + " " + none + " " + none) == caps.size());
  // Round sixteen: and it is nobody, of nobody's group, no other group.
  // Before (8201971): "Uid: 0 0 0 0 Gid: 0 0 0 0 Groups: 0".
  const auto ids = starting(r.log, "ids ");
  REQUIRE(!ids.empty());
  MESSAGE("ids: " << ids[0]);
  for (const auto& line : ids)
    CHECK(line.rfind("Uid: 65534 65534 65534 65534 Gid: 65534 65534 65534 65534 Groups: ", 0) == 0);
  for (const auto& line : ids)
    CHECK(line.find_first_not_of(' ', line.find("Groups:") + 7) == std::string::npos);
}

TEST_CASE("class 19: kernel_user chooses the kernel's user, and root keeps uid 0") {
  if (!root()) return;
  const auto ids_of = [](const std::string& user) {
    const cpu_run r = run_cpu("pk_caps", {}, user);
    CHECK(r.m.ok());
    return starting(r.log, "ids ");
  };
  const auto chosen = ids_of("4321:4322");
  REQUIRE(!chosen.empty());
  CHECK(chosen[0].rfind("Uid: 4321 4321 4321 4321 Gid: 4322 4322 4322 4322", 0) == 0);
  const auto kept = ids_of("root");  // weaker: round fifteen's rights only
  REQUIRE(!kept.empty());
  CHECK(kept[0].rfind("Uid: 0 0 0 0 Gid: 0 0 0 0", 0) == 0);
  tessel::cpu_options o;  // a name this system does not know: prepare says so
  o.kernel = redteam_kernel("twice_reference");
  o.reference = redteam_kernel("twice_reference");
  o.inputs = "x:N";
  o.outputs = "y:N";
  o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
  o.kernel_user = "no-such-user-of-tessel";
  tessel::cpu_backend b(o);
  CHECK_THROWS_WITH(b.prepare(tessel::parse_space("space t { const N = 64  param us : {1} }")),
                    doctest::Contains("kernel_user 'no-such-user-of-tessel' is no user"));
}

TEST_CASE("class 19: a kernel running as root cannot make itself real-time") {
  // Before: SCHED_FIFO and nice -20 (CAP_SYS_NICE), so no other load on its
  // CPU preempted its timed calls, while the honest kernel's were. Now both
  // fail (the loader also keeps RLIMIT_RTPRIO and RLIMIT_NICE at 0, which
  // would allow them without the capability); the kernel computes honestly
  // after and is ok, at its own time.
  if (!root()) return;
  const cpu_run r = run_cpu("pk_realtime");
  CHECK(r.m.ok());
  CHECK(count(r.log, "realtime") == 0);
  CHECK(count(r.log, "nice -20") == 0);
  CHECK(count(r.log, "sched_setscheduler failed: Operation not permitted") > 0);
  CHECK(count(r.log, "setpriority failed: Permission denied") > 0);
}

TEST_CASE("class 19: a kernel running as root cannot kill another user's process") {
  // Before (CAP_KILL): where a run has no PID namespace (the system refuses
  // one, or TESSEL_NO_PID_NAMESPACE), a kernel killed any process of the
  // machine: here a process of another user's (round fifteen used nobody's,
  // the kernel's own user since round sixteen). Without CAP_KILL its kill
  // fails (EPERM); the filter of the next case refuses it first, recorded.
  if (!root()) return;
  victim theirs(another_user);
  refused_against(theirs, "pk_kill", "signal another process (kill)", "killed", "kill");
  CHECK_FALSE(theirs.killed());
}

TEST_CASE("class 19: a kernel cannot kill a process of its own user's (root's: tessel's own)") {
  // Without capabilities, uid 0 may still signal every process of root's,
  // as any user may its own: where a run has no PID namespace, tessel's own,
  // another run's, this test's (before this round's filter: killed, and the
  // kernel ok), and in a namespace its timing parent. Now the filter lets
  // the kernel's process signal itself only (kill, raise still work there)
  // and records the try. (As root here, and as nobody in
  // scripts/test_nonroot.)
  victim ours(as_is);
  const cpu_run r =
      refused_against(ours, "pk_kill", "signal another process (kill)", "killed", "kill");
  CHECK(count(r.log, "signalled itself") > 0);
  CHECK_FALSE(ours.killed());
}

TEST_CASE("class 19: a kernel cannot lower the limits of a process of its own user's") {
  // A process of the same uid and gid may lower another's limits
  // (prlimit64): RLIMIT_CPU below the CPU time it has used kills it by
  // SIGXCPU, past the signal filter; RLIMIT_NOFILE at 3 fails its every
  // open (a study that can no longer write). Before: the victim's limit was
  // 3 after the run and the kernel ok. Now prlimit64 of another process is
  // refused and recorded; its own limits (pid 0) it still sets. (As root
  // here, and as nobody in scripts/test_nonroot.)
  victim ours(as_is);
  const cpu_run r = refused_against(ours, "pk_limit", "change another process's limits (prlimit64)",
                                    "limited", "prlimit");
  CHECK(count(r.log, "limited itself") > 0);
  CHECK(ours.open_files() > 3);
}

TEST_CASE("class 19: a kernel running as root cannot write, chmod or chown another user's file") {
  // Before: it appended to a file of another user's, mode 0600
  // (CAP_DAC_OVERRIDE), made it 0666 (CAP_FOWNER) and root's (CAP_CHOWN).
  // Now each fails and the file is as it was.
  if (!root()) return;
  check_files_refused(another_user);
}

TEST_CASE("class 19: a kernel of a root without CAP_SYS_PTRACE cannot read tessel's memory") {
  // Root in a container is often root without CAP_SYS_PTRACE (Docker's
  // default set), as the tests that play a user make themselves
  // (as_a_user). Before, the kernel's capabilities (all but CAP_SYS_PTRACE)
  // covered tessel's, and Linux lets a process of the same uid open the
  // /proc/PID/mem and /proc/PID/fd of one whose capabilities its own cover:
  // rt_peek read tessel's memory from every loader process (23 of 23), the
  // token of every run in it. Now an empty set covers none: denied in every
  // one. A forked child gives up CAP_SYS_PTRACE, so the test runner keeps it.
  // The kernel keeps uid 0 (kernel_user=root), tessel's uid as a real
  // user's kernel has it: as nobody (round sixteen) it would be denied for
  // its uid alone, and this would not test the capability rule.
  if (!root()) return;
  CHECK(exit_code_as_user(as_is, [] {
          if (!as_a_user()) return 10;
          tessel::cpu_options o;
          o.kernel = redteam_kernel("rt_peek");
          o.reference = redteam_kernel("twice_reference");
          o.cache_dir = test_dirs::work_dir(TESSEL_CPU_TEST_CACHE);
          o.run_timeout_s = 10;
          o.gate_settings.secret = 19;
          o.kernel_user = "root";
          const cpu_run r = run_twice(o, "tessel-class19");
          if (!r.m.ok()) return 11;
          if (count(r.log, "read tessel") != 0) return 12;
          return count(r.log, "denied tessel") > 0 ? 0 : 13;  // it ran, and tried
        }) == 0);
}

TEST_CASE("class 19: a kernel of a root tessel cannot write, chmod or chown root's files") {
  // Round fifteen's "what remains": uid 0 without capabilities owns what
  // root owns, the study file a CLI run is stored in (its path is in
  // tessel's command line, which every process may read), the cpu cache, a
  // file of root's 0600; no filter of system calls can tell those from the
  // kernel's own files. Before (8201971): the kernel wrote, chmod'ed and
  // chown'ed it, and was ok. Now its process is nobody (round sixteen):
  // EACCES, EPERM, EPERM, and the file is as it was.
  if (!root()) return;
  check_files_refused(0);
}

TEST_CASE("class 19: with kernel_user=root a kernel still writes root's files (weaker)") {
  // What a user who keeps uid 0 for its kernels (kernel_user=root) keeps:
  // round fifteen's "what remains".
  if (!root()) return;
  const auto [r, untouched] = files_of(0, "root");
  CHECK(r.m.ok());
  CHECK_FALSE(untouched);
  CHECK(count(r.log, "wrote the file") > 0);
  CHECK(count(r.log, "chmod the file") > 0);
}

TEST_CASE("class 19: a kernel of a root tessel cannot renice or re-pin root's processes") {
  // Uid 0 without capabilities may still lower the priority (setpriority to
  // nice 19) and change the CPUs (sched_setaffinity) of a process of root's
  // whose capabilities its own cover (Linux's commoncap: a target's
  // permitted set must be a subset of the caller's, else CAP_SYS_NICE):
  // tessel and the timing parent, which hold root's, were out of its reach
  // since round fifteen; every other root kernel process, which holds none
  // (another run's, timed beside it where runs have no PID namespace), was
  // not. Before (8201971): both worked on such a process (this test's
  // child), the kernel ok. Now the kernel is nobody: both EPERM, the process
  // as it was.
  if (!root()) return;
  victim ours(as_is, true);
  cpu_set_t before;
  REQUIRE(::sched_getaffinity(ours.id(), sizeof before, &before) == 0);
  errno = 0;
  const int nice =
      ::getpriority(PRIO_PROCESS, static_cast<id_t>(ours.id()));  // ctest's, under nice
  REQUIRE(errno == 0);
  const no_pid_namespace machine_pids;
  const cpu_run r = run_cpu("pk_renice", {{"TESSEL_REDTEAM_VICTIM", ours.pid()}});
  CHECK(r.m.ok());
  CHECK(count(r.log, "reniced") == 0);
  CHECK(count(r.log, "repinned") == 0);
  CHECK(count(r.log, "setpriority failed: Operation not permitted") > 0);
  CHECK(count(r.log, "sched_setaffinity failed: Operation not permitted") > 0);
  CHECK(::getpriority(PRIO_PROCESS, static_cast<id_t>(ours.id())) == nice);
  cpu_set_t after;
  REQUIRE(::sched_getaffinity(ours.id(), sizeof after, &after) == 0);
  CHECK(CPU_EQUAL(&before, &after));
}

TEST_CASE("class 19: a user who is not root has none to give up, and runs kernels as before") {
  // Giving up capabilities is not an error where there are none (a user who
  // is not root, whose run gets a user namespace of its own).
  CHECK(exit_code_as_nobody("tessel-class19-user", [](const std::string& cache) {
          const cpu_run r = run_process_kernel("tessel-class19", "pk_caps", "-O1", {}, cache);
          if (!r.m.ok() || !filtered(r)) return 11;
          const auto caps = starting(r.log, "caps ");
          if (caps.empty()) return 12;
          for (const auto& sets : caps)  // CapInh, CapPrm and CapEff empty
            if (sets.rfind("0000000000000000 0000000000000000 0000000000000000 ", 0) != 0)
              return 13;
          return 0;
        }) == 0);
}
