#include "backend_fixtures.hpp"

#include <chrono>
#include <csignal>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>
#include <cerrno>

namespace tessel::testing {

space small_space() {
  space::definition def;
  def.name = "small";
  parameter tile;
  tile.name = "tile_m";
  tile.dom.kind = param_kind::integer;
  tile.dom.values = {32, 64, 128};
  def.parameters.push_back(tile);

  parameter order;
  order.name = "order";
  order.dom.kind = param_kind::permutation;
  order.dom.labels = {"m", "n", "k"};
  order.dom.values = {0, 1, 2, 3, 4, 5};
  for (const auto& e : order.dom.labels) order.dom.element_ids.push_back(def.intern(e));
  def.parameters.push_back(order);

  parameter fast;
  fast.name = "fast";
  fast.dom.kind = param_kind::boolean;
  fast.dom.values = {0, 1};
  def.parameters.push_back(fast);

  parameter kind;
  kind.name = "kind";
  kind.dom.kind = param_kind::symbol;
  for (const std::string name : {"alpha", "beta"}) {
    kind.dom.values.push_back(def.intern(name));
    kind.dom.labels.push_back(name);
  }
  def.parameters.push_back(kind);

  parameter depth;
  depth.name = "depth";
  depth.dom.kind = param_kind::integer;
  depth.dom.values = {2, 3};
  depth.when = make_op(expr_op::equal,
                       {make_param(2, value_type::boolean), make_literal(1, value_type::boolean)});
  def.parameters.push_back(depth);
  return space(std::move(def));
}

config small_config(const space& s, std::int64_t tile_m, const std::string& order, bool fast,
                    const std::string& kind, std::int64_t depth) {
  for (const auto& c : s.configs()) {
    if (s.integer(c, "tile_m") != tile_m || s.value_of(c, "fast").integer != (fast ? 1 : 0))
      continue;
    if (s.value_of(c, "kind").symbol != kind) continue;
    std::string text;
    for (const auto& e : s.value_of(c, "order").order) text += (text.empty() ? "" : ",") + e;
    if (text != order) continue;
    const auto d = s.value_of(c, "depth");
    if (d.active && d.integer != depth) continue;
    return c;
  }
  throw std::runtime_error("small_config: no such config");
}

std::string helper_program() { return TESSEL_SOURCE_DIR "/tests/backends/programs/helper.sh"; }

std::filesystem::path bench_file(const std::string& name) {
  return std::filesystem::path(TESSEL_DATA_DIR) / "bench" / name;
}

std::string last_job_pid(const std::filesystem::path& file) {
  return "read -r self _ < /proc/self/stat; read -r jobs < /proc/$self/task/$self/children; "
         "echo ${jobs##* } > '" +
         file.string() + "'";
}

pid_t read_pid(const std::filesystem::path& file) {
  std::ifstream in(file);
  pid_t pid = -1;
  in >> pid;
  return in ? pid : -1;
}

namespace {

bool zombie(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

bool process_gone(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if ((::kill(pid, 0) != 0 && errno == ESRCH) || zombie(pid)) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace tessel::testing
