#include "walrelay/connector/preflight.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace walrelay {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

const TableFinding* TablePreflight::first_refusal() const {
  for (const auto& f : general) {
    if (f.refused) return &f;
  }
  for (const auto& t : tables) {
    for (const auto& f : t.findings) {
      if (f.refused) return &f;
    }
  }
  return nullptr;
}

TablePreflight preflight_tables(const std::vector<MatchedTable>& matched,
                                const std::vector<SkippedRelation>& skipped,
                                const std::vector<std::string>& unmatched,
                                router::EventRouter& router, const config::Config& cfg) {
  TablePreflight out;
  for (const auto& name : unmatched) {
    out.general.push_back({false, name, "tables entry '" + name + "' matches no table yet"});
  }
  for (const SkippedRelation& r : skipped) {
    const std::string qualified = r.schema + "." + r.table;
    if (r.named) {
      // Named on purpose, yet nothing (or not everything) of it would ever arrive: refuse.
      out.general.push_back(
          {true, qualified,
           "tables entry '" + cfg.tables[r.entry].name + "' names " + qualified + ", " + r.what +
               ": logical decoding does not deliver its changes (only persistent ordinary and "
               "partitioned tables). Remove it, or capture the tables it is built from"});
    } else {
      out.general.push_back({false, qualified,
                             "skipping " + qualified + " (" + r.what +
                                 "): logical decoding does not deliver its changes"});
    }
  }
  std::map<std::string, std::string> topics;  // Kafka's view of a topic name → the table
  // Glob entries' mask columns: entry → the mask columns none of its tables so far has.
  std::map<std::size_t, std::set<std::string>> glob_mask_unseen;
  for (const MatchedTable& m : matched) {
    const std::string qualified = m.schema + "." + m.table;
    TableVerdict& v = out.tables.emplace_back();
    v.table = &m;
    v.role = router.role_of(m.schema, m.table);
    auto refuse = [&](std::string message) {
      v.findings.push_back({true, qualified, std::move(message)});
    };
    auto warn = [&](std::string message) {
      v.findings.push_back({false, qualified, std::move(message)});
    };
    if (v.role == router::TableRole::kOutbox) {
      // A misnamed column would stop the connector at the first event: refuse it now.
      if (auto missing = router.missing_outbox_columns(m.schema, m.table); !missing.empty()) {
        refuse("outbox table " + qualified + " has no column " + join(missing) +
               " named in its outbox configuration");
      }
      continue;
    }
    if (v.role != router::TableRole::kRowChange) continue;  // excluded
    v.topic = router.topic_of(m.schema, m.table);
    v.key = event_key_columns(m, cfg);
    if (v.topic.size() > 249) {
      refuse("table " + qualified + " maps to topic '" + v.topic +
             "', longer than Kafka's 249 characters; set a shorter `topic` for it");
    }
    std::string clash_key = v.topic;  // Kafka treats '.' and '_' alike in topic names
    std::replace(clash_key.begin(), clash_key.end(), '.', '_');
    if (auto [it, inserted] = topics.emplace(clash_key, qualified); !inserted) {
      refuse("tables " + it->second + " and " + qualified + " would both publish to topic '" +
             v.topic +
             "' (names are mapped to Kafka's [A-Za-z0-9._-], and Kafka treats '.' and '_' "
             "alike); give one of them its own `topic`");
    }
    const auto& tc = cfg.tables[m.entry];
    if (auto missing = router.missing_key_columns(m.schema, m.table); !missing.empty()) {
      // The router would refuse each change (never keying it by the whole row instead).
      refuse("table " + qualified + " has no column " + join(missing) +
             " named in its key_columns [" + join(tc.key_columns) +
             "]: its events cannot be keyed by the configured key. Fix key_columns for it");
    }
    if (auto nullable = router.nullable_key_columns(m.schema, m.table); !nullable.empty()) {
      // Not refused: the column may never hold NULL. But nothing else would say so.
      warn("table " + qualified + " keys its events by key_columns [" + join(tc.key_columns) +
           "], but " + join(nullable) + (nullable.size() == 1 ? " allows" : " allow") +
           " NULL and no unique index on NOT NULL columns lies within them: rows whose key "
           "columns are NULL share one Kafka key (compaction keeps only one of them). Make " +
           join(nullable) + " NOT NULL, or key by columns that identify a row");
    }
    const bool glob = tc.schema_pattern.find('*') != std::string::npos ||
                      tc.table_pattern.find('*') != std::string::npos;
    if (auto missing = router.missing_mask_columns(m.schema, m.table); !missing.empty()) {
      if (!glob) {
        // A typo would publish the real column in clear text.
        refuse("table " + qualified + " has no column " + join(missing) +
               " named in its mask_columns [" + join(tc.mask_columns) +
               "]: nothing would be masked for it. Fix mask_columns for it");
      } else {
        auto& unseen = glob_mask_unseen
                           .try_emplace(m.entry, std::set<std::string>(tc.mask_columns.begin(),
                                                                       tc.mask_columns.end()))
                           .first->second;
        std::erase_if(unseen, [&](const std::string& c) {
          return std::find(missing.begin(), missing.end(), c) == missing.end();
        });
      }
    } else if (glob) {
      glob_mask_unseen[m.entry].clear();  // every mask column is in this table
    }
    const char ident = m.replica_identity;
    // (An identity index that was dropped is not this case: warned about below.)
    if (m.has_primary_key && ident == 'i' && !m.replica_identity_key.empty() &&
        tc.key_columns.empty() &&
        std::set<std::string>(m.primary_key.begin(), m.primary_key.end()) !=
            std::set<std::string>(m.replica_identity_key.begin(), m.replica_identity_key.end())) {
      // Its INSERTs and UPDATEs carry the primary key, its DELETEs only the index's columns
      // (shared/cases/BUG-10, CASE-05): no key serves every event. The user chooses.
      const std::string idx = join(m.replica_identity_key);
      refuse("table " + qualified + " has a primary key but REPLICA IDENTITY USING INDEX on (" +
             idx +
             "): its DELETEs carry only the index's columns, so no key fits all its events. "
             "Set key_columns: [" +
             idx +
             "] for it (every event written under the index keyed by it; a DELETE written before "
             "the switch to the index, still in the slot's backlog, carries only the primary key "
             "and is keyed by it, with a warning), or REPLICA IDENTITY DEFAULT or FULL");
    }
    if (ident == 'n' || (ident == 'i' && m.replica_identity_key.empty())) {
      warn("table " + qualified + " has REPLICA IDENTITY " +
           (ident == 'n' ? "NOTHING" : "USING INDEX of an index that was dropped") +
           ": wal2json drops its UPDATE and DELETE changes without a trace. Set REPLICA "
           "IDENTITY DEFAULT (with a primary key) or FULL");
    } else if (ident == 'd' && !m.has_primary_key) {
      warn("table " + qualified +
           " has REPLICA IDENTITY DEFAULT but no usable (non-deferrable) primary key: wal2json "
           "drops its UPDATE and DELETE changes without a trace. Add a primary key or set "
           "REPLICA IDENTITY FULL");
    }
    if (!m.has_primary_key && ident != 'i' && tc.key_columns.empty()) {
      warn("table " + qualified +
           " has no primary key: its events get a null key (no per-key order, no compaction). "
           "Set key_columns for it");
    }
  }
  for (const auto& [entry, unseen] : glob_mask_unseen) {
    if (unseen.empty()) continue;
    const auto& tc = cfg.tables[entry];
    out.general.push_back(
        {true, tc.name,
         "tables entry '" + tc.name + "' names " +
             join(std::vector<std::string>(unseen.begin(), unseen.end())) +
             " in its mask_columns [" + join(tc.mask_columns) +
             "], a column none of the tables it matches has: nothing would be masked. Fix "
             "mask_columns for it"});
  }
  return out;
}

