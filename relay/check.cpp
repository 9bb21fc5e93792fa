#include "walrelay/relay/check.hpp"

#include <boost/asio/io_context.hpp>
#include <optional>

#include "walrelay/kafka/producer.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/relay/preflight.hpp"

namespace walrelay::relay {

ExitCode run_check(const config::Config& cfg, std::ostream& out) {
  out << "source.mode poll: " << cfg.tables.size() << " outbox table(s), claim "
      << config::to_string(cfg.relay.claim) << ", batch " << cfg.relay.batch << "\n";
  auto options = pg::pinned_startup_options(cfg.source.conninfo);
  if (!options) {
    out << "source.conninfo: " << options.error() << "\n";
    return ExitCode::kConfigError;
  }
  boost::asio::io_context io;
  pg::AsyncConnection conn(io.get_executor(), cfg.source.conninfo, "walrelay-check " + cfg.name);
  conn.set_startup_options(*options);
  router::TypeRegistry types;
  std::optional<PreflightResult> result;
  preflight(conn, cfg, types, [&](PreflightResult r) { result = std::move(r); });
  while (!result && io.run_one() > 0) {
  }
  if (!result || result->error) {
    out << "PostgreSQL: "
        << (result ? result->error->message : std::string("the connection stopped answering"))
        << "\n";
    return ExitCode::kRuntimeError;
  }
  for (const std::string& p : result->problems) out << p << "\n";
  if (!result->problems.empty()) return ExitCode::kConfigError;
  for (const OutboxTable& t : result->tables) {
    out << "ok: " << t.name() << " (tables[" << t.config_index << "]): every configured column"
        << " is there; the role may SELECT and UPDATE it\n";
    out << "-- for " << t.name() << " (docs/relay.md \"Set-up\"):\n"
        << setup_sql(t, cfg.relay.notify_channel, cfg.relay.retention.count() > 0);
  }
  for (const std::string& w : result->warnings) out << "warning: " << w << "\n";
  auto brokers = kafka::probe_brokers(cfg.kafka, std::chrono::seconds(10));
  if (!brokers) {
    out << "Kafka: " << brokers.error().message << "\n";
    return brokers.error().config ? ExitCode::kConfigError : ExitCode::kRuntimeError;
  }
  out << "ok: Kafka answered (" << *brokers << " broker(s))\n";
  return ExitCode::kOk;
}

}  // namespace walrelay::relay
