#include "walrelay/catalog/catalog.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <vector>

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/client_encoding.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay {

namespace {

using Rows = pg::AsyncConnection::Rows;

// A query's rows, or the server's error (blocking; `params` as text).
std::expected<Rows, pg::Error> exec_blocking(PGconn* conn, const std::string& sql,
                                             const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  PGresult* res = params.empty() ? PQexec(conn, sql.c_str())
                                 : PQexecParams(conn, sql.c_str(), static_cast<int>(values.size()),
                                                nullptr, values.data(), nullptr, nullptr, 0);
  const auto st = PQresultStatus(res);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    pg::Error error = pg::error_from_result(res, conn);  // an empty message: the connection's
    PQclear(res);
    return std::unexpected(std::move(error));
  }
  Rows rows;
  const int cols = PQnfields(res);
  for (int i = 0; i < PQntuples(res); ++i) {
    auto& row = rows.emplace_back();
    for (int c = 0; c < cols; ++c) {
      row.push_back(PQgetisnull(res, i, c) != 0
                        ? std::nullopt
                        : std::optional<std::string>(PQgetvalue(res, i, c)));
    }
  }
  PQclear(res);
  return rows;
}

std::string cell(const Rows& rows, std::size_t r, std::size_t c) {
  return rows[r][c].value_or("");
}

constexpr const char* kTypesSql =
    "SELECT t.oid, format_type(t.oid, NULL), t.typcategory, t.typtype, t.typelem, "
    "t.typbasetype, t.typdelim, t.typtypmod FROM pg_catalog.pg_type t";

// One row of kTypesSql.
router::TypeInfo type_info(const Rows& r, std::size_t i) {
  router::TypeInfo t;
  t.oid = static_cast<std::uint32_t>(std::stoul(cell(r, i, 0)));
  t.name = cell(r, i, 1);
  t.category = cell(r, i, 2).empty() ? 'U' : cell(r, i, 2)[0];
  t.kind = cell(r, i, 3).empty() ? 'b' : cell(r, i, 3)[0];
  t.element = t.category == 'A' ? static_cast<std::uint32_t>(std::stoul(cell(r, i, 4))) : 0;
  t.base = static_cast<std::uint32_t>(std::stoul(cell(r, i, 5)));
  t.delimiter = cell(r, i, 6).empty() ? ',' : cell(r, i, 6)[0];
  t.base_typmod = static_cast<std::int32_t>(std::stol(cell(r, i, 7)));
  return t;
}

}  // namespace

// Loading one table's shape: a sequence of catalog queries, each depending on the answers before
// it, so that the blocking and the asynchronous paths run the same queries and parse them alike.
class Catalog::Load {
 public:
  struct Query {
    std::string sql;
    std::vector<std::string> params;
  };

  /// `writer_xid`: the (32-bit) transaction whose decoded change needs this shape, 0 if none; see
  /// Step::kWriterFinishing.
  Load(std::string_view schema, std::string_view table, router::TypeRegistry& types,
       std::uint32_t writer_xid = 0)
      : types_(types), ts_(std::make_unique<router::TableSchema>()), writer_xid_(writer_xid) {
    ts_->schema = std::string(schema);
    ts_->table = std::string(table);
  }

