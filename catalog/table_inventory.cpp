#include "walrelay/catalog/table_inventory.hpp"

#include <set>

namespace walrelay {

namespace {

// A text[] column as PostgreSQL prints it ({a,"b c"}): identifiers only, so quoting is simple.
std::vector<std::string> parse_name_array(const std::string& text) {
  std::vector<std::string> out;
  if (text.size() < 2) return out;
  std::string cur;
  bool quoted = false;
  bool any = false;
  for (std::size_t i = 1; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 2 < text.size()) {
        cur.push_back(text[++i]);
      } else if (c == '"') {
        quoted = false;
      } else {
        cur.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur.push_back(c);
      any = true;
    }
  }
  if (any || !cur.empty()) out.push_back(cur);
  return out;
}

// Index columns in the index's order (not attnum order): Debezium keys by the key's own order.
constexpr const char* kIndexColumns =
    "(SELECT pg_catalog.array_agg(a.attname::text ORDER BY "
    "pg_catalog.array_position(i.indkey::int2[], a.attnum)) FROM pg_catalog.pg_index i "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
    "WHERE i.indrelid = c.oid AND ";

}  // namespace

std::string glob_to_like(const std::string& glob) {
  std::string out;
  for (char c : glob) {
    if (c == '*') {
      out.push_back('%');
    } else {
      if (c == '%' || c == '_' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
  }
  return out;
}

std::expected<std::vector<MatchedTable>, std::string> match_tables(
    pg::ReplicationStream& stream, const config::Config& cfg, std::vector<std::string>* unmatched,
    std::vector<SkippedRelation>* skipped) {
  return match_tables([&stream](const std::string& sql) { return stream.query(sql); }, cfg,
                      unmatched, skipped);
}

TableMatcher::TableMatcher(const config::Config& cfg) : cfg_(cfg) {}

std::string TableMatcher::query(std::size_t e) const {
  const auto& tc = cfg_.tables[e];
  return std::string(
             "SELECT n.nspname, c.relname, c.relreplident, "
             "EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND "
             "i.indisprimary AND i.indimmediate), c.relkind, ") +
         kIndexColumns + "i.indisprimary), " + kIndexColumns +
         "i.indisreplident), c.relpersistence "
         "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
         "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition "
         "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
         "AND n.nspname NOT LIKE 'pg\\_toast%' "
         "AND n.nspname LIKE " +
         pg::quote_literal(glob_to_like(tc.schema_pattern)) + " AND c.relname LIKE " +
         pg::quote_literal(glob_to_like(tc.table_pattern)) + " ORDER BY 1, 2";
}

void TableMatcher::take(std::size_t e, const std::vector<pg::ReplicationStream::Row>& rows) {
  const auto& tc = cfg_.tables[e];
  bool any = false;
  for (const auto& r : rows) {
    MatchedTable t;
    t.entry = e;
    t.schema = r[0].value_or("");
    t.table = r[1].value_or("");
    const std::string kind = r[4].value_or("r");
    const std::string persistence = r[7].value_or("p");
    const char* what = kind == "v"          ? "a view"
                       : kind == "m"        ? "a materialized view"
                       : kind == "f"        ? "a foreign table"
                       : persistence == "u" ? "an unlogged table"
                       : persistence == "t" ? "a temporary table"
                                            : nullptr;
    if (what == nullptr) any = true;
    if (!seen_.insert(t.schema + '\0' + t.table).second) continue;
    if (what != nullptr) {
      const bool named = tc.schema_pattern.find('*') == std::string::npos &&
                         tc.table_pattern.find('*') == std::string::npos;
      skipped.push_back({e, t.schema, t.table, what, named});
      continue;
    }
    t.replica_identity = r[2].value_or("d").empty() ? 'd' : r[2].value_or("d")[0];
    t.has_primary_key = r[3].value_or("f") == "t";
    t.partitioned = r[4].value_or("r") == "p";
    if (t.has_primary_key) t.primary_key = parse_name_array(r[5].value_or(""));
    t.replica_identity_key = parse_name_array(r[6].value_or(""));
    matched.push_back(std::move(t));
  }
  if (!any) unmatched.push_back(tc.name);
}

std::expected<std::vector<MatchedTable>, std::string> match_tables(
    const CatalogQuery& query, const config::Config& cfg, std::vector<std::string>* unmatched,
    std::vector<SkippedRelation>* skipped) {
  TableMatcher matcher(cfg);
  for (std::size_t e = 0; e < cfg.tables.size(); ++e) {
    auto rows = query(matcher.query(e));
    if (!rows) {
      return std::unexpected("cannot look up tables for '" + cfg.tables[e].name +
                             "': " + rows.error());
    }
    matcher.take(e, *rows);
  }
  if (unmatched != nullptr) *unmatched = std::move(matcher.unmatched);
  if (skipped != nullptr) *skipped = std::move(matcher.skipped);
  return std::move(matcher.matched);
}

std::vector<std::string> event_key_columns(const MatchedTable& t, const config::Config& cfg) {
  const auto& tc = cfg.tables[t.entry];
  if (!tc.key_columns.empty()) return tc.key_columns;
  if (!t.primary_key.empty()) return t.primary_key;
  if (t.replica_identity == 'i') return t.replica_identity_key;
  return {};
}

}  // namespace walrelay
