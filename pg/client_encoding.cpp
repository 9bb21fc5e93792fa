#include "walrelay/pg/client_encoding.hpp"

#include <string_view>

namespace walrelay::pg {

namespace {

std::string_view wanted_encoding(PGconn* conn) {
  const char* server = PQparameterStatus(conn, "server_encoding");
  return server != nullptr && std::string_view(server) == "SQL_ASCII" ? "SQL_ASCII" : "UTF8";
}

bool already_wanted(PGconn* conn) {
  const char* client = PQparameterStatus(conn, "client_encoding");
  return client != nullptr && std::string_view(client) == wanted_encoding(conn);
}

}  // namespace

std::string walrelay_client_encoding_sql(PGconn* conn) {
  if (already_wanted(conn)) return {};
  return "SET client_encoding TO '" + std::string(wanted_encoding(conn)) + "'";
}

std::expected<void, std::string> use_walrelay_client_encoding(PGconn* conn) {
  const std::string_view wanted = wanted_encoding(conn);
  if (already_wanted(conn)) return {};
  if (PQsetClientEncoding(conn, std::string(wanted).c_str()) != 0) {
    std::string message = PQerrorMessage(conn);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    return std::unexpected("cannot set client_encoding to " + std::string(wanted) + ": " + message);
  }
  return {};
}

}  // namespace walrelay::pg
