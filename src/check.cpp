#include "check.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <map>
#include <set>

#include "catalog.hpp"
#include "replication/replication_stream.hpp"
#include "source_encoding.hpp"
#include "state_store.hpp"
#include "table_inventory.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/sink/kafka_producer.hpp"

namespace walrelay {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// What `run` would capture, as it would route it: each matched table with its topic and event key
// (README "What gets published"), or its role.
bool list_tables(replication::ReplicationStream& stream, const config::Config& cfg,
                 const std::string& database, std::ostream& out) {
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
  bool ok = true;
  std::map<std::string, std::string> topics;  // Kafka's view of a topic name → table
  out << "tables: " << matched->size() << " matched\n";
  for (const MatchedTable& t : *matched) {
    const std::string qualified = t.schema + "." + t.table;
    out << "  " << qualified;
    switch (router.role_of(t.schema, t.table)) {
      case router::TableRole::kOutbox: {
        const auto& ob = cfg.tables[t.entry].outbox;
        out << ": outbox, topic " << (ob ? ob->topic : std::string("?"));
        if (auto missing = router.missing_outbox_columns(t.schema, t.table); !missing.empty()) {
          out << "  FAIL: no column " << join(missing) << " (run exits 2)";
          ok = false;
        }
        out << "\n";
        continue;
      }
      case router::TableRole::kIgnored:
        out << ": excluded\n";
        continue;
      case router::TableRole::kRowChange:
        break;
    }
    if (t.has_primary_key && t.replica_identity == 'i' && cfg.tables[t.entry].key_columns.empty() &&
        std::set<std::string>(t.primary_key.begin(), t.primary_key.end()) !=
            std::set<std::string>(t.replica_identity_key.begin(), t.replica_identity_key.end())) {
      out << "  FAIL: a primary key and REPLICA IDENTITY USING INDEX on (" +
                 join(t.replica_identity_key) + "): set key_columns (run exits 2)\n";
      ok = false;
      continue;
    }
    const auto key = event_key_columns(t, cfg);
    const std::string topic = router.topic_of(t.schema, t.table);
    out << " -> " << topic << ", key "
        << (key.empty() ? std::string("none (null keys)") : "(" + join(key) + ")");
    std::string clash = topic;  // Kafka treats '.' and '_' alike in topic names
    std::replace(clash.begin(), clash.end(), '.', '_');
    if (auto [it, inserted] = topics.emplace(clash, qualified); !inserted) {
      out << "  FAIL: the same topic as " << it->second << " (run exits 2)";
      ok = false;
    } else if (topic.size() > 249) {
      out << "  FAIL: topic longer than Kafka's 249 characters (run exits 2)";
      ok = false;
    }
    if (t.partitioned) out << ", partitioned (" << cfg.events.partitions << " topics)";
    if (t.replica_identity == 'n' || (t.replica_identity == 'd' && !t.has_primary_key) ||
        (t.replica_identity == 'i' && t.replica_identity_key.empty())) {
      out << "  WARN: wal2json drops its UPDATE and DELETE (REPLICA IDENTITY "
          << (t.replica_identity == 'n'   ? "NOTHING"
              : t.replica_identity == 'd' ? "DEFAULT without a primary key"
                                          : "USING INDEX of a dropped index")
          << ")";
    }
    out << "\n";
  }
  for (const auto& name : unmatched)
    out << "  WARN tables entry '" << name << "' matches no table\n";
  for (const SkippedRelation& r : skipped) {
    out << "  " << r.schema << "." << r.table << ": " << r.what
        << (r.named ? "  FAIL: named in tables, but logical decoding does not deliver its "
                      "changes (run exits 2)\n"
                    : ", skipped (logical decoding does not deliver its changes)\n");
    ok = ok && !r.named;
  }
  return ok;
}

}  // namespace

