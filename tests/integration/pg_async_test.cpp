// pg::AsyncConnection (pg/include/walrelay/pg/async_connection.hpp), which the heartbeat and the
// catalog's lookups use while walrelay streams: connecting and querying never hold up the event
// loop, a connection that cannot be made fails within its bound, and the next query after a lost
// connection connects again. The loop's progress is a timer ticking on the same io_context.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <optional>
#include <string>

#include "harness.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/replication_stream.hpp"

namespace walrelay::itest {
namespace {

namespace asio = boost::asio;

// Counts ticks of a 10 ms timer while the io_context runs.
struct Ticker {
  explicit Ticker(asio::io_context& io) : timer(io) { arm(); }
  void arm() {
    timer.expires_after(10ms);
    timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      ++ticks;
      arm();
    });
  }
  asio::steady_timer timer;
  int ticks = 0;
};

// Runs `io` until `done` or `limit` passes.
void run_until(asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = 30s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) io.run_for(20ms);
}

class PgAsyncTest : public IntegrationTest {};

TEST_F(PgAsyncTest, AQueryThatWaitsDoesNotHoldUpTheLoop) {
  asio::io_context io;
  Ticker ticker(io);
  pg::AsyncConnection conn(io.get_executor(), env_.pg_conninfo, "walrelay-pg-async-" + name_);
  std::optional<pg::AsyncConnection::Result> result;
  conn.query("SELECT pg_sleep(0.5), $1::text", {"x"},
             [&](pg::AsyncConnection::Result r) { result = std::move(r); });
  EXPECT_TRUE(conn.busy());
  run_until(io, [&] { return result.has_value(); });
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(*result) << result->error();
  ASSERT_EQ((*result)->size(), 1u);
  EXPECT_EQ((**result)[0][1], "x");
  // Connecting and the half-second sleep took at least 500 ms; the loop ticked throughout (a
  // blocked loop would tick about once).
  EXPECT_GT(ticker.ticks, 10);
  EXPECT_FALSE(conn.busy());

  // Queries run in order; an error is the server's message.
  std::vector<std::string> order;
  conn.query("SELECT 1/0", {},
             [&](const pg::AsyncConnection::Result& r) { order.push_back(r ? "ok" : r.error()); });
  conn.query("SELECT 'second'", {}, [&](const pg::AsyncConnection::Result& r) {
    order.push_back(r ? (*r)[0][0].value_or("") : r.error());
  });
  run_until(io, [&] { return order.size() == 2; });
  ASSERT_EQ(order.size(), 2u);
  EXPECT_NE(order[0].find("division by zero"), std::string::npos) << order[0];
  EXPECT_EQ(order[1], "second");

  // A simple query of several statements: its results arrive apart (the sleep between them);
  // the last one's rows are the answer, and the loop keeps ticking meanwhile.
  std::optional<pg::AsyncConnection::Result> several;
  const int ticks_before = ticker.ticks;
  conn.query("SELECT 'first'; SELECT pg_sleep(0.5); SELECT 'last'", {},
             [&](pg::AsyncConnection::Result r) { several = std::move(r); });
  run_until(io, [&] { return several.has_value(); });
  ASSERT_TRUE(several.has_value());
  ASSERT_TRUE(*several) << several->error();
  ASSERT_EQ((*several)->size(), 1u);
  EXPECT_EQ((**several)[0][0], "last");
  EXPECT_GT(ticker.ticks - ticks_before, 10);

  // The connection is lost: that query fails, the next one connects again.
  // (application_name is cut to 63 bytes; the second argument waits for the backend to exit)
  EXPECT_EQ(pg_->value("SELECT count(pg_terminate_backend(pid, 10000))::text FROM "
                       "pg_stat_activity WHERE application_name = left(" +
                       sql_literal("walrelay-pg-async-" + name_) + ", 63)"),
            "1");
  std::optional<pg::AsyncConnection::Result> lost, again;
  conn.query("SELECT 1", {}, [&](pg::AsyncConnection::Result r) { lost = std::move(r); });
  run_until(io, [&] { return lost.has_value(); });
  ASSERT_TRUE(lost.has_value());
  EXPECT_FALSE(*lost);
  conn.query("SELECT 'back'", {}, [&](pg::AsyncConnection::Result r) { again = std::move(r); });
  run_until(io, [&] { return again.has_value(); });
  ASSERT_TRUE(again.has_value());
  ASSERT_TRUE(*again) << again->error();
  EXPECT_EQ((**again)[0][0], "back");
}

