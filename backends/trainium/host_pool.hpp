// host_pool.hpp: which host compiles next and which NeuronCore runs next.
// Each host has `compile_jobs` compile slots (its CPU cores) and
// `cores` NeuronCores; a core runs one candidate at a time, and compiles
// take no core, so they overlap device runs. A lost host takes no new work
// and wakes everyone waiting on it. Private to the trainium backend.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessel::detail {

class host_pool {
 public:
  /// The local machine, for work that never leaves it (the reference).
  static constexpr int local = -1;

  host_pool(std::vector<std::string> destinations, std::size_t cores, std::size_t compile_jobs);

  /// Hosts in the pool (1 when it is the local machine).
  [[nodiscard]] std::size_t size() const { return hosts_.size(); }
  /// The ssh destination of `host` ("" for the local machine or `local`).
  [[nodiscard]] std::string destination(int host) const;

  /// Waits for a compile slot on the live host with the fewest compiles
  /// running (ties: the lowest index). -1 when every host is lost.
  [[nodiscard]] int acquire_compile();
  void release_compile(int host);

  struct core_lease {
    host_pool* pool = nullptr;
    int host = 0, core = 0;
    core_lease(host_pool* p, int h, int c) : pool(p), host(h), core(c) {}
    core_lease(const core_lease&) = delete;
    core_lease& operator=(const core_lease&) = delete;
    core_lease(core_lease&& other) noexcept : pool(other.pool), host(other.host), core(other.core) {
      other.pool = nullptr;
    }
    core_lease& operator=(core_lease&&) = delete;
    ~core_lease();
  };
  /// Waits for a free NeuronCore of `host`; nullopt when the host is lost.
  [[nodiscard]] std::optional<core_lease> acquire_core(int host);

  /// Marks `host` lost (for the rest of the study).
  void mark_lost(int host);
  [[nodiscard]] std::vector<std::string> lost() const;

 private:
  struct host {
    std::string destination;
    bool lost = false;
    std::size_t compiling = 0;
    std::vector<bool> busy;  ///< per NeuronCore
  };
  void release_core(int host, int core);

  std::vector<host> hosts_;
  std::size_t compile_jobs_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
};

}  // namespace tessel::detail
