#pragma once

// Writing the Prometheus text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/): shared by the connector's and
// the snapshots' metrics.

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace walrelay::metrics {

/// A label value escaped as the format requires (backslash, double quote, newline).
std::string label(std::string_view v);

/// A metric's `# HELP` and `# TYPE` lines (type: counter, gauge).
void metric(std::string& out, std::string_view name, std::string_view type, std::string_view help);

/// One sample line: `name{labels} value` (`labels` already formatted, e.g. `a="x",b="y"`; empty:
/// none). Numbers as fmt prints them (integers exactly, doubles shortest round-trip).
template <typename T>
void sample(std::string& out, std::string_view name, T value, std::string_view labels = {}) {
  out += name;
  if (!labels.empty()) {
    out.push_back('{');
    out += labels;
    out.push_back('}');
  }
  out.push_back(' ');
  out += fmt::format("{}", value);
  out.push_back('\n');
}

/// A metric whose samples differ in one label only: HELP and TYPE, then one sample a value of the
/// label (`name{label="value"} n`), in the order given.
void labelled(std::string& out, std::string_view name, std::string_view type, std::string_view help,
              std::string_view label_name,
              std::initializer_list<std::pair<std::string_view, std::uint64_t>> samples);

}  // namespace walrelay::metrics
