#pragma once

#include <libpq-fe.h>

#include <boost/asio/any_io_executor.hpp>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/router/table_schema.hpp"
#include "walrelay/router/type_registry.hpp"

namespace walrelay {

/// Reads table and type shapes from the source database's catalog over an ordinary (non-
/// replication) libpq connection, and caches them: the router's SchemaProvider.
///
/// Queries run on first sight of a table, after a change showed a column the cached shape lacks,
/// and for types the registry does not know. Two connections: a blocking one for start-up and
/// snapshots (connect(), table() without a prefetch), and one driven without blocking
/// (pg::AsyncConnection) for what runs while streaming: prefetch() loads a table ahead, and table()
/// then answers from what was loaded; query_async() for the periodic checks. Not thread-safe.
class Catalog final : public router::SchemaProvider {
 public:
  /// `types` is filled as tables are loaded (user types, domains, arrays); it must outlive this.
  Catalog(boost::asio::any_io_executor executor, std::string conninfo, std::string application_name,
          router::TypeRegistry& types);
  ~Catalog() override;
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  /// Connects (blocking) and loads every pg_type row into the registry. Errors carry libpq's
  /// message.
  std::expected<void, std::string> connect();

  const router::TableSchema* table(std::string_view schema, std::string_view table,
                                   bool refresh) override;

  /// Whether table(schema, table, false) answers without a query: from the cache, or as prefetch()
  /// promised until end_prefetch() (also for a table that does not exist).
  [[nodiscard]] bool cached(std::string_view schema, std::string_view table) const;

  /// Runs `sql` (no parameters, several statements allowed) on the non-blocking connection, after
  /// whatever is queued there; `done` gets the last statement's rows or the error.
  void query_async(std::string sql, pg::AsyncConnection::Done done);

  /// Reads the table's shape again without blocking, and calls `done` on the executor when it is
  /// in the cache (or the lookup failed: logged, the cache keeps what it had). Until
  /// end_prefetch(), table() answers this table from the cache without a query, also with
  /// `refresh`. Connects (without blocking) first if the connection was lost. `writer_xid`: the
  /// 32-bit id of the transaction whose decoded change needs the table (0: none); a table not
  /// found while that transaction still ends (its commit record is written, so its change was
  /// decoded, before it is visible to new snapshots) is asked for again once it has ended (at
  /// most ~2 s), so that a table created by the transaction is not taken for a dropped one.
  void prefetch(std::string_view schema, std::string_view table, std::uint32_t writer_xid,
                std::function<void()> done);
  /// Reads the table's shape again without blocking (after whatever is queued on the non-blocking
  /// connection) into the cache, and calls `done` on the executor with the current shape: nullptr
  /// when the table does not exist; when the lookup failed (logged, last_error()), what the cache
  /// had (nullptr if nothing). Unlike prefetch(), table() with `refresh` still queries afterwards.
  void reload(std::string_view schema, std::string_view table,
              std::function<void(const router::TableSchema*)> done);
  /// Ends the answers from the cache that prefetch() promised.
  void end_prefetch() { prefetched_.clear(); }
  /// Gives up running prefetches (their `done` is never called) by closing the connection; the
  /// next call connects again.
  void abandon_prefetch() {
    async_.close();
    prefetched_.clear();
  }

  /// The last error of a failed lookup (for logs).
  [[nodiscard]] const std::string& last_error() const { return last_error_; }
  /// The typed error (walrelay/pg/error.hpp) behind connect()'s last failure: a failed
  /// connection attempt (no SQLSTATE; kind from pg::classify_connection_failure) or the pg_type
  /// query's server error.
  [[nodiscard]] const pg::Error& connect_failure() const { return connect_failure_; }

 private:
  class Load;
  std::expected<std::unique_ptr<router::TableSchema>, std::string> load(std::string_view schema,
                                                                        std::string_view table);
  /// Puts a loaded shape (nullptr: the table does not exist) under `key`; returns the current.
  const router::TableSchema* install(const std::string& key,
                                     std::unique_ptr<router::TableSchema> loaded);
  /// Runs `load`'s queries on the non-blocking connection, installs the shape under `key` and
  /// calls `done` (also when a query failed: logged, the cache keeps what it had).
  void load_async(std::shared_ptr<Load> load, std::string key, std::function<void()> done);
  /// The blocking connection: connects (blocking) when closed or broken; nullptr when connecting
  /// fails (last_error_ says why).
  PGconn* blocking_connection();

  std::string conninfo_;
  std::string application_name_;
  router::TypeRegistry& types_;
  PGconn* blocking_ = nullptr;
  pg::AsyncConnection async_;
  std::unordered_map<std::string, bool> prefetched_;  // key → answered from the cache
  std::unordered_map<std::string, std::unique_ptr<router::TableSchema>> tables_;
  std::vector<std::unique_ptr<router::TableSchema>> retired_;  // replaced shapes, kept alive
  std::string last_error_;
  pg::Error connect_failure_;
};

}  // namespace walrelay