  /// The next query to run, or nullopt when the shape is complete.
  std::optional<Query> next() {
    switch (step_) {
      case Step::kRelation:
        return Query{
            "SELECT c.oid, c.relreplident, coalesce(rn.nspname, n.nspname), "
            "coalesce(rc.relname, c.relname), c.relkind "
            "FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_catalog.pg_class rc ON rc.oid = "
            "pg_catalog.pg_partition_root(c.oid) "
            "LEFT JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace "
            "WHERE n.nspname = $1 AND c.relname = $2",
            {ts_->schema, ts_->table}};
      case Step::kWriterFinishing:
        // A row while the transaction still holds the lock on its own xid, which it releases
        // after it has left the ProcArray (PostgreSQL docs §28.1 "pg_locks": every transaction
        // holds an ExclusiveLock on its transaction id for its whole duration); waits 5 ms then.
        return Query{
            "SELECT pg_catalog.pg_sleep(0.005) FROM pg_catalog.pg_locks "
            "WHERE locktype = 'transactionid' AND transactionid = $1::xid",
            {std::to_string(writer_xid_)}};
      case Step::kColumns:
        return Query{
            "SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull, "
            "(t.typlen = -1 AND a.attstorage <> 'p'), a.xmin "
            "FROM pg_catalog.pg_attribute a "
            "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum",
            {relid_}};
      case Step::kPrimaryKey:
        return Query{
            "SELECT a.attname FROM pg_catalog.pg_index i "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY (i.indkey) "
            "WHERE i.indrelid = $1 AND i.indisprimary AND i.indimmediate "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)",
            {relid_}};
      case Step::kIdentityIndex:
        return Query{
            "SELECT a.attname FROM pg_catalog.pg_index i "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY (i.indkey) "
            "WHERE i.indrelid = $1 AND i.indisreplident "
            "ORDER BY array_position(i.indkey::int2[], a.attnum)",
            {relid_}};
      case Step::kUniqueKeys:
        return Query{
            // Usable per column: NOT NULL, and equal values for the index are equal for the
            // column's own collation (which orders and compares the chunks), i.e. the same
            // collation, or a deterministic one on the column.
            "SELECT i.indexrelid::text, a.attname, a.attnotnull AND "
            "(i.indcollation[(k.ord - 1)::int] = a.attcollation OR coalesce((SELECT "
            "co.collisdeterministic FROM pg_catalog.pg_collation co WHERE co.oid = "
            "a.attcollation), true)) "
            "FROM pg_catalog.pg_index i "
            "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
            "JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = k.attnum "
            "WHERE i.indrelid = $1 AND i.indisunique AND i.indimmediate AND i.indisvalid "
            "AND i.indpred IS NULL AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts "
            "ORDER BY i.indexrelid, k.ord",
            {relid_}};
      case Step::kTypes:
        // Types created after start-up (enums, domains, composites) are read on first use.
        // An array's element and a domain's base may be new too (an array of a new domain over a
        // new enum): follow them, a few hops at most.
        while (column_ < ts_->columns.size()) {
          if (hops_ < 8 && type_ != 0 && types_.find(type_) == nullptr) {
            return Query{std::string(kTypesSql) + " WHERE t.oid = $1::oid",
                         {std::to_string(type_)}};
          }
          next_column();
        }
        step_ = Step::kDone;
        return std::nullopt;
      case Step::kDone:
        return std::nullopt;
    }
    return std::nullopt;
  }

  /// The answer to next()'s query. An error fails the load, except while following a type (that
  /// column's type stays unknown, as before).
  std::expected<void, std::string> take(const std::expected<Rows, std::string>& rows) {
    if (!rows && step_ != Step::kTypes) return std::unexpected(rows.error());
    switch (step_) {
      case Step::kRelation:
        if (rows->empty() && writer_xid_ != 0 && waits_ < kMaxWriterWaits) {
          // Not there, yet the change naming it was decoded: its transaction (one that created
          // the table, say) may have written its commit record without being visible to new
          // snapshots yet. Asked again once it has ended.
          step_ = Step::kWriterFinishing;
          return {};
        }
        if (rows->empty()) {  // dropped since
          gone_ = true;
          step_ = Step::kDone;
          return {};
        }
        relid_ = cell(*rows, 0, 0);
        ts_->replica_identity = cell(*rows, 0, 1).empty() ? 'd' : cell(*rows, 0, 1)[0];
        ts_->root_schema = cell(*rows, 0, 2);
        ts_->root_table = cell(*rows, 0, 3);
        ts_->partitioned = cell(*rows, 0, 4) == "p";
        ts_->kind = cell(*rows, 0, 4).empty() ? 'r' : cell(*rows, 0, 4)[0];
        step_ = Step::kColumns;
        return {};
      case Step::kWriterFinishing:
        if (rows->empty()) {
          writer_xid_ = 0;  // ended: the relation's next answer is final
        } else {
          ++waits_;  // still ending (5 ms waited)
        }
        step_ = Step::kRelation;
        return {};
      case Step::kColumns:
        for (std::size_t i = 0; i < rows->size(); ++i) {
          router::ColumnInfo c;
          c.name = cell(*rows, i, 0);
          c.type_oid = static_cast<std::uint32_t>(std::stoul(cell(*rows, i, 1)));
          c.typmod = std::stoi(cell(*rows, i, 2));
          c.not_null = cell(*rows, i, 3) == "t";
          c.toastable = cell(*rows, i, 4) == "t";
          c.attribute_xmin = static_cast<std::uint32_t>(std::stoul(cell(*rows, i, 5)));
          ts_->columns.push_back(std::move(c));
        }
        step_ = Step::kPrimaryKey;
        return {};
      case Step::kPrimaryKey:
        for (std::size_t i = 0; i < rows->size(); ++i)
          ts_->primary_key.push_back(cell(*rows, i, 0));
        step_ = ts_->replica_identity == 'i' ? Step::kIdentityIndex : Step::kUniqueKeys;
        return {};
      case Step::kIdentityIndex:
        for (std::size_t i = 0; i < rows->size(); ++i) {
          ts_->replica_identity_index.push_back(cell(*rows, i, 0));
        }
        step_ = Step::kUniqueKeys;
        return {};
      case Step::kUniqueKeys:
        take_unique_keys(*rows);
        step_ = Step::kTypes;
        column_ = 0;
        type_ = ts_->columns.empty() ? 0 : ts_->columns[0].type_oid;
        hops_ = 0;
        return {};
      case Step::kTypes:
        if (!rows || rows->size() != 1) {
          next_column();
          return {};
        }
        {
          router::TypeInfo info = type_info(*rows, 0);
          type_ = info.element != 0 ? info.element : info.base;
          ++hops_;
          types_.add(std::move(info));
        }
        return {};
      case Step::kDone:
        return {};
    }
    return {};
  }

  /// The loaded shape once next() returned nullopt: nullptr when the table does not exist.
  std::unique_ptr<router::TableSchema> result() {
    if (gone_) return nullptr;
    return std::move(ts_);
  }

 private:
  enum class Step : std::uint8_t {
    kRelation,
    kWriterFinishing,  // the relation was not found: is the change's transaction still ending?
    kColumns,
    kPrimaryKey,
    kIdentityIndex,
    kUniqueKeys,
    kTypes,
    kDone
  };

  void next_column() {
    ++column_;
    hops_ = 0;
    type_ = column_ < ts_->columns.size() ? ts_->columns[column_].type_oid : 0;
  }

  void take_unique_keys(const Rows& uk) {
    std::string index;
    bool usable = true;
    std::vector<std::string> key_cols;
    auto flush = [&] {
      if (!index.empty() && usable && !key_cols.empty()) ts_->unique_keys.push_back(key_cols);
      key_cols.clear();
      usable = true;
    };
    for (std::size_t i = 0; i < uk.size(); ++i) {
      if (cell(uk, i, 0) != index) {
        flush();
        index = cell(uk, i, 0);
      }
      key_cols.push_back(cell(uk, i, 1));
      // NULLs are not unique, and compare as NULL; a column whose collation ties what the index
      // tells apart would make keyset chunks skip rows.
      if (cell(uk, i, 2) != "t") usable = false;
    }
    flush();
  }

  router::TypeRegistry& types_;
  std::unique_ptr<router::TableSchema> ts_;
  Step step_ = Step::kRelation;
  std::string relid_;
  bool gone_ = false;
  std::uint32_t writer_xid_ = 0;
  // At most ~2 s of 5 ms waits for a transaction still ending (a synchronous standby's commit
  // can wait that long); then the table counts as gone.
  static constexpr int kMaxWriterWaits = 400;
  int waits_ = 0;
  std::size_t column_ = 0;
  std::uint32_t type_ = 0;
  int hops_ = 0;
};

