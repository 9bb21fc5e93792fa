#include "text.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::config {

namespace {

constexpr std::string_view kExpected =
    "expected schema.table (quote a part that contains a dot: \"my.schema\".table), got ";

using detail::quoted;

/// Reads one part starting at `pos`. The schema part (`last` false) must end at a dot, which is
/// left at `pos`; the table part (`last` true) must end the text.
std::expected<std::string, std::string> parse_part(std::string_view text, std::size_t& pos,
                                                   bool last) {
  const std::string_view what = last ? "table" : "schema";
  std::string out;
  if (pos < text.size() && text[pos] == '"') {
    // PostgreSQL's quoted identifier rule: `""` inside quotes is one `"`.
    ++pos;
    for (;;) {
      if (pos >= text.size()) {
        return std::unexpected("unterminated quoted " + std::string(what) + " name in " +
                               quoted(text));
      }
      if (text[pos] == '"') {
        if (pos + 1 < text.size() && text[pos + 1] == '"') {
          out += '"';
          pos += 2;
          continue;
        }
        ++pos;
        break;
      }
      out += text[pos++];
    }
    if (!last && pos == text.size()) return std::unexpected(std::string(kExpected) + quoted(text));
    const bool ends_right = last ? pos == text.size() : text[pos] == '.';
    if (!ends_right) {
      return std::unexpected("unexpected text after the closing quote of the " + std::string(what) +
                             " name in " + quoted(text));
    }
  } else if (!last) {
    const std::size_t dot = text.find('.', pos);
    if (dot == std::string_view::npos) {
      return std::unexpected(std::string(kExpected) + quoted(text));
    }
    out = text.substr(pos, dot - pos);
    pos = dot;
  } else {
    out = text.substr(pos);
    pos = text.size();
  }
  if (out.empty()) {
    return std::unexpected("empty " + std::string(what) + " name in " + quoted(text));
  }
  return out;
}

}  // namespace

std::expected<TableName, std::string> parse_table_name(std::string_view text) {
  std::size_t pos = 0;
  auto schema = parse_part(text, pos, false);
  if (!schema) return std::unexpected(std::move(schema.error()));
  ++pos;  // the dot
  auto table = parse_part(text, pos, true);
  if (!table) return std::unexpected(std::move(table.error()));
  return TableName{std::move(*schema), std::move(*table)};
}

}  // namespace walrelay::config
