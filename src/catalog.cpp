#include "catalog.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <vector>

#include "client_encoding.hpp"
#include "replication/pg_notices.hpp"

namespace walrelay {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// RAII for PGresult.
struct Result {
  PGresult* res;
  ~Result() { PQclear(res); }
  [[nodiscard]] bool ok() const {
    const auto st = PQresultStatus(res);
    return st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
  }
  [[nodiscard]] int rows() const { return PQntuples(res); }
  [[nodiscard]] std::string get(int r, int c) const { return PQgetvalue(res, r, c); }
  [[nodiscard]] bool null(int r, int c) const { return PQgetisnull(res, r, c) != 0; }
};

Result exec(PGconn* conn, const char* sql, std::initializer_list<std::string_view> params) {
  std::vector<std::string> owned(params.begin(), params.end());
  std::vector<const char*> values;
  values.reserve(owned.size());
  for (const auto& p : owned) values.push_back(p.c_str());
  return Result{PQexecParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(),
                             nullptr, nullptr, 0)};
}

constexpr const char* kTypesSql =
    "SELECT t.oid, format_type(t.oid, NULL), t.typcategory, t.typtype, t.typelem, "
    "t.typbasetype, t.typdelim, t.typtypmod FROM pg_catalog.pg_type t";

// One row of kTypesSql.
router::TypeInfo type_info(const Result& r, int i) {
  router::TypeInfo t;
  t.oid = static_cast<std::uint32_t>(std::stoul(r.get(i, 0)));
  t.name = r.get(i, 1);
  t.category = r.get(i, 2).empty() ? 'U' : r.get(i, 2)[0];
  t.kind = r.get(i, 3).empty() ? 'b' : r.get(i, 3)[0];
  t.element = t.category == 'A' ? static_cast<std::uint32_t>(std::stoul(r.get(i, 4))) : 0;
  t.base = static_cast<std::uint32_t>(std::stoul(r.get(i, 5)));
  t.delimiter = r.get(i, 6).empty() ? ',' : r.get(i, 6)[0];
  t.base_typmod = static_cast<std::int32_t>(std::stol(r.get(i, 7)));
  return t;
}

}  // namespace

Catalog::Catalog(std::string conninfo, std::string application_name, router::TypeRegistry& types)
    : conninfo_(std::move(conninfo)),
      application_name_(replication::fit_application_name(std::move(application_name))),
      types_(types) {}

Catalog::~Catalog() {
  if (conn_ != nullptr) PQfinish(conn_);
}

bool Catalog::ensure_connected() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return true;
  if (conn_ != nullptr) PQreset(conn_);
  // A reset session starts with the server's default client_encoding again.
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK && use_walrelay_client_encoding(conn_)) {
    return true;
  }
  return static_cast<bool>(connect());
}

std::expected<void, std::string> Catalog::connect() {
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  const char* keywords[] = {"dbname", "application_name", nullptr};
  const char* values[] = {conninfo_.c_str(), application_name_.c_str(), nullptr};
  conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  replication::route_notices_to_log(conn_);
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    last_error_ = conn_ != nullptr ? trim(PQerrorMessage(conn_)) : "out of memory";
    return std::unexpected("catalog connection: " + last_error_);
  }
  if (auto encoded = use_walrelay_client_encoding(conn_); !encoded) {
    last_error_ = encoded.error();
    return std::unexpected("catalog connection: " + last_error_);
  }
  Result r{PQexec(conn_, kTypesSql)};
  if (!r.ok()) {
    last_error_ = trim(PQresultErrorMessage(r.res));
    return std::unexpected("cannot read pg_type: " + last_error_);
  }
  for (int i = 0; i < r.rows(); ++i) types_.add(type_info(r, i));
  return {};
}

