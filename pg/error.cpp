#include "walrelay/pg/error.hpp"

namespace walrelay::pg {

namespace {

std::string field(const PGresult* res, int code) {
  const char* v = PQresultErrorField(res, code);
  return v != nullptr ? std::string(v) : std::string();
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// True when libpq can use `conninfo` as the `dbname` of PQconnectdbParams with expand_dbname:
// a plain database name (no '=', no URI prefix: libpq takes it as is), or a connection string or
// URI that PQconninfoParse accepts (docs §34.1.1 "Connection Strings").
bool conninfo_parses(const std::string& conninfo) {
  const bool uri = conninfo.starts_with("postgresql://") || conninfo.starts_with("postgres://");
  if (!uri && conninfo.find('=') == std::string::npos) return true;
  char* err = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &err);
  if (err != nullptr) PQfreemem(err);
  if (parsed == nullptr) return false;
  PQconninfoFree(parsed);
  return true;
}

}  // namespace

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kTransient:
      return "transient";
    case ErrorKind::kAuthentication:
      return "authentication";
    case ErrorKind::kPrivilege:
      return "privilege";
    case ErrorKind::kNoDatabase:
      return "no_database";
    case ErrorKind::kConfiguration:
      return "configuration";
    case ErrorKind::kStatement:
      return "statement";
  }
  return "transient";
}

ErrorKind classify_sqlstate(std::string_view code) {
  if (code.size() != 5) return ErrorKind::kTransient;  // not a server error
  if (code == sqlstate::kInsufficientPrivilege) return ErrorKind::kPrivilege;
  if (code == sqlstate::kInvalidCatalogName) return ErrorKind::kNoDatabase;
  if (code == sqlstate::kObjectInUse) return ErrorKind::kTransient;
  // The class is the first two characters (Appendix A).
  const std::string_view cls = code.substr(0, 2);
  if (cls == "28") return ErrorKind::kAuthentication;
  if (cls == "08" || cls == "40" || cls == "53" || cls == "57" || cls == "58") {
    return ErrorKind::kTransient;
  }
  return ErrorKind::kStatement;
}

ErrorKind classify_connection_failure(bool needs_password, bool parses, std::string_view message) {
  if (needs_password) return ErrorKind::kAuthentication;
  if (!parses) return ErrorKind::kConfiguration;
  // The server's FATAL texts of error.hpp's list (libpq prefixes them with the server's address
  // and "FATAL:  "): the only text walrelay reads to decide anything about a PostgreSQL error.
  if (contains(message, "password authentication failed") ||
      contains(message, "no pg_hba.conf entry")) {
    return ErrorKind::kAuthentication;
  }
  if (contains(message, "does not exist")) {
    return contains(message, "role \"") ? ErrorKind::kAuthentication : ErrorKind::kNoDatabase;
  }
  if (contains(message, "permission denied") ||
      contains(message, "must be superuser or replication role")) {
    return ErrorKind::kPrivilege;
  }
  return ErrorKind::kTransient;
}

std::string trim_message(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

Error error_from_result(const PGresult* res, const PGconn* conn) {
  Error e;
  if (res == nullptr) {
    e.message = conn != nullptr ? trim_message(PQerrorMessage(conn)) : "out of memory";
    return e;
  }
  e.sqlstate = field(res, PG_DIAG_SQLSTATE);
  e.severity = field(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  e.primary = field(res, PG_DIAG_MESSAGE_PRIMARY);
  e.detail = field(res, PG_DIAG_MESSAGE_DETAIL);
  e.message = trim_message(PQresultErrorMessage(res));
  if (e.message.empty()) {
    e.message = conn != nullptr ? trim_message(PQerrorMessage(conn))
                                : std::string(PQresStatus(PQresultStatus(res)));
  }
  e.kind = classify_sqlstate(e.sqlstate);
  return e;
}

Error error_from_connection(const PGconn* conn, const std::string& conninfo) {
  Error e;
  if (conn == nullptr) {
    e.message = "out of memory";
    return e;
  }
  e.message = trim_message(PQerrorMessage(conn));
  e.kind = classify_connection_failure(PQconnectionNeedsPassword(conn) != 0,
                                       conninfo_parses(conninfo), e.message);
  return e;
}

Error client_error(std::string message, ErrorKind kind) {
  Error e;
  e.kind = kind;
  e.message = std::move(message);
  return e;
}

}  // namespace walrelay::pg