Catalog::Catalog(boost::asio::any_io_executor executor, std::string conninfo,
                 std::string application_name, router::TypeRegistry& types)
    : conninfo_(std::move(conninfo)),
      application_name_(pg::fit_application_name(std::move(application_name))),
      types_(types),
      async_(std::move(executor), conninfo_, application_name_) {}

Catalog::~Catalog() {
  if (blocking_ != nullptr) PQfinish(blocking_);
}

PGconn* Catalog::blocking_connection() {
  if (blocking_ != nullptr && PQstatus(blocking_) == CONNECTION_OK) return blocking_;
  if (blocking_ != nullptr) PQfinish(blocking_);
  const char* keywords[] = {"dbname", "application_name", nullptr};
  const char* values[] = {conninfo_.c_str(), application_name_.c_str(), nullptr};
  blocking_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  pg::route_notices_to_log(blocking_);
  if (blocking_ == nullptr || PQstatus(blocking_) != CONNECTION_OK) {
    connect_failure_ = pg::error_from_connection(blocking_, conninfo_);
    last_error_ = connect_failure_.message;
  } else if (auto encoded = pg::use_walrelay_client_encoding(blocking_); !encoded) {
    connect_failure_ = pg::client_error(encoded.error());
    last_error_ = encoded.error();
  } else {
    return blocking_;
  }
  if (blocking_ != nullptr) PQfinish(blocking_);
  blocking_ = nullptr;
  return nullptr;
}

