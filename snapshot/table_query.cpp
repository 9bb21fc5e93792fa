#include "walrelay/snapshot/table_query.hpp"

#include <algorithm>

#include "walrelay/core/json.hpp"
#include "walrelay/decoder/utf8.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay::snapshot {

namespace {

// Why the row's names or values are not UTF-8, or nullopt (SQL_ASCII: texts arrive as stored).
std::optional<std::string> not_utf8(const TableReadPlan& plan,
                                    std::span<const std::optional<std::string_view>> values) {
  const auto& cols = plan.shape->columns;
  const auto where = [](std::string_view text, std::size_t at) {
    return " (byte sequence " + decoder::hex_bytes(text, at) + " at offset " + std::to_string(at) +
           "; server_encoding SQL_ASCII, allowed by source.allow_sql_ascii)";
  };
  for (const std::string* name : {&plan.shape->schema, &plan.shape->table}) {
    if (auto at = decoder::first_invalid_utf8(*name)) {
      return "the table's name is not UTF-8" + where(*name, *at);
    }
  }
  for (std::size_t i = 0; i < cols.size() && i < values.size(); ++i) {
    if (auto at = decoder::first_invalid_utf8(cols[i].name)) {
      return "a column's name is not UTF-8" + where(cols[i].name, *at);
    }
    if (!values[i]) continue;
    if (auto at = decoder::first_invalid_utf8(*values[i])) {
      return "the value of column " + cols[i].name + " is not UTF-8" + where(*values[i], *at);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<TableReadPlan> make_read_plan(const router::TableSchema& shape,
                                            const std::vector<std::string>& preferred_key) {
  TableReadPlan plan;
  plan.shape = &shape;
  plan.key = shape.primary_key;
  if (plan.key.empty() && !shape.unique_keys.empty()) {
    plan.key = shape.unique_keys.front();
    auto sorted = [](std::vector<std::string> v) {
      std::sort(v.begin(), v.end());
      return v;
    };
    for (const auto& k : shape.unique_keys) {
      if (sorted(k) == sorted(preferred_key)) plan.key = preferred_key;
    }
  }
  for (const auto& k : plan.key) {
    const router::ColumnInfo* found = nullptr;
    for (std::size_t i = 0; i < shape.columns.size(); ++i) {
      if (shape.columns[i].name == k) {
        plan.key_index.push_back(i);
        found = &shape.columns[i];
      }
    }
    if (found == nullptr) return std::nullopt;
    plan.key_types.push_back(found->type_oid);
  }
  for (const auto& k : shape.primary_key) plan.pk.emplace_back(k);
  for (const auto& c : shape.columns) {
    plan.name_json.emplace_back();
    json::append_string(plan.name_json.back(), c.name);
  }
  plan.select = "SELECT ";
  for (std::size_t i = 0; i < shape.columns.size(); ++i) {
    if (i > 0) plan.select += ", ";
    plan.select += pg::quote_ident(shape.columns[i].name);
  }
  // ONLY: an inheritance parent's own rows (its children's changes are streamed under their own
  // names); a partitioned table's rows are all in its partitions.
  plan.select += shape.partitioned ? " FROM " : " FROM ONLY ";
  plan.select += pg::quote_ident(shape.schema) + "." + pg::quote_ident(shape.table);
  return plan;
}

namespace {

// The keyset query; `after`: the comma-separated values the key must be greater than (empty:
// from the table's start).
std::string keyset_query(const TableReadPlan& plan, const std::string& after, std::size_t limit) {
  std::string sql = plan.select;
  std::string cols;
  for (std::size_t i = 0; i < plan.key.size(); ++i) {
    cols += (i > 0 ? ", " : "") + pg::quote_ident(plan.key[i]);
  }
  if (!after.empty()) sql += " WHERE (" + cols + ") > (" + after + ")";
  sql += " ORDER BY " + cols + " LIMIT " + std::to_string(limit);
  return sql;
}

// A string literal that means `value` whatever standard_conforming_strings says: with a
// backslash in it, an escape string (E'...', PostgreSQL docs §4.1.2.2), as PQescapeLiteral writes.
std::string key_literal(const std::string& value) {
  const bool backslash = value.find('\\') != std::string::npos;
  std::string out = backslash ? "E'" : "'";
  for (const char c : value) {
    if (c == '\'' || c == '\\') out.push_back(c);
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

}  // namespace

std::string chunk_query(const TableReadPlan& plan, bool after_key, std::size_t limit) {
  std::string args;
  for (std::size_t i = 0; after_key && i < plan.key.size(); ++i) {
    args += (i > 0 ? ", $" : "$") + std::to_string(i + 1);
  }
  return keyset_query(plan, args, limit);
}

std::string chunk_query_literal(const TableReadPlan& plan, const KeyText* after,
                                std::size_t limit) {
  std::string literals;
  for (std::size_t i = 0; after != nullptr && i < plan.key.size(); ++i) {
    const auto& v = i < after->size() ? (*after)[i] : std::nullopt;
    literals += (i > 0 ? ", " : "") + (v ? key_literal(*v) : std::string("NULL"));
  }
  return keyset_query(plan, literals, limit);
}

std::string same_file_query(const TableReadPlan& plan) {
  const std::string regclass = "to_regclass(" +
                               pg::quote_literal(pg::quote_ident(plan.shape->schema) + "." +
                                                 pg::quote_ident(plan.shape->table)) +
                               ")";
  return "SELECT coalesce(bool_and(c.relfilenode = pg_relation_filenode(c.oid)), true) FROM "
         "pg_catalog.pg_class c WHERE c.oid IN (SELECT " +
         regclass + " UNION ALL SELECT relid FROM pg_catalog.pg_partition_tree(" + regclass +
         ") WHERE isleaf)";
}

std::expected<void, std::string> build_row_change(
    const TableReadPlan& plan, std::span<const std::optional<std::string_view>> values,
    decoder::NumericTokens numerics, bool check_utf8, Lsn lsn, std::uint64_t xid,
    decoder::Change& change, std::string& tokens) {
  const auto& cols = plan.shape->columns;
  if (check_utf8) {
    if (auto bad = not_utf8(plan, values)) return std::unexpected(std::move(*bad));
  }
  tokens.clear();
  // Token end offsets first (the buffer may grow), views after.
  thread_local std::vector<std::size_t> ends;
  ends.clear();
  for (std::size_t i = 0; i < cols.size(); ++i) {
    if (!decoder::append_wal2json_value(tokens, values[i], cols[i].type_oid, numerics)) {
      return std::unexpected("column " + cols[i].name + " value '" + std::string(*values[i]) +
                             "' is not a number");
    }
    ends.push_back(tokens.size());
  }
  change.action = decoder::Action::kInsert;
  change.xid = xid;
  change.lsn = lsn;
  change.schema = plan.shape->schema;
  change.table = plan.shape->table;
  change.pk = plan.pk;
  change.identity.clear();
  change.columns.resize(cols.size());
  std::size_t begin = 0;
  const std::string_view all(tokens);
  for (std::size_t i = 0; i < cols.size(); ++i) {
    change.columns[i] = decoder::Column{cols[i].name, plan.name_json[i], cols[i].type_oid,
                                        all.substr(begin, ends[i] - begin)};
    begin = ends[i];
  }
  return {};
}

KeyText key_of(const TableReadPlan& plan, std::span<const std::optional<std::string_view>> values) {
  KeyText key;
  for (std::size_t k : plan.key_index) {
    if (values[k]) {
      key.emplace_back(std::string(*values[k]));
    } else {
      key.emplace_back(std::nullopt);
    }
  }
  return key;
}

}  // namespace walrelay::snapshot
