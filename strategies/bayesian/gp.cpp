// Gaussian process regression with an incrementally extended Cholesky
// factor (Rasmussen & Williams, "Gaussian Processes for Machine Learning",
// 2006, algorithm 2.1 and eq. 5.9 for the likelihood gradient).
#include "strategies/bayesian/gp.hpp"

#include <tbb/parallel_for.h>
#include <nlopt.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace tessel::bayes {
namespace {

/// Jitter tried, as fractions of the signal variance, when K + noise I does
/// not factor: none first, then growing tenfold up to the signal itself
/// (K + s2 I is always positive definite).
constexpr double first_jitter = 1e-10;

/// Below this fraction of k(x, x) a new pivot is numerically zero: the
/// one-row extension is abandoned for a full factorization with jitter.
constexpr double min_pivot = 1e-12;

/// Added to variance_bounds(), as a fraction of the signal variance: far
/// above the rounding of variances(), far below any variance that matters.
constexpr double bound_margin = 1e-9;

/// Factors k + (noise + jitter) I, growing jitter until it works.
Eigen::LLT<Eigen::MatrixXd> factor_with_jitter(Eigen::MatrixXd k, double noise, double signal,
                                               double& jitter) {
  k.diagonal().array() += noise;
  jitter = 0;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  for (double j = first_jitter * signal; llt.info() != Eigen::Success && j <= signal; j *= 10) {
    jitter = j;
    Eigen::MatrixXd kj = k;
    kj.diagonal().array() += j;
    llt.compute(kj);
  }
  return llt;
}

/// Columns of L^-1 solved for at once in inverse().
constexpr Eigen::Index inverse_block = 32;

/// K^-1 from K = L L^T: L^-1 by forward substitution on blocks of columns,
/// each only below its diagonal (L^-1 is lower triangular), then
/// L^-T L^-1 as a symmetric rank update; about n^3/3 multiply-adds where
/// llt.solve(I) takes n^3.
Eigen::MatrixXd inverse(const Eigen::LLT<Eigen::MatrixXd>& llt) {
  const Eigen::MatrixXd& l = llt.matrixLLT();
  const Eigen::Index n = l.rows();
  Eigen::MatrixXd li = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index j = 0; j < n; j += inverse_block) {
    const Eigen::Index w = std::min(inverse_block, n - j);
    auto block = li.block(j, j, n - j, w);
    block.topRows(w).setIdentity();
    l.block(j, j, n - j, n - j).triangularView<Eigen::Lower>().solveInPlace(block);
  }
  Eigen::MatrixXd k_inverse = Eigen::MatrixXd::Zero(n, n);
  k_inverse.selfadjointView<Eigen::Lower>().rankUpdate(li.transpose());
  k_inverse.triangularView<Eigen::StrictlyUpper>() = k_inverse.transpose();
  return k_inverse;
}

}  // namespace

gp::gp(bayes::kernel k, mean_mode mode) : kernel_(std::move(k)), mode_(mode) {}

void gp::reserve(std::size_t n) {
  if (n <= capacity_) return;
  capacity_ = std::max({n, 2 * capacity_, std::size_t{16}});
  const auto rows = static_cast<Eigen::Index>(kernel_.layout().features);
  const auto cap = static_cast<Eigen::Index>(capacity_);
  raw_.conservativeResize(rows, cap);
  scaled_.conservativeResize(rows, cap);
  l_.conservativeResize(cap, cap);
}

void gp::set_theta(const Eigen::VectorXd& theta) {
  kernel_.set_theta(theta);
  const auto n = static_cast<Eigen::Index>(n_);
  if (n > 0) scaled_.leftCols(n) = kernel_.scale(raw_.leftCols(n));
  refactor();
  solve();
}

void gp::set_fixed_mean(double mean) {
  fixed_mean_ = mean;
  restandardize();
  solve();
}

void gp::append(const Eigen::VectorXd& features, double y) {
  reserve(n_ + 1);
  const auto n = static_cast<Eigen::Index>(n_);
  raw_.col(n) = features;
  scaled_.col(n) = kernel_.scale(features);
  y_.push_back(y);
  const double kss = kernel_.signal() + kernel_.noise() + jitter_;
  if (n == 0) {
    l_(0, 0) = std::sqrt(kss);
    ++n_;
    return;
  }
  const Eigen::VectorXd k = kernel_.cross(scaled_.leftCols(n), scaled_.col(n));
  const Eigen::VectorXd row = l_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solve(k);
  const double pivot = kss - row.squaredNorm();
  ++n_;
  if (!(pivot > min_pivot * kss) || !std::isfinite(pivot)) {
    refactor();
    return;
  }
  l_.row(n).head(n) = row.transpose();
  l_.col(n).head(n).setZero();
  l_(n, n) = std::sqrt(pivot);
}

