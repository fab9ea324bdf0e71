// fuzz_protocol: the JSON-lines protocol of `tessel serve` (docs/serve.md).
// Each input is a session: its lines are requests to a fresh study of a small
// space (integers, symbols, a permutation, a conditional parameter) with a
// backend that evaluates, the cost-aware scheduler and its Gaussian process,
// as `tessel serve --backend ...` runs. Every answer must be one line of valid
// JSON (UTF-8) with an "ok" field; anything else, a crash, a sanitizer report,
// a hang or an OOM is a finding.
#include <tessel/backends.hpp>
#include <tessel/bayesian.hpp>
#include <tessel/dsl.hpp>
#include <tessel/ops.hpp>
#include <tessel/strategies.hpp>
#include <tessel/study.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

constexpr std::string_view space_text = R"(space small {
  const N = 64
  param tile   : {8, 16, 32, 64}
  param unroll : 1 .. 4 = 2
  param order  : perm(m, n)
  param engine : {vector, scalar}
  require N % (tile * unroll) == 0   "tile * unroll must divide N"
  when engine == vector { param fuse : bool }
})";

const tessel::space& fuzz_space() {
  static const tessel::space s = tessel::parse_space(space_text);
  return s;
}

std::shared_ptr<tessel::backend> fuzz_backend() {
  return std::make_shared<tessel::callback_backend>([](const tessel::config& c) {
    return 1.0 + static_cast<double>(tessel::config_hash{}(c) % 97) / 10.0;
  });
}

tessel::study make_session(const std::shared_ptr<tessel::backend>& backend) {
  const auto& s = fuzz_space();
  tessel::study::options o;
  o.seed = 1;
  o.surrogate = tessel::make_gp_surrogate(s);
  o.costs = tessel::make_cost_model(s);
  return {s, backend, tessel::make_strategy("random"), std::move(o)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto backend = fuzz_backend();
  auto session_study = make_session(backend);
  tessel::agent_ops session_ops(session_study, backend, true);
  tessel::json_lines_session session(session_ops);
  while (!input.empty() && !session_ops.done()) {
    const auto end = input.find('\n');
    const auto line = input.substr(0, end);
    input = end == std::string_view::npos ? std::string_view{} : input.substr(end + 1);
    const auto answer = session.handle(line);
    if (answer.find('\n') != std::string::npos) std::abort();           // one line per answer
    const auto parsed = nlohmann::json::parse(answer, nullptr, false);  // strict UTF-8
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("ok")) std::abort();
  }
  return 0;
}
