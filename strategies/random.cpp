// `random`: uniform sampling over valid configs, skipping known ones.
#include "strategies/common.hpp"

#include <tessel/strategies.hpp>

namespace tessel {

void random_options::validate() const {
  if (sample_attempts == 0)
    detail::options_failure("random_options", "sample_attempts",
                            "must be at least 1" + detail::got(sample_attempts));
}

namespace {

class random_search final : public strategy {
 public:
  explicit random_search(const random_options& o) : options_(o) {}
  [[nodiscard]] std::string name() const override { return "random"; }
  void start(const space&, std::uint64_t seed) override { random_.reseed(seed); }

  /// n fresh uniform samples; fewer only when fewer are left.
  std::vector<config> propose(std::size_t n, const search_context& context) override {
    detail::batch b(context, n);
    detail::fill_uniform(b, n, random_, options_.sample_attempts);
    return b.take();
  }
  void observe(const trial&) override {}

 private:
  random_options options_;
  rng random_;
};

}  // namespace

std::unique_ptr<strategy> make_random_strategy(const random_options& options) {
  options.validate();
  return std::make_unique<random_search>(options);
}

}  // namespace tessel
