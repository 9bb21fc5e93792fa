// pg::classify_sqlstate and pg::classify_connection_failure (pg/include/walrelay/pg/error.hpp):
// what retrying can do about a PostgreSQL error, from its SQLSTATE (PostgreSQL docs Appendix A)
// or, for a failed connection that carries none, from libpq's flags and the server's FATAL text.

#include <gtest/gtest.h>

#include "walrelay/pg/error.hpp"

namespace walrelay::pg {
namespace {

TEST(PgErrorKind, FromTheSqlstateOfAServerError) {
  EXPECT_EQ(classify_sqlstate(sqlstate::kInvalidPassword), ErrorKind::kAuthentication);
  EXPECT_EQ(classify_sqlstate(sqlstate::kInvalidAuthorizationSpecification),
            ErrorKind::kAuthentication);
  EXPECT_EQ(classify_sqlstate(sqlstate::kInvalidCatalogName), ErrorKind::kNoDatabase);
  EXPECT_EQ(classify_sqlstate(sqlstate::kInsufficientPrivilege), ErrorKind::kPrivilege);
  // A slot active for another PID: its walsender ends, or another instance holds it.
  EXPECT_EQ(classify_sqlstate(sqlstate::kObjectInUse), ErrorKind::kTransient);
  // A change too large for one string (1 GB): the statement's own, retried in vain.
  EXPECT_EQ(classify_sqlstate(sqlstate::kProgramLimitExceeded), ErrorKind::kStatement);
  for (const char* transient :
       {"08006", "08P01", "40001", "40P01", "53300", "57P01", "57P03", "58030"}) {
    EXPECT_EQ(classify_sqlstate(transient), ErrorKind::kTransient) << transient;
  }
  for (const char* statement : {"42P01", "42601", "22023", "XX000", "55000", "0A000"}) {
    EXPECT_EQ(classify_sqlstate(statement), ErrorKind::kStatement) << statement;
  }
  // No server error (a lost connection) or no SQLSTATE at all.
  EXPECT_EQ(classify_sqlstate(""), ErrorKind::kTransient);
  EXPECT_EQ(classify_sqlstate("0800"), ErrorKind::kTransient);
}

TEST(PgErrorKind, OnlyWhatTheOperatorMustFixNeedsTheOperator) {
  EXPECT_TRUE(needs_operator(ErrorKind::kAuthentication));
  EXPECT_TRUE(needs_operator(ErrorKind::kPrivilege));
  EXPECT_TRUE(needs_operator(ErrorKind::kNoDatabase));
  EXPECT_TRUE(needs_operator(ErrorKind::kConfiguration));
  EXPECT_FALSE(needs_operator(ErrorKind::kTransient));
  EXPECT_FALSE(needs_operator(ErrorKind::kStatement));
  EXPECT_EQ(to_string(ErrorKind::kNoDatabase), "no_database");
}

// The messages as libpq 15 prints them for PostgreSQL 15's FATAL errors during the startup.
constexpr const char* kAt = "connection to server at \"127.0.0.1\", port 5432 failed: ";

TEST(PgConnectionFailure, FlagsFirstThenTheServersFatalText) {
  // PQconnectionNeedsPassword: whatever the message says.
  EXPECT_EQ(classify_connection_failure(true, true, "fe_sendauth: no password supplied"),
            ErrorKind::kAuthentication);
  // A conninfo PQconninfoParse refuses ("invalid connection option", a bad URI).
  EXPECT_EQ(classify_connection_failure(false, false, "invalid connection option \"hots\""),
            ErrorKind::kConfiguration);
  const auto kind = [](const std::string& fatal) {
    return classify_connection_failure(false, true, std::string(kAt) + "FATAL:  " + fatal);
  };
  EXPECT_EQ(kind("password authentication failed for user \"walrelay\""),
            ErrorKind::kAuthentication);  // 28P01
  EXPECT_EQ(kind("no pg_hba.conf entry for host \"10.0.0.9\", user \"walrelay\", database "
                 "\"app\", no encryption"),
            ErrorKind::kAuthentication);                                          // 28000
  EXPECT_EQ(kind("role \"nobody\" does not exist"), ErrorKind::kAuthentication);  // 28000
  EXPECT_EQ(kind("database \"nope\" does not exist"), ErrorKind::kNoDatabase);    // 3D000
  EXPECT_EQ(kind("permission denied for database \"app\"\nDETAIL:  User does not have CONNECT "
                 "privilege."),
            ErrorKind::kPrivilege);  // 42501
  EXPECT_EQ(kind("must be superuser or replication role to start walsender"),
            ErrorKind::kPrivilege);  // 42501
  // What retrying outlives.
  EXPECT_EQ(kind("the database system is starting up"), ErrorKind::kTransient);  // 57P03
  EXPECT_EQ(kind("sorry, too many clients already"), ErrorKind::kTransient);     // 53300
  EXPECT_EQ(classify_connection_failure(
                false, true,
                std::string(kAt) + "Connection refused\n\tIs the server running on that host and "
                                   "accepting TCP/IP connections?"),
            ErrorKind::kTransient);
  EXPECT_EQ(classify_connection_failure(false, true, "timeout expired"), ErrorKind::kTransient);
}

TEST(PgError, WithoutAResultTheConnectionsMessage) {
  const Error e = error_from_result(nullptr, nullptr);
  EXPECT_EQ(e.message, "out of memory");
  EXPECT_TRUE(e.sqlstate.empty());
  EXPECT_EQ(e.kind, ErrorKind::kTransient);
  const Error c = client_error("walrelay's own", ErrorKind::kConfiguration);
  EXPECT_TRUE(c.needs_operator());
  EXPECT_FALSE(c.is(sqlstate::kObjectInUse));
  EXPECT_EQ(trim_message("FATAL:  x \n"), "FATAL:  x");
}

}  // namespace
}  // namespace walrelay::pg
