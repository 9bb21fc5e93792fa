#include "walrelay/commands/check.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <map>
#include <set>

#include "walrelay/catalog/catalog.hpp"
#include "walrelay/catalog/source_encoding.hpp"
#include "walrelay/catalog/table_inventory.hpp"
#include "walrelay/connector/preflight.hpp"
#include "walrelay/kafka/producer.hpp"
#include "walrelay/kafka/security.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/state/state_store.hpp"

namespace walrelay {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// What `run` would capture, as it would route it: each matched table with its topic and event key
// (docs/events.md "What gets published"), or its role, and every finding of the rules `run` applies
// (preflight.hpp). False when `run` would refuse the tables (exit 2). `privileges_ok` is set false
// when the role cannot SELECT a row-change table a snapshot would read (snapshot.mode not never):
// `run` starts, but its snapshot fails with `permission denied` until it is granted.
bool list_tables(pg::ReplicationStream& stream, const config::Config& cfg,
                 const std::string& database, std::ostream& out, bool& privileges_ok) {
  std::vector<std::string> unmatched;
  std::vector<SkippedRelation> skipped;
  auto matched = match_tables(stream, cfg, &unmatched, &skipped);
  if (!matched) {
    out << "  FAIL " << matched.error() << "\n";
    return false;
  }
  // The same catalog and router `run` uses, so check and run judge tables alike.
  router::TypeRegistry types;
  boost::asio::io_context io;  // the catalog answers blocking here: never run
  Catalog catalog(io.get_executor(), cfg.source.conninfo, "walrelay-check-catalog-" + cfg.name,
                  types);
  const bool have_catalog = static_cast<bool>(catalog.connect());
  router::EventRouter router(
      router::RouterSettings{cfg.name, cfg.topics.prefix, database, "", cfg.events}, cfg,
      have_catalog ? &catalog : nullptr, types);
  const TablePreflight preflight = preflight_tables(*matched, skipped, unmatched, router, cfg);
  auto print = [&](const TableFinding& f) {
    out << (f.refused ? "\n    FAIL: " : "\n    WARN: ") << f.message
        << (f.refused ? " (run exits 2)" : "");
  };
  // A snapshot reads every row-change table with the configured role: without SELECT it fails
  // with `permission denied` and retries until someone GRANTs it (run does not refuse to start).
  const bool snapshots = cfg.snapshot.mode != config::SnapshotMode::kNever;
  out << "tables: " << matched->size() << " matched\n";
  for (const TableVerdict& v : preflight.tables) {
    const MatchedTable& t = *v.table;
    std::string privilege_failure;
    if (snapshots && v.role == router::TableRole::kRowChange) {
      const std::string relation = pg::quote_ident(t.schema) + "." + pg::quote_ident(t.table);
      auto granted = stream.query("SELECT has_table_privilege(" + pg::quote_literal(relation) +
                                  ", 'SELECT')::text, current_user::text");
      if (!granted || granted->empty()) {
        privilege_failure = "cannot check the SELECT privilege on " + t.schema + "." + t.table +
                            (granted ? std::string() : ": " + granted.error());
      } else if ((*granted)[0][0].value_or("") != "true") {
        const std::string role = (*granted)[0][1].value_or("?");
        privilege_failure = "role " + role + " has no SELECT privilege on " + t.schema + "." +
                            t.table + ": the snapshot (snapshot.mode " +
                            std::string(config::to_string(cfg.snapshot.mode)) +
                            ") cannot read it (permission denied, retried until granted). "
                            "Run: GRANT SELECT ON " +
                            relation + " TO " + pg::quote_ident(role) + ";";
      }
    }
    out << "  " << t.schema << "." << t.table;
    switch (v.role) {
      case router::TableRole::kOutbox: {
        const auto& ob = cfg.tables[t.entry].outbox;
        out << ": outbox, topic " << (ob ? ob->topic : std::string("?"));
        break;
      }
      case router::TableRole::kIgnored:
        out << ": excluded";
        break;
      case router::TableRole::kRowChange:
        out << " -> " << v.topic << ", key "
            << (v.key.empty() ? std::string("none (null keys)") : "(" + join(v.key) + ")");
        if (t.partitioned)
          out << ", partitioned (" << config::to_string(cfg.events.partitions) << " topics)";
        break;
    }
    for (const auto& f : v.findings) print(f);
    if (!privilege_failure.empty()) {
      out << "\n    FAIL: " << privilege_failure;
      privileges_ok = false;
    }
    out << "\n";
  }
  for (const auto& f : preflight.general) {
    out << (f.refused ? "  FAIL: " : "  WARN: ") << f.message
        << (f.refused ? " (run exits 2)\n" : "\n");
  }
  return preflight.first_refusal() == nullptr;
}

}  // namespace

