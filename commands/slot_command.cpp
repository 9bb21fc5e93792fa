#include "walrelay/commands/slot_command.hpp"

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <map>

#include "walrelay/core/json.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/state/state_store.hpp"

namespace walrelay {

namespace {

// How a field's value is written in JSON (the table prints the text as it is).
enum class Kind : std::uint8_t {
  kString,
  kNumber,   // digits (the server's text): a JSON number; "" → null
  kBoolean,  // "true"/"yes" → true, else false; "" → null
};

struct Field {
  std::string key;
  std::string value;
  Kind kind = Kind::kString;
};

using Fields = std::vector<Field>;  // printed in order

void print(std::ostream& out, const Fields& f, bool json) {
  if (json) {
    std::string s = "{";
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (i > 0) s.push_back(',');
      json::append_string(s, f[i].key);
      s.push_back(':');
      const std::string& v = f[i].value;
      if (f[i].kind == Kind::kString) {
        json::append_string(s, v);
      } else if (v.empty()) {
        s += "null";
      } else if (f[i].kind == Kind::kBoolean) {
        s += v == "true" || v == "yes" ? "true" : "false";
      } else {
        s += v;
      }
    }
    s += "}\n";
    out << s;
    return;
  }
  std::size_t width = 0;
  for (const auto& field : f) width = std::max(width, field.key.size());
  for (const auto& field : f) {
    out << field.key << std::string(width - field.key.size() + 2, ' ') << field.value << "\n";
  }
}

}  // namespace

ExitCode run_slot_command(const config::Config& cfg, const std::string& action, bool json, bool yes,
                          std::ostream& out) {
  if (action != "status" && action != "create" && action != "drop") {
    out << "walrelay slot: expected status, create or drop, got '" << action << "'\n";
    return ExitCode::kConfigError;
  }
  if (action == "drop" && !yes) {
    out << "walrelay slot drop: dropping slot " << cfg.source.slot
        << " loses every change it still holds for walrelay; add --yes to do it\n";
    return ExitCode::kConfigError;
  }
  boost::asio::io_context io;
  pg::ReplicationStream stream(io.get_executor(), cfg.source.conninfo, "walrelay-slot-" + cfg.name);
  auto sys = stream.connect();
  if (!sys) {
    out << "walrelay slot: " << sys.error() << "\n";
    return ExitCode::kRuntimeError;
  }
  const std::string& slot = cfg.source.slot;
  const std::string lit = pg::quote_literal(slot);
  const std::string state_dir =
      cfg.source.state_dir.empty() ? StateStore::default_dir() : cfg.source.state_dir;
  Fields f = {{"slot", slot}, {"database", sys->dbname}, {"system", sys->system_id}};
  if (action == "create") {
    auto found = stream.find_slot(slot);
    if (found && *found) {
      out << "walrelay slot create: slot " << slot << " exists already\n";
      return ExitCode::kRuntimeError;
    }
    auto created = stream.create_slot(slot, "wal2json", "nothing");
    if (!created) {
      out << "walrelay slot create: " << created.error() << "\n";
      return ExitCode::kRuntimeError;
    }
    f.push_back({"created", "plugin wal2json, consistent point " + created->first.to_string()});
    // No slot record yet: the first `run` takes the slot as one it never streamed from.
    if (cfg.snapshot.mode == config::SnapshotMode::kInitial) {
      f.push_back({"snapshot",
                   "the first walrelay run reads the captured tables by an incremental snapshot "
                   "while streaming (snapshot.mode initial)"});
    } else if (cfg.snapshot.mode == config::SnapshotMode::kNever) {
      f.push_back({"snapshot", "none (snapshot.mode never): walrelay run streams changes only"});
    }
    print(out, f, json);
    return ExitCode::kOk;
  }
  if (action == "drop") {
    auto dropped = stream.query("SELECT pg_catalog.pg_drop_replication_slot(" + lit + ")");
    if (!dropped) {
      out << "walrelay slot drop: " << dropped.error() << "\n";
      return ExitCode::kRuntimeError;
    }
    f.push_back({"dropped", "yes", Kind::kBoolean});
    // walrelay's record of the slot goes with it: a record of a dropped slot makes the next start
    // refuse to create a new one (exit 5), and its snapshot progress is not a new slot's.
    auto removed = remove_slot_files(state_dir, slot);
    if (!removed) {
      f.push_back({"record", "NOT removed: " + removed.error()});
      print(out, f, json);
      return ExitCode::kRuntimeError;
    }
    std::string paths;
    for (const auto& p : *removed) paths += (paths.empty() ? "" : ", ") + p;
    f.push_back({"record", removed->empty() ? "none (" + state_dir + ")" : "removed " + paths});
    print(out, f, json);
    return ExitCode::kOk;
  }
  auto rows = stream.query(
      "SELECT plugin, slot_type, active::text, coalesce(active_pid::text, ''), "
      "confirmed_flush_lsn::text, restart_lsn::text, coalesce(wal_status, ''), "
      "pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), restart_lsn)::bigint::text, "
      "pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"
      "::text, coalesce(safe_wal_size::text, '') "
      "FROM pg_catalog.pg_replication_slots WHERE slot_name = " +
      lit);
  if (!rows) {
    out << "walrelay slot status: " << rows.error() << "\n";
    return ExitCode::kRuntimeError;
  }
  if (rows->empty()) {
    f.push_back({"exists", "no", Kind::kBoolean});
  } else {
    const auto& r = (*rows)[0];
    const auto v = [&](std::size_t i) { return r[i].value_or(""); };
    f.insert(f.end(), {{"exists", "yes", Kind::kBoolean},
                       {"plugin", v(0)},
                       {"type", v(1)},
                       {"active", v(2), Kind::kBoolean},
                       {"active_pid", v(3), Kind::kNumber},
                       {"confirmed_flush_lsn", v(4)},
                       {"restart_lsn", v(5)},
                       {"wal_status", v(6)},
                       {"retained_wal_bytes", v(7), Kind::kNumber},
                       {"unconfirmed_wal_bytes", v(8), Kind::kNumber},
                       {"safe_wal_size", v(9), Kind::kNumber}});
  }
  const StateStore store(state_dir, slot);
  auto record = store.load();
  if (!record) {
    f.push_back({"record", "unreadable: " + record.error()});
  } else if (!*record) {
    f.push_back({"record", "none (" + store.path() + ")"});
  } else {
    f.push_back({"record", store.path()});
    f.push_back({"record_system", (*record)->system_id});
    f.push_back({"record_confirmed", (*record)->confirmed.to_string()});
  }
  print(out, f, json);
  return ExitCode::kOk;
}

}  // namespace walrelay