std::optional<Refusal> check_wal_level(const std::string& wal_level) {
  if (wal_level == "logical") return std::nullopt;
  return Refusal{ExitCode::kRuntimeError,
                 "wal_level is '" + wal_level +
                     "': logical decoding needs wal_level=logical (PostgreSQL docs §20.5.1); set "
                     "it in postgresql.conf and restart the server"};
}

std::chrono::milliseconds parse_pg_duration(const std::string& text) {
  std::size_t i = 0;
  long long n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') n = n * 10 + (text[i++] - '0');
  const std::string unit = text.substr(i);
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s" || unit.empty()) return std::chrono::seconds(n);
  if (unit == "min") return std::chrono::minutes(n);
  if (unit == "h") return std::chrono::hours(n);
  if (unit == "d") return std::chrono::hours(24 * n);
  return std::chrono::milliseconds(0);
}

StatusInterval status_interval_for(std::chrono::milliseconds configured,
                                   std::chrono::milliseconds wal_sender_timeout) {
  if (wal_sender_timeout.count() <= 0 || configured * 2 <= wal_sender_timeout) {
    return {configured, {}};
  }
  const auto interval = std::max(std::chrono::milliseconds(100), wal_sender_timeout / 3);
  return {interval, "source.status_interval " + std::to_string(configured.count()) +
                        " ms is not well below the server's wal_sender_timeout " +
                        std::to_string(wal_sender_timeout.count()) +
                        " ms: sending standby status updates every " +
                        std::to_string(interval.count()) + " ms"};
}

