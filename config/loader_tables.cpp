#include "loader.hpp"

namespace walrelay::config::loading {

std::optional<Operations> Loader::operations(const YAML::Node& node, const std::string& path) {
  Operations ops{.create = false, .update = false, .del = false, .truncate = false};
  std::set<std::string> seen;
  bool valid = true;
  const auto add = [&](std::string_view letter, const std::string& p) {
    bool* flag = letter == "c"   ? &ops.create
                 : letter == "u" ? &ops.update
                 : letter == "d" ? &ops.del
                 : letter == "t" ? &ops.truncate
                                 : nullptr;
    if (flag == nullptr) {
      error(p, (letter.empty() ? std::string("empty operation")
                               : "unknown operation " + quoted(letter)) +
                   " (expected c for create, u for update, d for delete or t for truncate)");
      valid = false;
    } else if (!seen.emplace(letter).second) {
      error(p, "duplicate operation " + quoted(letter));
      valid = false;
    } else {
      *flag = true;
    }
  };
  static constexpr std::string_view kEmpty = "must list at least one operation (c, u, d or t)";
  if (node.IsSequence()) {
    if (node.size() == 0) {
      error(path, std::string(kEmpty));
      return std::nullopt;
    }
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      if (auto letter = scalar(node[i], item, "an operation letter (c, u, d or t)")) {
        add(trim(*letter), item);
      } else {
        valid = false;
      }
    }
  } else if (node.IsScalar()) {
    const auto text = scalar(node, path, "a list of operations");
    if (!text) return std::nullopt;
    if (trim(*text).empty()) {
      error(path, std::string(kEmpty));
      return std::nullopt;
    }
    std::string_view rest = *text;
    while (true) {
      const std::size_t comma = rest.find(',');
      add(trim(rest.substr(0, comma)), path);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  } else {
    error(path,
          "expected a list of operations such as [c, u, d] or \"c,u,d\", got " + describe(node));
    return std::nullopt;
  }
  if (!valid) return std::nullopt;
  return ops;
}

void Loader::read_tables(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) {
    error(path, "expected a list of tables, got " + describe(node));
    tables_malformed_ = true;
    return;
  }
  const std::size_t first = config_.tables.size();
  for (std::size_t i = 0; i < node.size(); ++i) {
    read_table(node[i], path + "[" + std::to_string(i) + "]");
  }
  // The first matching entry wins: an entry an earlier one matches for every name it can match
  // would be silently dead (its outbox, key or topic never applied). Refuse it, naming both.
  for (std::size_t j = first + 1; j < config_.tables.size(); ++j) {
    const TableConfig& later = config_.tables[j];
    if (later.name.empty()) continue;  // an invalid name, reported already
    for (std::size_t i = first; i < j; ++i) {
      const TableConfig& earlier = config_.tables[i];
      if (earlier.name.empty() || !glob_covers(earlier.schema_pattern, later.schema_pattern) ||
          !glob_covers(earlier.table_pattern, later.table_pattern)) {
        continue;
      }
      error(path + "[" + std::to_string(j - first) + "].name",
            "entry " + quoted(later.name) + " is never used: the earlier entry " +
                quoted(earlier.name) + " (" + path + "[" + std::to_string(i - first) +
                "]) matches every table it names, and the first matching entry wins. Move " +
                quoted(later.name) + " before " + quoted(earlier.name) + ", or remove it");
      break;
    }
  }
}

void Loader::read_table_name(const YAML::Node& node, const std::string& path, TableConfig& table) {
  auto s = scalar(node, path, "a string");
  if (!s) return;
  auto parsed = parse_table_name(*s);
  if (!parsed) {
    error(path, std::move(parsed.error()));
    return;
  }
  table.name = std::move(*s);
  table.schema_pattern = std::move(parsed->schema);
  table.table_pattern = std::move(parsed->table);
}