// A server that accepts the TCP connection and never answers (a hung host, a full listen queue):
// connecting fails after connect_timeout, and the loop ticks meanwhile.
// LISTEN/NOTIFY (PostgreSQL docs §34.9 "Asynchronous Notification"): a notification reaches the
// handler while the listening connection is idle, and also when it arrives during a query; the
// relay's wake-up (docs/relay.md) depends on both.
TEST_F(PgAsyncTest, NotificationsReachTheHandlerWhetherIdleOrBusy) {
  asio::io_context io;
  pg::AsyncConnection conn(io.get_executor(), env_.pg_conninfo, "walrelay-pg-listen-" + name_);
  std::vector<std::string> payloads;
  conn.on_notification([&](const std::string& channel, const std::string& payload) {
    EXPECT_EQ(channel, name_);
    payloads.push_back(payload);
  });
  std::optional<pg::AsyncConnection::Result> listened;
  conn.query("LISTEN " + sql_ident(name_), {},
             [&](pg::AsyncConnection::Result r) { listened = std::move(r); });
  run_until(io, [&] { return listened.has_value(); });
  ASSERT_TRUE(listened && *listened) << (listened ? listened->error() : "no answer");
  pg_->exec("NOTIFY " + sql_ident(name_) + ", 'idle'");
  run_until(io, [&] { return payloads.size() == 1; });
  ASSERT_EQ(payloads, std::vector<std::string>{"idle"});
  // Sent while the listener runs a query: read with that query's results.
  std::optional<pg::AsyncConnection::Result> slept;
  conn.query("SELECT pg_sleep(0.5)", {},
             [&](pg::AsyncConnection::Result r) { slept = std::move(r); });
  run_until(
      io, [&] { return conn.busy(); }, 1s);
  pg_->exec("NOTIFY " + sql_ident(name_) + ", 'busy'");
  run_until(io, [&] { return slept.has_value() && payloads.size() == 2; });
  EXPECT_EQ(payloads, (std::vector<std::string>{"idle", "busy"}));
}

TEST_F(PgAsyncTest, AConnectionThatNeverAnswersFailsWithinItsBound) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(ntohs(addr.sin_port)) +
                               " dbname=x user=x sslmode=disable";

  asio::io_context io;
  Ticker ticker(io);
  pg::AsyncConnection conn(io.get_executor(), conninfo, "walrelay-pg-async-silent", 500ms);
  std::optional<pg::AsyncConnection::Result> result;
  conn.query("SELECT 1", {}, [&](pg::AsyncConnection::Result r) { result = std::move(r); });
  run_until(io, [&] { return result.has_value(); });
  ::close(listener);
  ASSERT_TRUE(result.has_value()) << "connecting was never given up";
  ASSERT_FALSE(*result);
  EXPECT_NE(result->error().find("timeout expired while connecting"), std::string::npos)
      << result->error();
  EXPECT_GT(ticker.ticks, 10);
}

