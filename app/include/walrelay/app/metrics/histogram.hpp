#pragma once

// A Prometheus histogram (https://prometheus.io/docs/concepts/metric_types/#histogram) in the
// text exposition format of exposition.hpp: cumulative `<name>_bucket{le="…"}` samples, the
// `le="+Inf"` bucket, `<name>_sum` and `<name>_count`.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "walrelay/app/metrics/exposition.hpp"

namespace walrelay::metrics {

/// Observations counted in buckets of fixed upper bounds. Not thread-safe: one owner (an event
/// loop's thread) observes and writes.
class Histogram {
 public:
  /// `upper_bounds`: the buckets' inclusive upper bounds (the metric's unit, e.g. seconds),
  /// ascending; the `+Inf` bucket is added.
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds_(std::move(upper_bounds)), counts_(bounds_.size(), 0) {}

  /// Counts `value` in the first bucket whose bound is >= it (all the later ones include it).
  void observe(double value) {
    const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
    if (it != bounds_.end()) ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
    ++count_;
    sum_ += value;
  }

  [[nodiscard]] std::uint64_t count() const { return count_; }
  [[nodiscard]] double sum() const { return sum_; }

  /// HELP and TYPE (histogram), then the cumulative buckets, `_sum` and `_count`.
  void write(std::string& out, std::string_view name, std::string_view help) const {
    metric(out, name, "histogram", help);
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += counts_[i];
      sample(out, bucket, cumulative, fmt::format("le=\"{}\"", bounds_[i]));
    }
    sample(out, bucket, count_, "le=\"+Inf\"");
    sample(out, std::string(name) + "_sum", sum_);
    sample(out, std::string(name) + "_count", count_);
  }

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  ///< per bucket, not cumulative
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace walrelay::metrics
