#include "walrelay/snapshot/send_signal.hpp"

#include <libpq-fe.h>

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/client_encoding.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay::snapshot {

std::expected<std::string, std::string> send_signal(const std::string& conninfo,
                                                    const std::string& prefix,
                                                    const Signal& signal) {
  const char* keywords[] = {"dbname", "application_name", nullptr};
  const char* values[] = {conninfo.c_str(), "walrelay-snapshot-signal", nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  pg::route_notices_to_log(conn);
  auto message = [](PGconn* c) {
    std::string m = c != nullptr ? PQerrorMessage(c) : "out of memory";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  };
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    std::string m = message(conn);
    PQfinish(conn);
    return std::unexpected("cannot connect to PostgreSQL: " + m);
  }
  // Table names are UTF-8: the server converts them to the database's encoding, where the stream
  // reads them back.
  if (auto encoded = pg::use_walrelay_client_encoding(conn); !encoded) {
    PQfinish(conn);
    return std::unexpected(encoded.error());
  }
  const std::string json = signal_json(signal);
  const char* params[] = {prefix.c_str(), json.c_str()};
  PGresult* r = PQexecParams(conn, "SELECT pg_logical_emit_message(true, $1, $2)::text", 2, nullptr,
                             params, nullptr, nullptr, 0);
  std::expected<std::string, std::string> out;
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string m = PQresultErrorMessage(r);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    out = std::unexpected(m);
  } else {
    out = std::string(PQgetvalue(r, 0, 0));
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

}  // namespace walrelay::snapshot