ExitCode run_check(const config::Config& cfg, std::ostream& out) {
  bool ok = true;
  out << "config: ok (connector '" << cfg.name << "', slot '" << cfg.source.slot
      << "', topic prefix '" << cfg.topics.prefix << "', " << cfg.tables.size()
      << " tables entries)\n";
  out << "postgres: " << config::mask_conninfo(cfg.source.conninfo) << "\n";
  boost::asio::io_context io;
  replication::ReplicationStream stream(io.get_executor(), cfg.source.conninfo,
                                        "walrelay-check-" + cfg.name);
  if (auto sys = stream.connect(); !sys) {
    out << "  FAIL " << sys.error() << "\n";
    ok = false;
  } else {
    out << "  server_version " << sys->server_version << ", system " << sys->system_id
        << ", timeline " << sys->timeline << ", database " << sys->dbname << ", WAL at "
        << sys->xlogpos.to_string() << "\n";
    auto wal_level = stream.query("SHOW wal_level");
    const std::string level =
        wal_level && !wal_level->empty() ? (*wal_level)[0][0].value_or("") : "?";
    out << "  wal_level " << level << (level == "logical" ? "" : "  FAIL: needs logical") << "\n";
    // The walsender drops a client silent for wal_sender_timeout: status updates must come
    // sooner. max_slot_wal_keep_size -1 lets a stalled slot fill the primary's disk.
    auto settings = stream.query(
        "SELECT (SELECT setting::bigint * CASE unit WHEN 's' THEN 1000 ELSE 1 END FROM "
        "pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'), "
        "current_setting('max_slot_wal_keep_size')");
    if (settings && !settings->empty()) {
      const auto& r = (*settings)[0];
      const long long timeout_ms = r[0] ? std::stoll(*r[0]) : 0;
      out << "  wal_sender_timeout " << timeout_ms << " ms";
      if (timeout_ms > 0 && cfg.source.status_interval.count() >= timeout_ms) {
        out << "  WARN: source.status_interval (" << cfg.source.status_interval.count()
            << " ms) must be shorter, or the server drops walrelay between status updates";
      }
      out << "\n  max_slot_wal_keep_size " << r[1].value_or("?");
      if (r[1].value_or("") == "-1") {
        out << "  (unlimited: a stalled slot keeps WAL until the primary's disk is full; watch "
               "walrelay_slot_retained_wal_bytes)";
      }
      out << "\n";
    }
    ok = ok && level == "logical";
    // The same decision `run` makes before streaming (README "Database encoding").
    auto shown = stream.query("SHOW server_encoding");
    const std::string encoding =
        shown && !shown->empty() ? (*shown)[0][0].value_or("?") : std::string("?");
    if (auto transcoder = transcoder_for_database(encoding, cfg.source.allow_sql_ascii)) {
      out << "  server_encoding " << encoding << ": " << describe_transcoding(*transcoder) << "\n";
    } else {
      out << "  server_encoding " << encoding
          << "  FAIL: refused (run exits 2): " << transcoder.error() << "\n";
      ok = false;
    }
    // The same slot-record rule `run` applies (README "Reliability").
    const StateStore store(
        cfg.source.state_dir.empty() ? StateStore::default_dir() : cfg.source.state_dir,
        cfg.source.slot);
    auto record = store.load();
    if (!record) {
      out << "  FAIL slot record: " << record.error() << "\n";
      ok = false;
    } else if (*record) {
      out << "  slot record " << store.path() << ": system " << (*record)->system_id
          << ", timeline " << (*record)->timeline << ", confirmed "
          << (*record)->confirmed.to_string() << "\n";
      if ((*record)->system_id != sys->system_id && !cfg.source.allow_slot_reset) {
        out << "  FAIL the slot was streamed from another PostgreSQL system (run exits 5)\n";
        ok = false;
      }
    }
    auto slot = stream.find_slot(cfg.source.slot);
    if (!slot) {
      out << "  FAIL cannot read pg_replication_slots: " << slot.error() << "\n";
      ok = false;
    } else if (!*slot) {
      const bool streamed_before = record && *record && !cfg.source.allow_slot_reset;
      out << "  slot " << cfg.source.slot << ": does not exist"
          << (streamed_before ? "  FAIL: walrelay streamed it before, so it was dropped or lost "
                                "(run exits 5)"
              : cfg.source.create_slot ? " (will be created with plugin wal2json)"
                                       : "  FAIL: source.create_slot is false")
          << "\n";
      ok = ok && cfg.source.create_slot && !streamed_before;
    } else {
      const auto& s = **slot;
      out << "  slot " << cfg.source.slot << ": plugin " << s.plugin << ", type " << s.slot_type
          << ", database " << s.database << ", active " << (s.active ? "yes" : "no");
      if (s.active_pid) out << " (pid " << *s.active_pid << ")";
      out << ", confirmed_flush_lsn " << s.confirmed_flush_lsn.to_string() << ", wal_status "
          << s.wal_status << "\n";
      if (s.plugin != "wal2json" || s.slot_type != "logical" || s.wal_status == "lost") {
        out << "  FAIL: the slot must be a logical wal2json slot that is not lost\n";
        ok = false;
      }
    }
    ok = list_tables(stream, cfg, sys->dbname, out) && ok;
  }
  stream.close();

  out << "kafka: " << cfg.kafka.bootstrap_servers << "\n";
  for (const auto& [k, v] : cfg.kafka.properties) {
    out << "  " << k << " = " << (config::is_secret_property(k) ? "****" : v) << "\n";
  }
  if (auto brokers = sink::probe_brokers(cfg.kafka, std::chrono::seconds(10)); !brokers) {
    out << "  FAIL " << brokers.error() << "\n";
    ok = false;
  } else {
    out << "  " << *brokers << " broker(s) reachable\n";
  }
  out << (ok ? "check: ok\n" : "check: FAILED\n");
  return ok ? ExitCode::kOk : ExitCode::kRuntimeError;
}

}  // namespace walrelay
