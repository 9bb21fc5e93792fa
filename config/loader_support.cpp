#include "loader.hpp"

namespace walrelay::config::loading {

bool is_plain_identifier(std::string_view name) {
  if (name.empty() || name.size() > kMaxSlotName) return false;
  if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z'))) return false;
  return std::ranges::all_of(
      name, [](char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

/// How a node looks, for "expected X, got Y" messages.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return quoted(node.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "an empty value";
}

/// Optimal string alignment distance (Levenshtein plus adjacent transposition), so `slto` is one
/// edit from `slot`.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

bool is_topic_char(char c) {
  // Kafka's legal topic characters (org.apache.kafka.common.internals.Topic#validate).
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::optional<std::string> name_problem(std::string_view name) {
  if (name.empty()) return "must not be empty";
  // The name ends up in the default slot name, the default topic prefix and log lines, so it is
  // kept to characters that are safe in all three.
  for (char c : name) {
    if (!is_topic_char(c)) {
      return "may contain only letters, digits, '.', '_' and '-', got " + quoted(name);
    }
  }
  return std::nullopt;
}

std::optional<std::string> slot_problem(std::string_view slot) {
  if (slot.empty()) return "must not be empty";
  if (slot.size() > kMaxSlotName) {
    return "is longer than 63 characters (PostgreSQL's limit for slot names), got " + quoted(slot);
  }
  for (char c : slot) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      // ReplicationSlotValidateName in PostgreSQL's slot.c.
      return "may contain only lower-case letters, digits and '_' (PostgreSQL replication slot "
             "name rules), got " +
             quoted(slot);
    }
  }
  return std::nullopt;
}

std::optional<std::string> prefix_problem(std::string_view prefix) {
  if (prefix.empty()) return "must not be empty";
  for (char c : prefix) {
    if (!is_topic_char(c)) {
      return "may contain only Kafka topic characters (letters, digits, '.', '_', '-'), got " +
             quoted(prefix);
    }
  }
  return std::nullopt;
}

/// `{a}`, `{a} and {b}`, `{a}, {b} and {c}`.
std::string placeholder_list(std::span<const std::string_view> placeholders) {
  std::string out;
  for (std::size_t i = 0; i < placeholders.size(); ++i) {
    if (i > 0) out += i + 1 == placeholders.size() ? " and " : ", ";
    out += '{';
    out += placeholders[i];
    out += '}';
  }
  return out;
}

/// Checks a topic template: `{name}` must be one of `placeholders`; every other character must be
/// a Kafka topic character (the substituted values are mapped at run time, the literal text is
/// not).
std::optional<std::string> topic_template_problem(std::string_view topic,
                                                  std::span<const std::string_view> placeholders) {
  const std::string allowed = placeholder_list(placeholders);
  for (std::size_t i = 0; i < topic.size(); ++i) {
    const char c = topic[i];
    if (c == '{') {
      const std::size_t close = topic.find('}', i + 1);
      if (close == std::string_view::npos) return "unterminated \"{\" in " + quoted(topic);
      const std::string_view placeholder = topic.substr(i + 1, close - i - 1);
      if (std::ranges::find(placeholders, placeholder) == placeholders.end()) {
        return "unknown placeholder {" + std::string(placeholder) + "} in " + quoted(topic) +
               (placeholders.size() == 1 ? " (the only placeholder is " : " (placeholders are ") +
               allowed + ")";
      }
      i = close;
    } else if (c == '}') {
      return "unmatched \"}\" in " + quoted(topic);
    } else if (!is_topic_char(c)) {
      return "invalid character '" + std::string(1, c) + "' in " + quoted(topic) +
             " (allowed: letters, digits, '.', '_', '-' and " + allowed + ")";
    }
  }
  return std::nullopt;
}

std::string suggestion(std::string_view key, std::span<const Field> fields) {
  std::string_view best;
  std::size_t best_distance = 3;  // more than two edits is a different word, not a typo
  for (const Field& field : fields) {
    const std::size_t distance = edit_distance(key, field.key);
    if (distance < best_distance && distance < key.size()) {
      best = field.key;
      best_distance = distance;
    }
  }
  if (best.empty()) return "";
  return " (did you mean " + quoted(best) + "?)";
}

/// Walks one parsed document into a Config, recording every error instead of stopping.

}  // namespace walrelay::config::loading