void gp::refactor() {
  const auto n = static_cast<Eigen::Index>(n_);
  if (n == 0) return;
  const auto s = scaled_.leftCols(n);
  const auto llt =
      factor_with_jitter(kernel_.cross(s, s), kernel_.noise(), kernel_.signal(), jitter_);
  l_.topLeftCorner(n, n) = llt.matrixL();
}

void gp::restandardize() {
  if (mode_ == mean_mode::fixed || committed_ == 0) {
    mean_ = mode_ == mean_mode::fixed ? fixed_mean_ : 0;
    scale_ = 1;
    return;
  }
  const auto c = static_cast<double>(committed_);
  double sum = 0, sum2 = 0;
  for (std::size_t i = 0; i < committed_; ++i) sum += y_[i];
  mean_ = sum / c;
  for (std::size_t i = 0; i < committed_; ++i) sum2 += (y_[i] - mean_) * (y_[i] - mean_);
  const double sd = std::sqrt(sum2 / c);
  scale_ = sd > 1e-12 * std::max(1.0, std::abs(mean_)) ? sd : 1.0;
}

void gp::solve() {
  const auto n = static_cast<Eigen::Index>(n_);
  alpha_.resize(n);
  for (Eigen::Index i = 0; i < n; ++i)
    alpha_[i] = (y_[static_cast<std::size_t>(i)] - mean_) / scale_;
  if (n == 0) return;
  const auto l = l_.topLeftCorner(n, n).triangularView<Eigen::Lower>();
  l.solveInPlace(alpha_);
  l.transpose().solveInPlace(alpha_);
}

void gp::add(const Eigen::VectorXd& features, double y) {
  clear_fantasies();
  append(features, y);
  committed_ = n_;
  restandardize();
  solve();
}

void gp::assign(const Eigen::MatrixXd& features, const std::vector<double>& y) {
  const auto m = static_cast<std::size_t>(features.cols());
  n_ = committed_ = 0;
  reserve(m);
  n_ = committed_ = m;
  const auto n = static_cast<Eigen::Index>(m);
  raw_.leftCols(n) = features;
  scaled_.leftCols(n) = kernel_.scale(features);
  y_ = y;
  refactor();
  restandardize();
  solve();
}

void gp::set_targets(const std::vector<double>& y) {
  clear_fantasies();
  y_ = y;
  restandardize();
  solve();
}

void gp::push_fantasy(const Eigen::VectorXd& features, double y) {
  append(features, y);
  solve();
}

void gp::clear_fantasies() {
  if (n_ == committed_) return;
  n_ = committed_;
  y_.resize(committed_);
  solve();
}

Eigen::MatrixXd gp::factor() const {
  const auto n = static_cast<Eigen::Index>(n_);
  return l_.topLeftCorner(n, n).triangularView<Eigen::Lower>();
}

Eigen::Ref<const Eigen::MatrixXd> gp::features() const {
  return raw_.leftCols(static_cast<Eigen::Index>(n_));
}

double gp::log_marginal_likelihood() const {
  const auto c = static_cast<Eigen::Index>(committed_);
  Eigen::VectorXd ys(c);
  for (Eigen::Index i = 0; i < c; ++i) ys[i] = (y_[static_cast<std::size_t>(i)] - mean_) / scale_;
  const auto l = l_.topLeftCorner(c, c).triangularView<Eigen::Lower>();
  const Eigen::VectorXd half = l.solve(ys);
  return -0.5 * half.squaredNorm() - l_.topLeftCorner(c, c).diagonal().array().log().sum() -
         0.5 * static_cast<double>(c) * std::log(2 * std::numbers::pi);
}

Eigen::MatrixXd gp::scaled(const Eigen::Ref<const Eigen::MatrixXd>& raw) const {
  return kernel_.scale(raw);
}