// Errors are typed where they enter (walrelay/pg/error.hpp): a statement's error carries the
// server's SQLSTATE and fields; a failed connection carries none (libpq has no accessor for it)
// and is classified from libpq's flags and the server's FATAL text.
TEST_F(PgAsyncTest, ErrorsAreTypedWhereTheyEnter) {
  asio::io_context io;
  Ticker ticker(io);  // keeps the loop from running out of work between the attempts
  const auto first_error = [&](const std::string& conninfo, const std::string& sql) {
    pg::AsyncConnection conn(io.get_executor(), conninfo, "walrelay-pg-async-" + name_);
    std::optional<pg::Error> error;
    conn.query(sql, {}, [&](const pg::AsyncConnection::Result& r) {
      error = r ? pg::Error{} : conn.last_error();
      if (!r) {
        EXPECT_EQ(r.error(), conn.last_error().message);
      }
    });
    run_until(io, [&] { return error.has_value(); });
    return error.value_or(pg::client_error("no answer", pg::ErrorKind::kStatement));
  };
  const pg::Error zero = first_error(env_.pg_conninfo, "SELECT 1/0");
  EXPECT_EQ(zero.sqlstate, "22012");  // division_by_zero
  EXPECT_EQ(zero.severity, "ERROR");
  EXPECT_EQ(zero.primary, "division by zero");
  EXPECT_EQ(zero.kind, pg::ErrorKind::kStatement);
  EXPECT_EQ(zero.message, "ERROR:  division by zero");

  // Later keywords of a conninfo override earlier ones.
  const pg::Error no_db = first_error(env_.pg_conninfo + " dbname=walrelay_no_such_db", "SELECT 1");
  EXPECT_TRUE(no_db.sqlstate.empty()) << no_db.sqlstate;
  EXPECT_EQ(no_db.kind, pg::ErrorKind::kNoDatabase) << no_db.message;
  EXPECT_TRUE(no_db.needs_operator());
  const pg::Error no_role =
      first_error(env_.pg_conninfo + " user=walrelay_no_such_role", "SELECT 1");
  EXPECT_EQ(no_role.kind, pg::ErrorKind::kAuthentication) << no_role.message;
  const pg::Error bad_option = first_error(env_.pg_conninfo + " hots=x", "SELECT 1");
  EXPECT_EQ(bad_option.kind, pg::ErrorKind::kConfiguration) << bad_option.message;
  const pg::Error refused =
      first_error("host=127.0.0.1 port=1 dbname=x user=x connect_timeout=5", "SELECT 1");
  EXPECT_EQ(refused.kind, pg::ErrorKind::kTransient) << refused.message;
  EXPECT_FALSE(refused.needs_operator());
}

// START_REPLICATION on a slot another walsender holds fails with 55006 object_in_use ("replication
// slot ... is active for PID ..."): the connector's standby decision reads that SQLSTATE.
TEST_F(PgAsyncTest, ASlotActiveForAnotherPidIsObjectInUse) {
  asio::io_context io;
  const std::string slot = "walrelay_inuse_" + std::to_string(::getpid());
  pg::ReplicationStream holder(io.get_executor(), env_.pg_conninfo, "walrelay-inuse-holder");
  ASSERT_TRUE(holder.connect()) << holder.failure().message;
  // A temporary slot stays acquired by the session that created it, and goes with it.
  auto created = holder.create_slot(slot, "wal2json", "nothing", /*temporary=*/true);
  ASSERT_TRUE(created) << created.error();

  pg::ReplicationStream other(io.get_executor(), env_.pg_conninfo, "walrelay-inuse-other");
  ASSERT_TRUE(other.connect()) << other.failure().message;
  auto started = other.start(slot, Lsn{}, {}, {});
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("is active for PID"), std::string::npos) << started.error();
  EXPECT_TRUE(other.failure().is(pg::sqlstate::kObjectInUse)) << other.failure().sqlstate;
  EXPECT_EQ(other.last_sqlstate(), "55006");
  EXPECT_EQ(other.failure().kind, pg::ErrorKind::kTransient);
  EXPECT_EQ(other.failure().message, started.error());

  // A replication connection to a database that does not exist: typed at connect().
  pg::ReplicationStream missing(io.get_executor(), env_.pg_conninfo + " dbname=walrelay_no_such_db",
                                "walrelay-inuse-missing");
  auto sys = missing.connect();
  ASSERT_FALSE(sys);
  EXPECT_EQ(missing.failure().kind, pg::ErrorKind::kNoDatabase) << sys.error();
  EXPECT_EQ(sys.error(), "cannot connect to PostgreSQL: " + missing.failure().message);
}

}  // namespace
}  // namespace walrelay::itest
