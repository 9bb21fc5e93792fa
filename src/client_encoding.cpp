#include "client_encoding.hpp"

#include <string_view>

namespace walrelay {

std::expected<void, std::string> use_walrelay_client_encoding(PGconn* conn) {
  const char* server = PQparameterStatus(conn, "server_encoding");
  const char* client = PQparameterStatus(conn, "client_encoding");
  const std::string_view wanted =
      server != nullptr && std::string_view(server) == "SQL_ASCII" ? "SQL_ASCII" : "UTF8";
  if (client != nullptr && std::string_view(client) == wanted) return {};
  if (PQsetClientEncoding(conn, std::string(wanted).c_str()) != 0) {
    std::string message = PQerrorMessage(conn);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    return std::unexpected("cannot set client_encoding to " + std::string(wanted) + ": " + message);
  }
  return {};
}

}  // namespace walrelay
