// namespaces.hpp: how run_process (process.cpp) starts a run's supervisor:
// cloned as the init of a PID namespace of its own where the system allows
// one, else forked; and what the runs so far learnt the system allows, kept
// for the process. Private to the command backend.
#pragma once

#include "command/supervisor.hpp"

#include <atomic>

#include <sys/types.h>

namespace tessel::detail {

/// Forks the run's supervisor: as the init of a new PID namespace
/// (CLONE_NEWPID, as root; else CLONE_NEWUSER | CLONE_NEWPID) where the
/// system allows one, else as a plain fork. Sets plan's pid_namespace,
/// user_namespace and parent to what it got; returns as fork does: the
/// supervisor's pid, 0 in the supervisor, -1 (errno) when it could not start
/// one.
pid_t start_supervisor(launch& plan);

/// No namespace for the rest of the process: a supervisor could not map
/// tessel's uid in its user namespace (a refusal that does not pass).
void refuse_namespaces_for_good();

/// For tests only (tests/backends/namespace_test.cpp): the next `count`
/// clones into namespaces fail with errno `error` without asking the
/// kernel, as a system that refuses them would; the rest of
/// start_supervisor is as with a real refusal.
void refuse_next_namespaces(int error, int count);

/// For the test hooks (here and in process.cpp): takes one of the `left` a
/// test asked for; whether there was one.
bool take_one(std::atomic<int>& left);

}  // namespace tessel::detail