Eigen::MatrixXd gp::cross(const Eigen::Ref<const Eigen::MatrixXd>& scaled) const {
  if (n_ == 0) return Eigen::MatrixXd(0, scaled.cols());
  return kernel_.cross(scaled_.leftCols(static_cast<Eigen::Index>(n_)), scaled);
}

Eigen::VectorXd gp::mean(const Eigen::MatrixXd& cross) const {
  if (n_ == 0) return Eigen::VectorXd::Constant(cross.cols(), mean_);
  return (mean_ + scale_ * (cross.transpose() * alpha_).array()).matrix();
}

double gp::variance(const Eigen::Ref<const Eigen::VectorXd>& cross) const {
  const auto n = static_cast<Eigen::Index>(n_);
  double v = kernel_.signal();
  if (n > 0) v -= l_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solve(cross).squaredNorm();
  return std::max(v, 0.0) * scale_ * scale_;
}

Eigen::VectorXd gp::variances(const Eigen::MatrixXd& cross) const {
  const auto n = static_cast<Eigen::Index>(n_);
  Eigen::VectorXd v = Eigen::VectorXd::Constant(cross.cols(), kernel_.signal());
  if (n > 0) {
    Eigen::MatrixXd w = cross;
    l_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solveInPlace(w);
    v -= w.colwise().squaredNorm().transpose();
  }
  return v.cwiseMax(0.0) * (scale_ * scale_);
}

Eigen::VectorXd gp::variance_bounds(const Eigen::MatrixXd& cross) const {
  const double s2 = kernel_.signal();
  Eigen::VectorXd v = Eigen::VectorXd::Constant(cross.cols(), s2);
  if (n_ > 0)
    v -= cross.cwiseAbs2().colwise().maxCoeff().transpose() / (s2 + kernel_.noise() + jitter_);
  // A margin over the rounding of variances(): the bound must not fall below it.
  return (v.cwiseMax(0.0).array() + bound_margin * s2).matrix() * (scale_ * scale_);
}

Eigen::MatrixXd gp::covariance(const Eigen::Ref<const Eigen::MatrixXd>& scaled,
                               const Eigen::MatrixXd& cross) const {
  const auto n = static_cast<Eigen::Index>(n_);
  Eigen::MatrixXd c = kernel_.cross(scaled, scaled);
  if (n > 0) {
    const Eigen::MatrixXd v = l_.topLeftCorner(n, n).triangularView<Eigen::Lower>().solve(cross);
    c.noalias() -= v.transpose() * v;
  }
  return c * (scale_ * scale_);
}

// --- hyper-parameters -----------------------------------------------------------

double log_marginal_likelihood(const bayes::kernel& k, const Eigen::MatrixXd& raw,
                               const Eigen::VectorXd& y, Eigen::VectorXd* gradient) {
  const auto s = k.scale(raw);
  double jitter = 0;
  const auto llt = factor_with_jitter(k.cross(s, s), k.noise(), k.signal(), jitter);
  const Eigen::VectorXd alpha = llt.solve(y);
  const double value = -0.5 * y.dot(alpha) - llt.matrixLLT().diagonal().array().log().sum() -
                       0.5 * static_cast<double>(y.size()) * std::log(2 * std::numbers::pi);
  if (gradient != nullptr) {
    Eigen::MatrixXd w = -inverse(llt);
    w.noalias() += alpha * alpha.transpose();
    *gradient = k.trace_gradient(raw, w);
  }
  return value;
}

namespace {

struct fit_problem {
  bayes::kernel k;
  Eigen::MatrixXd raw;
  Eigen::VectorXd y;
  Eigen::VectorXd best_theta;
  double best = -std::numeric_limits<double>::infinity();
  std::size_t evaluations = 0;
};

/// nlopt objective: -log marginal likelihood and its gradient.
double negative_lml(const std::vector<double>& x, std::vector<double>& grad, void* data) {
  auto& p = *static_cast<fit_problem*>(data);
  const Eigen::VectorXd theta =
      Eigen::Map<const Eigen::VectorXd>(x.data(), static_cast<Eigen::Index>(x.size()));
  p.k.set_theta(theta);
  Eigen::VectorXd g;
  const double value = log_marginal_likelihood(p.k, p.raw, p.y, grad.empty() ? nullptr : &g);
  ++p.evaluations;
  if (!std::isfinite(value)) {
    std::fill(grad.begin(), grad.end(), 0.0);
    return 1e300;
  }
  if (value > p.best) {
    p.best = value;
    p.best_theta = theta;
  }
  for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = -g[static_cast<Eigen::Index>(i)];
  return -value;
}

/// Indices of the points a fit uses: all, or a uniform random subset (sorted).
std::vector<Eigen::Index> fit_subset(std::size_t n, std::size_t max_points, rng& random) {
  std::vector<Eigen::Index> index(n);
  for (std::size_t i = 0; i < n; ++i) index[i] = static_cast<Eigen::Index>(i);
  if (n <= max_points) return index;
  for (std::size_t i = 0; i < max_points; ++i)
    std::swap(index[i], index[i + random.uniform(n - i)]);
  index.resize(max_points);
  std::sort(index.begin(), index.end());
  return index;
}

Eigen::VectorXd clamp(Eigen::VectorXd x, const Eigen::VectorXd& lo, const Eigen::VectorXd& hi) {
  return x.cwiseMax(lo).cwiseMin(hi);
}

}  // namespace

