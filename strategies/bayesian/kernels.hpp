// Private: the Gaussian process kernel over a space's encoding
// (docs/bayesian.md). Not installed.
//
// A config's encoding (space::encoding) is turned into a feature column:
//   numeric dims      their encoded value (in [0, 1], log2-scaled for pow2
//                     domains; -1 when inactive), or with ordinal features
//                     the value's position in its domain (in [0, 1]);
//   categorical dims  a one-hot block of categories + 1 entries (the last one
//                     is "inactive");
//   permutations      one entry per element pair (a, b), a < b: +1 when a
//                     comes before b, -1 otherwise, 0 for an inactive one.
// The kernel is the product
//   k(x, y) = s2 * matern52(r) * exp(-sum_h w_h * S_h(x, y)),
//   r^2 = sum_d ((x_d - y_d) / l_d)^2                 over numeric dims,
//   S_h = squared distance of block h of the features (categorical block:
//         2 * [x != y]; permutation block: 4 * discordant pairs),
//   w_h = theta_h / 2 for a categorical dim (overlap kernel
//         exp(-theta * [x != y])), lambda_g / (4 P_g) for a permutation of
//         P_g pairs (Kendall kernel exp(-lambda * discordant / P_g),
//         Jiao & Vert, ICML 2015).
// Each factor is positive semi-definite (a Gaussian kernel on a feature map
// is), so the product is. All hyper-parameters live in log space, in one
// vector: [log l_1..l_dn | log theta_h (categorical dims, then
// permutations) | log s2 | log noise].
#pragma once

#include <tessel/space.hpp>

#include <Eigen/Dense>

#include <cstddef>
#include <vector>

namespace tessel::bayes {

/// How a space's encoding maps onto kernel features.
struct kernel_layout {
  /// A block of features sharing one hyper-parameter (a categorical dim or a
  /// permutation parameter).
  struct block {
    enum class kind : unsigned char { categorical, permutation };
    kind type = kind::categorical;
    std::size_t first_feature = 0;  ///< row of the block's first feature
    std::size_t features = 0;       ///< one-hot size, or pair count P
    std::vector<std::size_t> dims;  ///< encoded dims it reads (one, or one per element)
    double scale = 0.5;             ///< w_h / theta_h: 1/2, or 1/(4P)
  };
  /// A numeric row that reads a function of its dim's value instead of the
  /// value: the encoded values of the domain (ascending) and the feature of
  /// each, in [0, 1]: the value's position in its domain
  /// (gp_options::ordinal_features) or its alignment
  /// (gp_options::alignment_features).
  struct value_map {
    std::vector<double> encoded;
    std::vector<double> value;
  };
  std::vector<std::size_t> numeric;  ///< encoded dims of numeric features (rows 0..)
  /// Per numeric row: empty for the encoded value itself, else its map.
  std::vector<value_map> mapped;
  std::vector<block> blocks;  ///< after the numeric rows
  std::size_t features = 0;   ///< rows of a feature column

  /// `alignment`: add an alignment row after the numeric rows for each
  /// integer parameter whose values differ in alignment (not pow2 domains).
  /// `ordinal`: an integer parameter's row reads the position of its value
  /// in the domain rather than the value (not pow2 domains, whose log2
  /// encoding is that position already).
  [[nodiscard]] static kernel_layout of(const space& s, bool alignment = false,
                                        bool ordinal = false);
  /// Whether `c` has one value index in range (or inactive) per parameter of
  /// `s`, so it can be encoded: trials of another space are ignored.
  [[nodiscard]] static bool encodable(const space& s, const config& c);
  /// The feature column of an encoded config (space::encode).
  [[nodiscard]] Eigen::VectorXd features_of(const std::vector<double>& encoded) const;
  [[nodiscard]] std::size_t hyper_parameters() const { return numeric.size() + blocks.size() + 2; }
};

/// The kernel with its hyper-parameters. Cheap to copy.
class kernel {
 public:
  kernel() = default;
  explicit kernel(kernel_layout layout);

  [[nodiscard]] const kernel_layout& layout() const noexcept { return layout_; }
  /// Log hyper-parameters (layout above).
  [[nodiscard]] const Eigen::VectorXd& theta() const noexcept { return theta_; }
  void set_theta(const Eigen::VectorXd& theta);
  [[nodiscard]] Eigen::VectorXd default_theta() const;
  [[nodiscard]] Eigen::VectorXd lower() const;
  [[nodiscard]] Eigen::VectorXd upper() const;

  [[nodiscard]] double signal() const noexcept { return signal_; }  ///< s2, k(x, x)
  [[nodiscard]] double noise() const noexcept { return noise_; }    ///< observation noise variance
  [[nodiscard]] std::size_t index_signal() const noexcept { return layout_.hyper_parameters() - 2; }
  [[nodiscard]] std::size_t index_noise() const noexcept { return layout_.hyper_parameters() - 1; }

  /// Feature columns scaled so that plain squared distances give r^2 (numeric
  /// rows) and sum_h w_h S_h (the other rows).
  [[nodiscard]] Eigen::MatrixXd scale(const Eigen::Ref<const Eigen::MatrixXd>& raw) const;
  /// k(a_i, b_j) for scaled columns: a.cols() x b.cols(), no noise.
  [[nodiscard]] Eigen::MatrixXd cross(const Eigen::Ref<const Eigen::MatrixXd>& a,
                                      const Eigen::Ref<const Eigen::MatrixXd>& b) const;

  /// d/d theta of 0.5 * sum_ij w_ij K_ij for K = k(raw_i, raw_j) + noise * I
  /// (w symmetric): with w = alpha alpha^T - K^-1 this is the gradient of the
  /// log marginal likelihood (Rasmussen & Williams 2006, eq. 5.9).
  [[nodiscard]] Eigen::VectorXd trace_gradient(const Eigen::Ref<const Eigen::MatrixXd>& raw,
                                               const Eigen::MatrixXd& w) const;

 private:
  kernel_layout layout_;
  Eigen::VectorXd theta_;
  Eigen::VectorXd inverse_length_;  ///< 1 / l_d
  Eigen::VectorXd block_weight_;    ///< w_h
  double signal_ = 1;
  double noise_ = 1e-3;
};

}  // namespace tessel::bayes
