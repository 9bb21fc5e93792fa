#include "check.hpp"

#include <boost/asio/io_context.hpp>

#include "replication/replication_stream.hpp"
#include "state_store.hpp"
#include "walrelay/sink/kafka_producer.hpp"

namespace walrelay {

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
    ok = ok && level == "logical";
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
