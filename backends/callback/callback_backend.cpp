// callback_backend.cpp: a user's function as a backend.
#include <tessel/backends.hpp>

#include <tessel/error.hpp>

#include <chrono>
#include <utility>

namespace tessel {
namespace {

/// Runs `f` and returns its value as an ok measurement timed by a steady clock.
template <class F>
measurement timed(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  const double objective = std::forward<F>(f)();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  cost paid;
  paid.run_s = elapsed.count();
  return measurement::success(objective, paid);
}

/// `f` itself; throws options_error when it is empty (before it is wrapped).
template <class F>
F checked(F f) {
  if (!f) throw options_error("callback_backend: the function is empty");
  return f;
}

}  // namespace

callback_backend::callback_backend(measure_function f, options opts)
    : function_(checked(std::move(f))), options_(std::move(opts)) {
  if (options_.concurrency == 0)
    throw options_error("callback_options::concurrency must be at least 1");
  if (options_.racing) racer_ = std::make_shared<racer>(*options_.racing);
}

callback_backend::callback_backend(std::function<measurement(const config&)> f, options opts)
    : callback_backend(measure_function([f = checked(std::move(f))](const space&, const config& c) {
                         return f(c);
                       }),
                       std::move(opts)) {}

callback_backend::callback_backend(std::function<double(const config&)> f, options opts)
    : callback_backend(measure_function([f = checked(std::move(f))](const space&, const config& c) {
                         return timed([&] { return f(c); });
                       }),
                       std::move(opts)) {}

callback_backend::callback_backend(std::function<double(const space&, const config&)> f,
                                   options opts)
    : callback_backend(
          measure_function([f = checked(std::move(f))](const space& s, const config& c) {
            return timed([&] { return f(s, c); });
          }),
          std::move(opts)) {}

measurement callback_backend::evaluate(const space& s, const config& c) {
  if (!racer_) return function_(s, c);
  return race_measurements(*racer_, [&] { return function_(s, c); });
}

std::optional<measurement> callback_backend::remeasure(const space& s, const config& c) {
  if (!racer_) return std::nullopt;
  return race_measurements(
      *racer_, [&] { return function_(s, c); }, true);
}

double callback_backend::estimated_cost(const space& s, const config& c) const {
  return options_.cost_estimate ? options_.cost_estimate(s, c) : 1.0;
}

}  // namespace tessel
