#include "walrelay/app/metrics/exposition.hpp"

namespace walrelay::metrics {

std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void metric(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out.push_back(' ');
  out += help;
  out += "\n# TYPE ";
  out += name;
  out.push_back(' ');
  out += type;
  out.push_back('\n');
}

void labelled(std::string& out, std::string_view name, std::string_view type, std::string_view help,
              std::string_view label_name,
              std::initializer_list<std::pair<std::string_view, std::uint64_t>> samples) {
  metric(out, name, type, help);
  for (const auto& [value, n] : samples) {
    sample(out, name, n, std::string(label_name) + "=\"" + label(value) + "\"");
  }
}

}  // namespace walrelay::metrics