void Loader::read_table(const YAML::Node& node, const std::string& path) {
  TableConfig table;
  // Row-change keys are rejected on an outbox entry wherever `outbox` appears in it.
  bool is_outbox = false;
  if (node.IsMap()) {
    for (const auto& entry : node) {
      if (entry.first.IsScalar() && entry.first.Scalar() == "outbox") is_outbox = true;
    }
  }
  using Read = std::function<void(const YAML::Node&, const std::string&)>;
  const auto row_only = [&](Read read) -> Read {
    return [&, read = std::move(read)](const YAML::Node& v, const std::string& p) {
      if (is_outbox) {
        error(p, "not used for outbox tables");
      } else {
        read(v, p);
      }
    };
  };
  std::optional<std::vector<std::string>> excluded;
  std::optional<std::vector<std::string>> masked;
  const Field fields[] = {
      {"name", [&](const YAML::Node& v, const std::string& p) { read_table_name(v, p, table); }},
      {"outbox",
       [&](const YAML::Node& v, const std::string& p) {
         if (v.IsNull()) {
           error(p, "expected a map (write `outbox: {}` for the default column names)");
           return;
         }
         read_outbox(v, p, table.outbox.emplace());
       }},
      {"topic", row_only([&](const YAML::Node& v, const std::string& p) {
         auto s = nonempty_string(v, p);
         if (!s) return;
         if (auto problem = topic_template_problem(*s, kTablePlaceholders)) {
           error(p, std::move(*problem));
         } else {
           table.topic = std::move(*s);
         }
       })},
      {"key_columns", row_only([&](const YAML::Node& v, const std::string& p) {
         if (auto columns = column_list(v, p)) table.key_columns = std::move(*columns);
       })},
      {"exclude_columns", row_only([&](const YAML::Node& v, const std::string& p) {
         excluded = column_list(v, p);
         if (excluded) table.exclude_columns = *excluded;
       })},
      {"mask_columns", row_only([&](const YAML::Node& v, const std::string& p) {
         masked = column_list(v, p);
         if (masked) table.mask_columns = *masked;
       })},
      {"operations", row_only([&](const YAML::Node& v, const std::string& p) {
         table.operations = operations(v, p);
       })},
      {"tombstones_on_delete", row_only([&](const YAML::Node& v, const std::string& p) {
         table.tombstones_on_delete = boolean(v, p);
       })},
  };
  const auto seen = walk(node, path, fields);
  if (seen && !seen->contains("name")) error(join(path, "name"), std::string(kMissing));
  if (excluded && masked) {
    for (const std::string& column : *masked) {
      if (std::ranges::find(*excluded, column) != excluded->end()) {
        error(join(path, "mask_columns"),
              quoted(column) +
                  " is also in exclude_columns (a column is either left out or "
                  "masked, not both)");
      }
    }
  }
  if (masked && !masked->empty()) masks_columns_ = true;
  config_.tables.push_back(std::move(table));
}

void Loader::read_exclude(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) {
    error(path, "expected a list of table names, got " + describe(node));
    return;
  }
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    const YAML::Node& entry = node[i];
    TableConfig table;
    if (entry.IsScalar()) {
      read_table_name(entry, item, table);
    } else if (entry.IsMap()) {
      const Field fields[] = {
          {"name",
           [&](const YAML::Node& v, const std::string& p) { read_table_name(v, p, table); }},
      };
      const auto seen = walk(entry, item, fields);
      if (seen && !seen->contains("name")) error(join(item, "name"), std::string(kMissing));
    } else {
      error(item, "expected schema.table or a map with name, got " + describe(entry));
    }
    config_.exclude.push_back(std::move(table));
  }
}

void Loader::read_messages(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) {
    error(path, "expected a list of message outboxes, got " + describe(node));
    messages_malformed_ = true;
    return;
  }
  std::map<std::string, std::string> prefixes;  // prefix → path of the entry that has it
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    MessageOutboxConfig message;
    const Field fields[] = {
        {"prefix",
         [&](const YAML::Node& v, const std::string& p) {
           auto s = nonempty_string(v, p);
           if (!s) return;
           const auto [it, added] = prefixes.emplace(*s, item);
           if (!added) {
             error(p, "duplicate prefix " + quoted(*s) + " (also in " + it->second + ")");
             return;
           }
           message.prefix = std::move(*s);
         }},
        {"outbox",
         [&](const YAML::Node& v, const std::string& p) {
           if (v.IsNull()) {
             error(p,
                   "expected a map (write `outbox: {}` or leave it out for the default "
                   "field names)");
             return;
           }
           read_outbox(v, p, message.outbox);
           if (message.outbox.poll) {
             error(join(p, "poll"), "only outbox tables are polled (tables[].outbox.poll)");
           }
         }},
    };
    const auto seen = walk(node[i], item, fields);
    if (seen && !seen->contains("prefix")) error(join(item, "prefix"), std::string(kMissing));
    config_.messages.push_back(std::move(message));
  }
}

