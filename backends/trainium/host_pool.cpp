// host_pool.cpp: compile slots and NeuronCore leases over hosts (host_pool.hpp).
#include "trainium/host_pool.hpp"

namespace tessel::detail {

host_pool::host_pool(std::vector<std::string> destinations, std::size_t cores,
                     std::size_t compile_jobs)
    : compile_jobs_(compile_jobs == 0 ? 1 : compile_jobs) {
  if (destinations.empty()) destinations.emplace_back();
  for (auto& d : destinations)
    hosts_.push_back(host{std::move(d), false, 0, std::vector<bool>(cores == 0 ? 1 : cores)});
}

std::string host_pool::destination(int h) const {
  if (h < 0 || static_cast<std::size_t>(h) >= hosts_.size()) return {};
  return hosts_[static_cast<std::size_t>(h)].destination;
}

int host_pool::acquire_compile() {
  std::unique_lock lock(mutex_);
  for (;;) {
    int best = -1;
    bool any_live = false;
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
      const auto& h = hosts_[i];
      if (h.lost) continue;
      any_live = true;
      if (h.compiling >= compile_jobs_) continue;
      if (best < 0 || h.compiling < hosts_[static_cast<std::size_t>(best)].compiling)
        best = static_cast<int>(i);
    }
    if (!any_live) return -1;
    if (best >= 0) {
      ++hosts_[static_cast<std::size_t>(best)].compiling;
      return best;
    }
    changed_.wait(lock);
  }
}

void host_pool::release_compile(int h) {
  {
    const std::lock_guard lock(mutex_);
    --hosts_[static_cast<std::size_t>(h)].compiling;
  }
  changed_.notify_all();
}

std::optional<host_pool::core_lease> host_pool::acquire_core(int h) {
  std::unique_lock lock(mutex_);
  auto& entry = hosts_[static_cast<std::size_t>(h)];
  for (;;) {
    if (entry.lost) return std::nullopt;
    for (std::size_t c = 0; c < entry.busy.size(); ++c)
      if (!entry.busy[c]) {
        entry.busy[c] = true;
        return std::optional<core_lease>(std::in_place, this, h, static_cast<int>(c));
      }
    changed_.wait(lock);
  }
}

void host_pool::release_core(int h, int core) {
  {
    const std::lock_guard lock(mutex_);
    hosts_[static_cast<std::size_t>(h)].busy[static_cast<std::size_t>(core)] = false;
  }
  changed_.notify_all();
}

host_pool::core_lease::~core_lease() {
  if (pool != nullptr) pool->release_core(host, core);
}

void host_pool::mark_lost(int h) {
  {
    const std::lock_guard lock(mutex_);
    hosts_[static_cast<std::size_t>(h)].lost = true;
  }
  changed_.notify_all();
}

std::vector<std::string> host_pool::lost() const {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& h : hosts_)
    if (h.lost) out.push_back(h.destination.empty() ? "localhost" : h.destination);
  return out;
}

}  // namespace tessel::detail
