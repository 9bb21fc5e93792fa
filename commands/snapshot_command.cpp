#include "walrelay/commands/snapshot_command.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>

#include "walrelay/catalog/catalog.hpp"
#include "walrelay/catalog/table_inventory.hpp"
#include "walrelay/pg/client_encoding.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/snapshot/table_query.hpp"

namespace walrelay {

namespace {

std::string pq_message(const char* text) {
  std::string m = text != nullptr ? text : "out of memory";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

}  // namespace

std::expected<std::vector<std::string>, std::string> refused_snapshot_tables(
    const config::Config& cfg, const std::vector<std::string>& names) {
  // The catalog and router `run` uses, so the names are judged as the connector judges them.
  router::TypeRegistry types;
  boost::asio::io_context io;  // the catalog answers blocking here: never run
  Catalog catalog(io.get_executor(), cfg.source.conninfo, "walrelay-snapshot-check-" + cfg.name,
                  types);
  if (auto connected = catalog.connect(); !connected) {
    return std::unexpected("cannot read the catalog: " + connected.error());
  }
  router::EventRouter router(
      router::RouterSettings{cfg.name, cfg.topics.prefix, "", "", cfg.events}, cfg, &catalog,
      types);

  // The captured tables, for globs (matched as `run` matches `tables`), read once if needed.
  std::optional<std::vector<MatchedTable>> matched;
  auto captured = [&]() -> std::expected<const std::vector<MatchedTable>*, std::string> {
    if (matched) return &*matched;
    const char* keywords[] = {"dbname", "application_name", nullptr};
    const std::string app = "walrelay-snapshot-check-" + cfg.name;
    const char* values[] = {cfg.source.conninfo.c_str(), app.c_str(), nullptr};
    PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      std::string m = pq_message(conn != nullptr ? PQerrorMessage(conn) : nullptr);
      PQfinish(conn);
      return std::unexpected("cannot connect to PostgreSQL: " + m);
    }
    if (auto encoded = pg::use_walrelay_client_encoding(conn); !encoded) {
      PQfinish(conn);
      return std::unexpected(encoded.error());
    }
    auto found = match_tables(
        [conn](const std::string& sql)
            -> std::expected<std::vector<pg::ReplicationStream::Row>, std::string> {
          PGresult* r = PQexec(conn, sql.c_str());
          if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            std::string m = pq_message(PQresultErrorMessage(r));
            PQclear(r);
            return std::unexpected(m);
          }
          std::vector<pg::ReplicationStream::Row> rows(static_cast<std::size_t>(PQntuples(r)));
          for (int i = 0; i < PQntuples(r); ++i) {
            for (int j = 0; j < PQnfields(r); ++j) {
              rows[static_cast<std::size_t>(i)].push_back(
                  PQgetisnull(r, i, j) ? std::nullopt
                                       : std::optional<std::string>(PQgetvalue(r, i, j)));
            }
          }
          PQclear(r);
          return rows;
        },
        cfg);
    PQfinish(conn);
    if (!found) return std::unexpected(found.error());
    matched = std::move(*found);
    return &*matched;
  };

  std::vector<std::string> refused;
  for (const auto& name : names) {
    auto parsed = config::parse_table_name(name);
    if (!parsed) {
      refused.push_back(name + ": " + parsed.error());
      continue;
    }
    if (parsed->schema.find('*') != std::string::npos ||
        parsed->table.find('*') != std::string::npos) {
      auto tables = captured();
      if (!tables) return std::unexpected(tables.error());
      const bool any = std::any_of((*tables)->begin(), (*tables)->end(), [&](const auto& t) {
        return (config::glob_match(parsed->schema, t.schema) &&
                config::glob_match(parsed->table, t.table) &&
                router.role_of(t.schema, t.table) == router::TableRole::kRowChange) ||
               // events.partitions leaf: the glob may name leaves of a captured partitioned table
               (t.partitioned && cfg.events.partitions == config::Partitions::kLeaf);
      });
      if (!any) refused.push_back(name + ": matches no captured row-change table");
      continue;
    }
    // Existence first: the router warns about a table the catalog does not know.
    const router::TableSchema* shape = catalog.table(parsed->schema, parsed->table, false);
    if (shape == nullptr) {
      refused.push_back(name + ": no such table");
      continue;
    }
    if (router.role_of(parsed->schema, parsed->table) != router::TableRole::kRowChange) {
      refused.push_back(name +
                        ": not a captured row-change table (check `tables`, `exclude`; outbox "
                        "tables are never snapshotted)");
      continue;
    }
    auto plan =
        snapshot::make_read_plan(*shape, router.key_columns_of(parsed->schema, parsed->table));
    if (!plan || plan->key.empty()) {
      refused.push_back(name +
                        ": has no primary key or unique index on NOT NULL columns, so it cannot "
                        "be read in chunks while streaming; add one (its columns may also be set "
                        "as `key_columns`)");
    }
  }
  return refused;
}

}  // namespace walrelay
