#pragma once
// PostgreSQL errors typed where they enter walrelay: the SQLSTATE and fields of a server error
// (PostgreSQL docs §34.3.1 "Main Functions", PQresultErrorField), and what retrying can do about
// it, decided from the SQLSTATE (docs Appendix A "PostgreSQL Error Codes"). Callers decide by
// `Error::kind` or `Error::is(sqlstate::…)`, never by searching the message text.

#include <libpq-fe.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace walrelay::pg {

/// The SQLSTATE codes walrelay acts on (PostgreSQL docs Appendix A, Table A.1).
namespace sqlstate {
/// invalid_parameter_value: e.g. an output plugin option the server's plugin does not know
/// (wal2json's startup callback, and PostgreSQL's own test_decoding, raise it for one).
inline constexpr std::string_view kInvalidParameterValue = "22023";
inline constexpr std::string_view kInvalidAuthorizationSpecification = "28000";
inline constexpr std::string_view kInvalidPassword = "28P01";
inline constexpr std::string_view kInvalidCatalogName = "3D000";  ///< no such database
inline constexpr std::string_view kInsufficientPrivilege = "42501";
inline constexpr std::string_view kProgramLimitExceeded = "54000";
inline constexpr std::string_view kObjectInUse = "55006";  ///< e.g. a slot active for another PID
}  // namespace sqlstate

/// What retrying an operation that failed this way can do.
enum class ErrorKind : std::uint8_t {
  /// May succeed later: a lost connection (no SQLSTATE), class 08 connection exception, 40
  /// transaction rollback, 53 insufficient resources (too many connections), 55006 object in use,
  /// 57 operator intervention (shutdown, "cannot connect now"), 58 system error.
  kTransient,
  /// The server refused who walrelay is: class 28 (28000 no pg_hba.conf entry or no such role,
  /// 28P01 wrong password), or the server wants a password and none was given.
  kAuthentication,
  /// The role lacks a privilege: 42501 (no REPLICATION attribute, no CONNECT or SELECT).
  kPrivilege,
  /// The database does not exist: 3D000.
  kNoDatabase,
  /// libpq or walrelay cannot use the conninfo as written; no server was asked.
  kConfiguration,
  /// Any other server error: the statement's own (syntax, undefined object, data, a program
  /// limit such as 54000). Retrying the same statement on the same data fails the same way.
  kStatement,
};

/// True for the kinds only the operator can fix (credentials, pg_hba.conf, a GRANT, the database
/// name, the conninfo): retrying with backoff cannot.
constexpr bool needs_operator(ErrorKind kind) {
  return kind == ErrorKind::kAuthentication || kind == ErrorKind::kPrivilege ||
         kind == ErrorKind::kNoDatabase || kind == ErrorKind::kConfiguration;
}

/// "transient", "authentication", "privilege", "no_database", "configuration", "statement".
std::string_view to_string(ErrorKind kind);

/// The kind of a server error with this SQLSTATE (five characters, Appendix A); anything else
/// (empty: no server error) is kTransient, as a lost connection is.
ErrorKind classify_sqlstate(std::string_view sqlstate);

/// The kind of a connection attempt that failed (PQstatus CONNECTION_BAD). libpq gives no
/// SQLSTATE for it: libpq-fe.h has no accessor for a PGconn's error fields (PQresultErrorField
/// takes a PGresult, and neither PQconnectdb nor PQconnectPoll hands one out; docs §34.2
/// "Connection Status Functions" offer only PQerrorMessage), although libpq reads the server's
/// startup ErrorResponse itself. So this is the one place that reads libpq's connection message,
/// and only for what the flags cannot say:
/// - `needs_password` (PQconnectionNeedsPassword, docs §34.2): the server asked for a password
///   and none was available: kAuthentication. (PQconnectionUsedPassword only says a password was
///   sent, not whether the server accepted it or what failed after it, so it decides nothing.)
/// - `conninfo_parses` false (PQconninfoParse refused it, docs §34.1.2): kConfiguration;
/// - the server's FATAL texts for 28P01 "password authentication failed", 28000 "no pg_hba.conf
///   entry" and "role … does not exist", 3D000 "database … does not exist", 42501 "permission
///   denied" and "must be superuser or replication role" (PostgreSQL's src/backend/libpq/auth.c,
///   src/backend/utils/init/postinit.c and miscinit.c); they are matched in English only (the
///   server's lc_messages translates them), and an untranslated match is kTransient;
/// - anything else (refused, unreachable, timeout, starting up, too many clients): kTransient.
ErrorKind classify_connection_failure(bool needs_password, bool conninfo_parses,
                                      std::string_view message);

/// A failed PostgreSQL operation, typed where libpq reported it. Plain value; any thread.
struct Error {
  ErrorKind kind = ErrorKind::kTransient;
  /// PG_DIAG_SQLSTATE, five characters; empty when no server error carries one (a failed
  /// connection, a lost socket, a client-side failure).
  std::string sqlstate;
  /// PG_DIAG_SEVERITY_NONLOCALIZED: "ERROR", "FATAL" or "PANIC"; empty without a server error.
  std::string severity;
  std::string primary;  ///< PG_DIAG_MESSAGE_PRIMARY (empty without a server error)
  std::string detail;   ///< PG_DIAG_MESSAGE_DETAIL (often empty)
  /// The whole text libpq formats (PQresultErrorMessage or PQerrorMessage), trailing newlines
  /// and spaces removed: what walrelay logs, unchanged.
  std::string message;

  [[nodiscard]] bool is(std::string_view code) const { return sqlstate == code; }
  [[nodiscard]] bool needs_operator() const { return pg::needs_operator(kind); }
};

/// The error of a failed PGresult (PGRES_FATAL_ERROR, or any status the caller did not expect):
/// its fields, kind from classify_sqlstate. The message is PQresultErrorMessage; when that is
/// empty, `conn`'s PQerrorMessage, or without `conn` the status name (PQresStatus). `res` may be
/// null (libpq out of memory or the connection gone): then the message is `conn`'s
/// PQerrorMessage ("out of memory" without `conn`) and the kind kTransient.
Error error_from_result(const PGresult* res, const PGconn* conn);

/// The error of a connection attempt that failed (`conn` null: libpq could not allocate one).
/// `conninfo` is what the attempt was given (checked with PQconninfoParse, never quoted).
/// Kind from classify_connection_failure; no SQLSTATE (see there).
Error error_from_connection(const PGconn* conn, const std::string& conninfo);

/// A failure walrelay itself detected on a connection (a lost socket, a protocol violation, a
/// timeout): `message`, no SQLSTATE, kind `kind`.
Error client_error(std::string message, ErrorKind kind = ErrorKind::kTransient);

/// `text` without trailing newlines and spaces (libpq ends its messages with "\n").
std::string trim_message(std::string text);

}  // namespace walrelay::pg
