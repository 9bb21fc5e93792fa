#pragma once

#include <libpq-fe.h>

#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "walrelay/router/table_schema.hpp"
#include "walrelay/router/type_registry.hpp"

namespace walrelay {

/// Reads table and type shapes from the source database's catalog over an ordinary (non-
/// replication) libpq connection, and caches them: the router's SchemaProvider.
///
/// Queries run on first sight of a table, after a change showed a column the cached shape lacks,
/// and for types the registry does not know. They are synchronous round trips on the connector's
/// thread (rare: not per event). Not thread-safe.
class Catalog final : public router::SchemaProvider {
 public:
  /// `types` is filled as tables are loaded (user types, domains, arrays); it must outlive this.
  Catalog(std::string conninfo, std::string application_name, router::TypeRegistry& types);
  ~Catalog() override;
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;

  /// Connects (blocking) and loads every pg_type row into the registry. Errors carry libpq's
  /// message.
  std::expected<void, std::string> connect();

  const router::TableSchema* table(std::string_view schema, std::string_view table,
                                   bool refresh) override;

  /// Runs `sql` (no parameters) on the catalog connection: rows of text cells, nullopt for NULL.
  /// Error: libpq's message (the connection is re-established on the next call).
  std::expected<std::vector<std::vector<std::optional<std::string>>>, std::string> query(
      const std::string& sql);

  /// The last error of a failed lookup (for logs).
  [[nodiscard]] const std::string& last_error() const { return last_error_; }

 private:
  std::expected<std::unique_ptr<router::TableSchema>, std::string> load(std::string_view schema,
                                                                        std::string_view table);
  bool ensure_connected();

  std::string conninfo_;
  std::string application_name_;
  router::TypeRegistry& types_;
  PGconn* conn_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<router::TableSchema>> tables_;
  std::vector<std::unique_ptr<router::TableSchema>> retired_;  // replaced shapes, kept alive
  std::string last_error_;
};

}  // namespace walrelay
