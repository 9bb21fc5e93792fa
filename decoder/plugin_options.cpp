#include "walrelay/decoder/plugin_options.hpp"

namespace walrelay::decoder {

std::string escape_add_tables_name(const std::string& name) {
  if (name == "*") return name;
  std::string out;
  out.reserve(name.size() + 4);
  for (char c : name) {
    // wal2json README, add-tables: "special characters (space, single quote, comma, period,
    // asterisk) must be escaped with backslash". A backslash itself is escaped so that it is
    // taken literally by the same parser.
    if (c == ' ' || c == '\'' || c == ',' || c == '.' || c == '*' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> wal2json_options(
    const std::optional<std::vector<TableFilter>>& tables,
    const std::vector<std::string>& message_prefixes) {
  std::vector<std::pair<std::string, std::string>> opts = {
      {"format-version", "2"},    {"include-xids", "1"},  {"include-timestamp", "1"},
      {"include-lsn", "1"},       {"include-pk", "1"},    {"include-transaction", "1"},
      {"include-type-oids", "1"}, {"include-types", "0"},
  };
  if (tables && tables->empty()) {
    opts.emplace_back("filter-tables", "*.*");
  } else if (tables) {
    std::string list;
    for (const auto& t : *tables) {
      if (!list.empty()) list.push_back(',');
      list += escape_add_tables_name(t.schema);
      list.push_back('.');
      list += escape_add_tables_name(t.table);
    }
    opts.emplace_back("add-tables", std::move(list));
  }
  // add-msg-prefixes: a comma-separated list with no escape syntax, so a prefix holding a comma
  // cannot be listed: then every message is sent and walrelay filters by prefix itself.
  std::string prefixes = "walrelay";
  for (const auto& p : message_prefixes) {
    if (p.find(',') != std::string::npos) return opts;
    prefixes.push_back(',');
    prefixes += p;
  }
  opts.emplace_back("add-msg-prefixes", std::move(prefixes));
  return opts;
}

}  // namespace walrelay::decoder
