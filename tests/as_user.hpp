// Runs part of a test as another user: the tests run as root here, and what a
// user who is not root gets (a user namespace for each run, /proc files they
// may not open) is tested in a forked child that gives up root. The same
// child, staying root, keeps what a test must not do to the runner itself
// (unshare a namespace, turn a process-wide setting off) out of it.
#pragma once

#ifdef __linux__
#include <cstdio>
#include <exception>
#include <functional>

#include <doctest/doctest.h>

#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tessel::testing {

/// The user most systems have and no file belongs to.
inline constexpr int nobody = 65534;

/// As `uid` for exit_code_as_user: the child stays who the test runner is.
inline constexpr int as_is = -1;

/// Whether this process may become another user (it is root); says so
/// (a doctest message) when not, for a test that then skips.
inline bool may_become_another_user() {
  if (::geteuid() == 0) return true;
  MESSAGE("skipped: not root, so not able to become another user");
  return false;
}

/// Runs `body` in a forked child that has become `uid` (no supplementary
/// groups, gid `uid`) and made itself dumpable again, as a user's own
/// process is (giving up root made it not dumpable); with `uid` as_is, one
/// that stays as it is (for what must not touch the runner: a namespace
/// unshared, a process-wide setting changed). Returns the child's exit
/// code: what `body` returned; 100 when it could not become the user; 101
/// when `body` threw (the message on stderr); -1 when the child did not
/// exit. The child never returns into the test runner.
inline int exit_code_as_user(int uid, const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (uid != as_is) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
          ::setuid(static_cast<uid_t>(uid)) != 0)
        ::_exit(100);
      ::prctl(PR_SET_DUMPABLE, 1L, 0L, 0L, 0L);
    }
    try {
      ::_exit(body());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "as user %d: %s\n", uid, e.what());
    } catch (...) {
    }
    ::_exit(101);
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace tessel::testing
#endif