std::expected<void, std::string> Catalog::connect() {
  PGconn* conn = blocking_connection();
  if (conn == nullptr) return std::unexpected("catalog connection: " + last_error_);
  auto rows = exec_blocking(conn, kTypesSql, {});
  if (!rows) {
    connect_failure_ = rows.error();
    last_error_ = rows.error().message;
    return std::unexpected("cannot read pg_type: " + last_error_);
  }
  for (std::size_t i = 0; i < rows->size(); ++i) types_.add(type_info(*rows, i));
  return {};
}

void Catalog::query_async(std::string sql, pg::AsyncConnection::Done done) {
  async_.query(std::move(sql), {}, std::move(done));
}

std::expected<std::unique_ptr<router::TableSchema>, std::string> Catalog::load(
    std::string_view schema, std::string_view table) {
  Load load(schema, table, types_);
  while (auto q = load.next()) {
    PGconn* conn = blocking_connection();
    if (conn == nullptr) return std::unexpected(last_error_);
    auto rows = exec_blocking(conn, q->sql, q->params);
    if (auto taken = load.take(rows ? std::expected<Rows, std::string>(std::move(*rows))
                                    : std::unexpected(std::move(rows.error().message)));
        !taken) {
      return std::unexpected(taken.error());
    }
  }
  return load.result();
}

namespace {
std::string table_key(std::string_view schema, std::string_view table) {
  std::string key(schema);
  key.push_back('\0');
  key.append(table);
  return key;
}
}  // namespace

bool Catalog::cached(std::string_view schema, std::string_view table) const {
  const std::string key = table_key(schema, table);
  return tables_.contains(key) || prefetched_.contains(key);
}

void Catalog::prefetch(std::string_view schema, std::string_view table, std::uint32_t writer_xid,
                       std::function<void()> done) {
  auto load = std::make_shared<Load>(schema, table, types_, writer_xid);
  std::string key = table_key(schema, table);
  load_async(std::move(load), key, [this, key, done = std::move(done)] {
    prefetched_[key] = true;  // answered from the cache, also as a failed lookup was
    done();
  });
}

void Catalog::reload(std::string_view schema, std::string_view table,
                     std::function<void(const router::TableSchema*)> done) {
  auto load = std::make_shared<Load>(schema, table, types_);
  std::string key = table_key(schema, table);
  load_async(std::move(load), key, [this, key, done = std::move(done)] {
    auto it = tables_.find(key);
    done(it != tables_.end() ? it->second.get() : nullptr);
  });
}

void Catalog::load_async(std::shared_ptr<Load> load, std::string key, std::function<void()> done) {
  auto q = load->next();
  if (!q) {
    install(key, load->result());
    done();
    return;
  }
  async_.query(std::move(q->sql), std::move(q->params),
               [this, load, key, done = std::move(done)](pg::AsyncConnection::Result rows) mutable {
                 if (auto taken = load->take(rows); !taken) {
                   last_error_ = taken.error();
                   const auto nul = key.find('\0');
                   spdlog::warn("catalog lookup of {}.{} failed: {}", key.substr(0, nul),
                                key.substr(nul + 1), last_error_);
                   done();
                   return;
                 }
                 load_async(std::move(load), std::move(key), std::move(done));
               });
}

const router::TableSchema* Catalog::install(const std::string& key,
                                            std::unique_ptr<router::TableSchema> loaded) {
  auto& slot = tables_[key];
  // Pointers handed out earlier stay valid (the router and the snapshot readers keep them): the
  // old shape is retired, not freed. Only DDL makes this grow.
  if (!loaded) {  // dropped since: nothing current under this name
    if (slot) retired_.push_back(std::move(slot));
    tables_.erase(key);
    return nullptr;
  }
  if (slot && *loaded == *slot) return slot.get();  // unchanged: the same pointer
  if (slot) retired_.push_back(std::move(slot));
  slot = std::move(loaded);
  return slot.get();
}

const router::TableSchema* Catalog::table(std::string_view schema, std::string_view table,
                                          bool refresh) {
  const std::string key = table_key(schema, table);
  auto it = tables_.find(key);
  if (it != tables_.end() && !refresh) return it->second.get();
  if (prefetched_.contains(key)) return it != tables_.end() ? it->second.get() : nullptr;
  auto loaded = load(schema, table);
  if (!loaded) {
    last_error_ = loaded.error();
    spdlog::warn("catalog lookup of {}.{} failed: {}", schema, table, last_error_);
    return it != tables_.end() ? it->second.get() : nullptr;
  }
  return install(key, std::move(*loaded));
}

}  // namespace walrelay