std::expected<std::unique_ptr<router::TableSchema>, std::string> Catalog::load(
    std::string_view schema, std::string_view table) {
  Result rel =
      exec(conn_,
           "SELECT c.oid, c.relreplident, coalesce(rn.nspname, n.nspname), "
           "coalesce(rc.relname, c.relname) "
           "FROM pg_catalog.pg_class c "
           "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
           "LEFT JOIN pg_catalog.pg_class rc ON rc.oid = pg_catalog.pg_partition_root(c.oid) "
           "LEFT JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace "
           "WHERE n.nspname = $1 AND c.relname = $2",
           {schema, table});
  if (!rel.ok()) return std::unexpected(trim(PQresultErrorMessage(rel.res)));
  auto ts = std::make_unique<router::TableSchema>();
  ts->schema = std::string(schema);
  ts->table = std::string(table);
  if (rel.rows() == 0) return std::unique_ptr<router::TableSchema>{};  // dropped since
  const std::string relid = rel.get(0, 0);
  ts->replica_identity = rel.get(0, 1).empty() ? 'd' : rel.get(0, 1)[0];
  ts->root_schema = rel.get(0, 2);
  ts->root_table = rel.get(0, 3);

  Result cols = exec(conn_,
                     "SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull, "
                     "(t.typlen = -1 AND a.attstorage <> 'p') "
                     "FROM pg_catalog.pg_attribute a "
                     "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
                     "WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped "
                     "ORDER BY a.attnum",
                     {relid});
  if (!cols.ok()) return std::unexpected(trim(PQresultErrorMessage(cols.res)));
  for (int i = 0; i < cols.rows(); ++i) {
    router::ColumnInfo c;
    c.name = cols.get(i, 0);
    c.type_oid = static_cast<std::uint32_t>(std::stoul(cols.get(i, 1)));
    c.typmod = std::stoi(cols.get(i, 2));
    c.not_null = cols.get(i, 3) == "t";
    c.toastable = cols.get(i, 4) == "t";
    ts->columns.push_back(std::move(c));
  }

  Result pk = exec(conn_,
                   "SELECT a.attname FROM pg_catalog.pg_index i "
                   "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid "
                   "AND a.attnum = ANY (i.indkey) "
                   "WHERE i.indrelid = $1 AND i.indisprimary AND i.indimmediate "
                   "ORDER BY array_position(i.indkey::int2[], a.attnum)",
                   {relid});
  if (!pk.ok()) return std::unexpected(trim(PQresultErrorMessage(pk.res)));
  for (int i = 0; i < pk.rows(); ++i) ts->primary_key.push_back(pk.get(i, 0));

  if (ts->replica_identity == 'i') {
    Result ri = exec(conn_,
                     "SELECT a.attname FROM pg_catalog.pg_index i "
                     "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid "
                     "AND a.attnum = ANY (i.indkey) "
                     "WHERE i.indrelid = $1 AND i.indisreplident "
                     "ORDER BY array_position(i.indkey::int2[], a.attnum)",
                     {relid});
    if (!ri.ok()) return std::unexpected(trim(PQresultErrorMessage(ri.res)));
    for (int i = 0; i < ri.rows(); ++i) ts->replica_identity_index.push_back(ri.get(i, 0));
  }

  Result uk = exec(conn_,
                   "SELECT i.indexrelid::text, a.attname, a.attnotnull "
                   "FROM pg_catalog.pg_index i "
                   "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
                   "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid "
                   "AND a.attnum = k.attnum "
                   "WHERE i.indrelid = $1 AND i.indisunique AND i.indimmediate AND i.indisvalid "
                   "AND i.indpred IS NULL AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts "
                   "ORDER BY i.indexrelid, k.ord",
                   {relid});
  if (!uk.ok()) return std::unexpected(trim(PQresultErrorMessage(uk.res)));
  {
    std::string index;
    bool usable = true;
    std::vector<std::string> key_cols;
    auto flush = [&] {
      if (!index.empty() && usable && !key_cols.empty()) ts->unique_keys.push_back(key_cols);
      key_cols.clear();
      usable = true;
    };
    for (int i = 0; i < uk.rows(); ++i) {
      if (uk.get(i, 0) != index) {
        flush();
        index = uk.get(i, 0);
      }
      key_cols.push_back(uk.get(i, 1));
      if (uk.get(i, 2) != "t") usable = false;  // NULLs are not unique, and compare as NULL
    }
    flush();
  }

  // Types created after start-up (enums, domains, composites) are read on first use.
  // An array's element and a domain's base may be new too (an array of a new domain over a new
  // enum): follow them, a few hops at most.
  for (const auto& c : ts->columns) {
    std::uint32_t next = c.type_oid;
    for (int hops = 0; hops < 8 && next != 0 && types_.find(next) == nullptr; ++hops) {
      Result t = exec(conn_, (std::string(kTypesSql) + " WHERE t.oid = $1::oid").c_str(),
                      {std::to_string(next)});
      if (!t.ok() || t.rows() != 1) break;
      router::TypeInfo info = type_info(t, 0);
      next = info.element != 0 ? info.element : info.base;
      types_.add(std::move(info));
    }
  }
  return ts;
}

std::expected<std::vector<std::vector<std::optional<std::string>>>, std::string> Catalog::query(
    const std::string& sql) {
  if (!ensure_connected()) return std::unexpected("catalog connection: " + last_error_);
  Result r{PQexec(conn_, sql.c_str())};
  if (!r.ok()) return std::unexpected(trim(PQresultErrorMessage(r.res)));
  std::vector<std::vector<std::optional<std::string>>> rows;
  rows.reserve(static_cast<std::size_t>(r.rows()));
  const int cols = PQnfields(r.res);
  for (int i = 0; i < r.rows(); ++i) {
    auto& row = rows.emplace_back();
    for (int c = 0; c < cols; ++c) {
      row.push_back(r.null(i, c) ? std::nullopt : std::optional<std::string>(r.get(i, c)));
    }
  }
  return rows;
}

const router::TableSchema* Catalog::table(std::string_view schema, std::string_view table,
                                          bool refresh) {
  std::string key(schema);
  key.push_back('\0');
  key.append(table);
  auto it = tables_.find(key);
  if (it != tables_.end() && !refresh) return it->second.get();
  if (!ensure_connected()) {
    spdlog::warn("catalog lookup of {}.{} failed: {}", schema, table, last_error_);
    return it != tables_.end() ? it->second.get() : nullptr;
  }
  auto loaded = load(schema, table);
  if (!loaded) {
    last_error_ = loaded.error();
    spdlog::warn("catalog lookup of {}.{} failed: {}", schema, table, last_error_);
    return it != tables_.end() ? it->second.get() : nullptr;
  }
  auto& slot = tables_[key];
  // Pointers handed out earlier stay valid (the router and the snapshot readers keep them): the
  // old shape is retired, not freed. Only DDL makes this grow.
  if (!*loaded) {  // dropped since: nothing current under this name
    if (slot) retired_.push_back(std::move(slot));
    tables_.erase(key);
    return nullptr;
  }
  if (slot && **loaded == *slot) return slot.get();  // unchanged: the same pointer
  if (slot) retired_.push_back(std::move(slot));
  slot = std::move(*loaded);
  return slot.get();
}

}  // namespace walrelay