ExitCode run_check(const config::Config& cfg, std::ostream& out) {
  bool ok = true;
  // The exit code of the first check `run` would fail on, in the order `run` checks: the Kafka
  // producer's properties (before any connection), then prepare()'s server, wal_level, encoding,
  // slot record, tables, slot.
  std::optional<ExitCode> server_code, record_code, tables_code, slot_code;
  out << "config: ok (connector '" << cfg.name << "', slot '" << cfg.source.slot
      << "', topic prefix '" << cfg.topics.prefix << "', " << cfg.tables.size()
      << " tables entries)\n";
  out << "postgres: " << config::mask_conninfo(cfg.source.conninfo) << "\n";
  boost::asio::io_context io;
  pg::ReplicationStream stream(io.get_executor(), cfg.source.conninfo,
                               "walrelay-check-" + cfg.name);
  if (auto sys = stream.connect(); !sys) {
    out << "  FAIL " << sys.error() << "\n";
    ok = false;
    server_code = ExitCode::kRuntimeError;
  } else {
    out << "  server_version " << sys->server_version << ", system " << sys->system_id
        << ", timeline " << sys->timeline << ", database " << sys->dbname << ", WAL at "
        << sys->xlogpos.to_string() << "\n";
    auto wal_level = stream.query("SHOW wal_level");
    const std::string level =
        wal_level && !wal_level->empty() ? (*wal_level)[0][0].value_or("") : "?";
    out << "  wal_level " << level << "\n";
    if (auto refused = check_wal_level(level)) {
      out << "  FAIL: " << refused->message << " (run exits " << static_cast<int>(refused->code)
          << ")\n";
      server_code = refused->code;
    }
    // The walsender drops a client silent for wal_sender_timeout: `run` sends status updates well
    // within it (preflight.hpp). max_slot_wal_keep_size -1 lets a stalled slot fill the disk.
    auto settings = stream.query(
        "SELECT current_setting('wal_sender_timeout'), "
        "current_setting('max_slot_wal_keep_size')");
    if (settings && !settings->empty()) {
      const auto& r = (*settings)[0];
      const auto timeout = parse_pg_duration(r[0].value_or("0"));
      out << "  wal_sender_timeout " << timeout.count() << " ms";
      if (auto chosen = status_interval_for(cfg.source.status_interval, timeout);
          !chosen.warning.empty()) {
        out << "  WARN: " << chosen.warning;
      }
      out << "\n  max_slot_wal_keep_size " << r[1].value_or("?");
      if (r[1].value_or("") == "-1") {
        out << "  (unlimited: a stalled slot keeps WAL until the primary's disk is full; watch "
               "walrelay_slot_retained_wal_bytes)";
      }
      out << "\n";
    }
    ok = ok && level == "logical";
    // The same decision `run` makes before streaming (docs/operations.md "Database encoding").
    auto shown = stream.query("SHOW server_encoding");
    const std::string encoding =
        shown && !shown->empty() ? (*shown)[0][0].value_or("?") : std::string("?");
    if (auto transcoder = transcoder_for_database(encoding, cfg.source.allow_sql_ascii)) {
      out << "  server_encoding " << encoding << ": " << describe_transcoding(*transcoder) << "\n";
    } else {
      out << "  server_encoding " << encoding
          << "  FAIL: refused (run exits 2): " << transcoder.error() << "\n";
      ok = false;
      if (!server_code) server_code = ExitCode::kConfigError;
    }
    // The slot rules `run` applies (preflight.hpp; docs/operations.md "Reliability").
    const StateStore store(
        cfg.source.state_dir.empty() ? StateStore::default_dir() : cfg.source.state_dir,
        cfg.source.slot);
    auto loaded = store.load();
    std::optional<SlotRecord> record;
    auto refuse = [&](const Refusal& r, std::optional<ExitCode>& code) {
      out << "  FAIL: " << r.message << " (run exits " << static_cast<int>(r.code) << ")\n";
      ok = false;
      code = r.code;
    };
    if (!loaded) {
      out << "  FAIL slot record: " << loaded.error() << "\n";
      ok = false;
      record_code = ExitCode::kRuntimeError;
    } else if (*loaded) {
      record = **loaded;
      out << "  slot record " << store.path() << ": system " << record->system_id << ", timeline "
          << record->timeline << ", confirmed " << record->confirmed.to_string() << "\n";
    }
    const bool allow_reset = slot_reset_allowed(cfg, record);
    std::optional<Lsn> fork;
    if (record && record->timeline != sys->timeline) {
      auto history = stream.query("TIMELINE_HISTORY " + std::to_string(sys->timeline));
      if (history && !history->empty() && (*history)[0].size() >= 2) {
        fork = timeline_switchpoint((*history)[0][1].value_or(""), record->timeline);
      }
    }
    if (auto refused = check_slot_record(record, allow_reset, *sys, fork)) {
      refuse(*refused, record_code);
    }
    auto slot = stream.find_slot(cfg.source.slot);
    if (!slot) {
      out << "  FAIL cannot read pg_replication_slots: " << slot.error() << "\n";
      ok = false;
      slot_code = ExitCode::kRuntimeError;
    } else {
      if (!*slot) {
        out << "  slot " << cfg.source.slot << ": does not exist"
            << (cfg.source.create_slot ? " (will be created with plugin wal2json)" : "") << "\n";
      } else {
        const auto& s = **slot;
        out << "  slot " << cfg.source.slot << ": plugin " << s.plugin << ", type " << s.slot_type
            << ", database " << s.database << ", active " << (s.active ? "yes" : "no");
        if (s.active_pid) out << " (pid " << *s.active_pid << ")";
        out << ", confirmed_flush_lsn " << s.confirmed_flush_lsn.to_string() << ", wal_status "
            << s.wal_status << "\n";
      }
      if (auto refused = check_slot(*slot, record, allow_reset, cfg, sys->dbname)) {
        refuse(*refused, slot_code);
      }
    }
    bool privileges_ok = true;
    if (!list_tables(stream, cfg, sys->dbname, out, privileges_ok)) {
      ok = false;
      tables_code = ExitCode::kConfigError;
    }
    ok = ok && privileges_ok;  // exit 1 unless another check decides: a grant, not the config
  }
  stream.close();

  out << "kafka: " << cfg.kafka.bootstrap_servers << "\n";
  for (const auto& [k, v] : cfg.kafka.properties) {
    out << "  " << k << " = " << (config::is_secret_property(k) ? "****" : v) << "\n";
  }
  std::optional<ExitCode> kafka_code;
  if (auto brokers = kafka::probe_brokers(cfg.kafka, std::chrono::seconds(10)); !brokers) {
    if (brokers.error().config) {
      // `run` refuses these before it connects anywhere (exit 2).
      out << "  FAIL: " << brokers.error().message << " (run exits 2)\n";
      kafka_code = ExitCode::kConfigError;
    } else if (const auto kind = kafka::security_failure(brokers.error().err);
               kind != kafka::SecurityFailure::kNone) {
      // `run` stops on the same (exit 7): refused credentials, a failed TLS handshake.
      out << "  FAIL "
          << kafka::security_failure_message(kind, brokers.error().message, cfg.kafka.properties)
          << " (run exits 7)\n";
      kafka_code = ExitCode::kKafkaAuthFailed;
    } else {
      out << "  FAIL " << brokers.error().message << "\n";
    }
    ok = false;
  } else {
    out << "  " << *brokers << " broker(s) reachable\n";
  }
  out << (ok ? "check: ok\n" : "check: FAILED\n");
  if (ok) return ExitCode::kOk;
  // `run` creates its producer before it connects to PostgreSQL: a rejected property first.
  for (const auto& code : {kafka_code, server_code, record_code, tables_code, slot_code}) {
    if (code) return *code;
  }
  return ExitCode::kRuntimeError;  // Kafka: `run` would wait for it
}

}  // namespace walrelay