bool slot_reset_allowed(const config::Config& cfg, const std::optional<SlotRecord>& record) {
  return cfg.source.allow_slot_reset && !(record && record->reset_used);
}

std::optional<Refusal> check_slot_record(const std::optional<SlotRecord>& record, bool allow_reset,
                                         const pg::SystemInfo& server,
                                         const std::optional<Lsn>& fork) {
  if (!record || allow_reset) return std::nullopt;
  const std::string safe = record->confirmed.to_string();
  if (record->system_id != server.system_id) {
    return Refusal{ExitCode::kSlotLost,
                   "connected to PostgreSQL system " + server.system_id + ", but slot " +
                       record->slot + " was streamed from system " + record->system_id +
                       " up to LSN " + safe +
                       ": changes after it may be missing here. Last safe LSN: " + safe +
                       ". Set source.allow_slot_reset: true to accept that and start over"};
  }
  if (record->timeline != server.timeline && (!fork || record->confirmed > *fork)) {
    return Refusal{
        ExitCode::kSlotLost,
        "the server is on timeline " + std::to_string(server.timeline) +
            " after a failover; timeline " + std::to_string(record->timeline) +
            (fork ? " ended at " + fork->to_string() : std::string(" is not in its history")) +
            " but walrelay had confirmed up to " + safe +
            ": those changes may be lost. Last safe LSN: " + (fork ? fork->to_string() : safe) +
            ". Set source.allow_slot_reset: true to accept that"};
  }
  return std::nullopt;
}

std::optional<Refusal> check_slot(const std::optional<pg::SlotInfo>& slot,
                                  const std::optional<SlotRecord>& record, bool allow_reset,
                                  const config::Config& cfg, const std::string& database) {
  const std::string& name = cfg.source.slot;
  if (!slot) {
    if (record && !allow_reset) {
      const std::string safe = record->confirmed.to_string();
      return Refusal{ExitCode::kSlotLost,
                     "replication slot '" + name +
                         "' no longer exists (dropped, or lost in a failover), but walrelay "
                         "streamed it up to LSN " +
                         safe +
                         ". A fresh slot would silently skip every change since. Last safe "
                         "LSN: " +
                         safe + ". Set source.allow_slot_reset: true to create a new slot anyway"};
    }
    if (!cfg.source.create_slot) {
      return Refusal{
          ExitCode::kRuntimeError,
          "replication slot '" + name + "' does not exist and source.create_slot is false"};
    }
    return std::nullopt;
  }
  const auto& s = *slot;
  if (s.slot_type != "logical" || s.plugin != "wal2json") {
    return Refusal{ExitCode::kRuntimeError,
                   "replication slot '" + name + "' is a " + s.slot_type + " slot with plugin '" +
                       s.plugin +
                       "'; walrelay needs a logical slot with wal2json. Drop it or configure "
                       "another source.slot"};
  }
  if (s.database != database) {
    return Refusal{ExitCode::kRuntimeError, "replication slot '" + name +
                                                "' belongs to database '" + s.database +
                                                "', not '" + database + "'"};
  }
  if (s.wal_status == "lost") {
    const std::string safe = s.confirmed_flush_lsn.to_string();
    return Refusal{ExitCode::kSlotLost,
                   "replication slot '" + name +
                       "' is invalidated (wal_status=lost, e.g. by max_slot_wal_keep_size): "
                       "changes after " +
                       safe + " may be gone. Last safe LSN: " + safe +
                       ". Drop the slot and set source.allow_slot_reset: true to start over"};
  }
  return std::nullopt;
}

}  // namespace walrelay