std::size_t next_fit(std::size_t count, double growth) {
  return std::max(count + 1,
                  static_cast<std::size_t>(std::ceil(static_cast<double>(count) * growth)));
}

fit_report fit_hyper_parameters(gp& model, rng& random, const fit_settings& settings) {
  fit_report report;
  if (model.size() < 2) return report;
  fit_problem p;
  p.k = model.current_kernel();
  const auto index = fit_subset(model.size(), settings.max_points, random);
  const auto features = model.features();
  p.raw.resize(features.rows(), static_cast<Eigen::Index>(index.size()));
  p.y.resize(static_cast<Eigen::Index>(index.size()));
  for (std::size_t i = 0; i < index.size(); ++i) {
    const auto col = static_cast<Eigen::Index>(i);
    p.raw.col(col) = features.col(index[i]);
    p.y[col] = (model.targets()[static_cast<std::size_t>(index[i])] - model.target_mean()) /
               model.target_scale();
  }
  Eigen::VectorXd lo = p.k.lower();
  const Eigen::VectorXd hi = p.k.upper();
  const auto noise = static_cast<Eigen::Index>(p.k.index_noise());
  if (settings.min_noise > 0)
    lo[noise] = std::min(hi[noise], std::max(lo[noise], std::log(settings.min_noise)));
  std::vector<Eigen::VectorXd> starts{clamp(p.k.theta(), lo, hi),
                                      clamp(p.k.default_theta(), lo, hi)};
  for (std::size_t r = 0; r < settings.restarts; ++r) {
    Eigen::VectorXd t = p.k.default_theta();
    for (Eigen::Index i = 0; i < t.size(); ++i) t[i] += 4 * random.uniform01() - 2;
    starts.push_back(clamp(t, lo, hi));
  }
  std::vector<double> ignored;
  std::vector<double> x(starts[0].data(), starts[0].data() + starts[0].size());
  report.before = -negative_lml(x, ignored, &p);
  // The starts run in parallel (TBB), each on its own copy of the problem;
  // the best point is the first start's best among the highest, as one
  // serial pass over the starts would keep: bit-identical on any thread count.
  std::vector<fit_problem> runs(starts.size(), p);
  tbb::parallel_for(std::size_t{0}, starts.size(), [&](std::size_t s) {
    nlopt::opt opt(nlopt::LD_LBFGS, static_cast<unsigned>(lo.size()));
    opt.set_lower_bounds(std::vector<double>(lo.data(), lo.data() + lo.size()));
    opt.set_upper_bounds(std::vector<double>(hi.data(), hi.data() + hi.size()));
    opt.set_min_objective(negative_lml, &runs[s]);
    opt.set_maxeval(static_cast<int>(settings.evaluations));
    opt.set_ftol_rel(1e-7);
    opt.set_xtol_rel(1e-5);
    std::vector<double> from(starts[s].data(), starts[s].data() + starts[s].size());
    double value = 0;
    try {
      opt.optimize(from, value);
    } catch (const std::exception&) {
      // Round-off or a failed line search: the best point seen is kept below.
    }
  });
  for (const auto& run : runs) {
    if (run.best > p.best) {
      p.best = run.best;
      p.best_theta = run.best_theta;
    }
    p.evaluations += run.evaluations - 1;  // each copy counted the shared first evaluation
  }
  model.set_theta(p.best_theta);
  report.after = p.best;
  report.evaluations = p.evaluations;
  return report;
}

}  // namespace tessel::bayes