void Loader::read_outbox(const YAML::Node& node, const std::string& path, OutboxConfig& outbox) {
  auto column = [this](std::string& target) {
    return [this, &target](const YAML::Node& v, const std::string& p) {
      if (auto s = nonempty_string(v, p)) target = std::move(*s);
    };
  };
  auto optional_column = [this](std::optional<std::string>& target) {
    return [this, &target](const YAML::Node& v, const std::string& p) {
      if (auto s = nonempty_string(v, p)) target = std::move(*s);
    };
  };
  const Field fields[] = {
      {"event_id", column(outbox.event_id)},
      {"aggregate_id", column(outbox.aggregate_id)},
      {"aggregate_type", column(outbox.aggregate_type)},
      {"payload", column(outbox.payload)},
      {"event_type", optional_column(outbox.event_type)},
      {"timestamp", optional_column(outbox.timestamp)},
      {"additional",
       [&](const YAML::Node& v, const std::string& p) { read_additional(v, p, outbox); }},
      {"topic",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = nonempty_string(v, p);
         if (!s) return;
         if (auto problem = topic_template_problem(*s, kOutboxPlaceholders)) {
           error(p, std::move(*problem));
         } else {
           outbox.topic = std::move(*s);
         }
       }},
      {"payload_digest",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) outbox.payload_digest = *b;
       }},
      {"allow_empty_aggregate_id",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) outbox.allow_empty_aggregate_id = *b;
       }},
      {"tombstone_on_empty_payload",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) outbox.tombstone_on_empty_payload = *b;
       }},
      {"poll", [&](const YAML::Node& v,
                   const std::string& p) { read_outbox_poll(v, p, outbox.poll.emplace()); }},
  };
  walk(node, path, fields);

  // Headers walrelay sets itself must not be set twice (consumers would see two values).
  for (const AdditionalField& field : outbox.additional) {
    const char* owner = field.header == header::kId                               ? "event_id"
                        : field.header == header::kEventType && outbox.event_type ? "event_type"
                        : field.header == header::kPayloadDigest && outbox.payload_digest
                            ? "payload_digest"
                            : nullptr;
    if (owner != nullptr) {
      error(join(join(path, "additional"), field.column),
            "header " + quoted(field.header) + " is already set from " + owner);
    }
  }
}

void Loader::read_additional(const YAML::Node& node, const std::string& path,
                             OutboxConfig& outbox) {
  if (!node.IsMap()) {
    error(path, "expected a map of column: \"header\" or \"header:<name>\", got " + describe(node));
    return;
  }
  std::set<std::string> columns;
  std::map<std::string, std::string> headers;  // header → column that sets it
  for (const auto& entry : node) {
    if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
      error(path, "expected a column name, got " + describe(entry.first));
      continue;
    }
    const std::string& column = entry.first.Scalar();
    const std::string child = join(path, column);
    if (!columns.insert(column).second) {
      error(child, "duplicate key");
      continue;
    }
    const auto value = scalar(entry.second, child, "\"header\" or \"header:<name>\"");
    if (!value) continue;
    const std::size_t colon = value->find(':');
    const std::string_view placement = std::string_view(*value).substr(0, colon);
    if (placement != "header") {
      error(child,
            "only header placement is supported: expected \"header\" or "
            "\"header:<name>\", got " +
                quoted(*value));
      continue;
    }
    std::string header = colon == std::string::npos ? column : value->substr(colon + 1);
    if (header.empty()) {
      error(child, "header name after \"header:\" must not be empty");
      continue;
    }
    const auto [it, added] = headers.emplace(header, column);
    if (!added) {
      error(child, "header " + quoted(header) + " is also set by column " + quoted(it->second));
      continue;
    }
    outbox.additional.push_back(AdditionalField{column, std::move(header)});
  }
}

}  // namespace walrelay::config::loading
