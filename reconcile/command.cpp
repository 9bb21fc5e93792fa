#include "walrelay/reconcile/command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "inbox_check.hpp"
#include "outbox_source.hpp"
#include "pg_session.hpp"
#include "repair.hpp"
#include "run_once.hpp"
#include "schedule.hpp"
#include "topic_reader.hpp"
#include "walrelay/core/headers.hpp"
#include "walrelay/kafka/security.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/reconcile/break_ages.hpp"
#include "walrelay/reconcile/buckets.hpp"
#include "walrelay/reconcile/classify.hpp"
#include "walrelay/reconcile/report.hpp"
#include "walrelay/state/state_store.hpp"

namespace walrelay::reconcile {

namespace {

constexpr const char* kApplicationName = "walrelay-reconcile";
constexpr std::size_t kPhantomLookupBatch = 1000;
constexpr auto kKafkaTimeout = std::chrono::seconds(10);

Failure pg_failure(const std::string& what, const pg::Error& e) {
  return Failure{
      e.kind == pg::ErrorKind::kConfiguration ? ExitCode::kConfigError : ExitCode::kReadFailed,
      what + ": " + e.message};
}

Failure kafka_failure(const std::string& what, const kafka::Error& e) {
  return Failure{kafka::security_failure(e) != kafka::SecurityFailure::kNone
                     ? ExitCode::kKafkaAuthFailed
                     : ExitCode::kReadFailed,
                 what + ": " + e.describe()};
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The outbox tables of the configuration that exist: each table of the database goes to the
/// first `tables` entry matching it (unless `exclude` matches it), as the connector routes it.
std::expected<std::vector<OutboxTable>, Failure> find_outbox_tables(PgSession& catalog,
                                                                    const config::Config& cfg) {
  auto rows = catalog.query(
      "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON "
      "n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND "
      "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' "
      "ORDER BY 1, 2");
  if (!rows) return std::unexpected(pg_failure("listing the tables", rows.error()));
  auto matches = [](const config::TableConfig& tc, const std::string& s, const std::string& t) {
    return config::glob_match(tc.schema_pattern, s) && config::glob_match(tc.table_pattern, t);
  };
  std::vector<OutboxTable> out;
  for (const auto& r : *rows) {
    if (!r[0] || !r[1]) continue;
    const std::string& schema = *r[0];
    const std::string& table = *r[1];
    if (std::ranges::any_of(cfg.exclude,
                            [&](const auto& e) { return matches(e, schema, table); })) {
      continue;
    }
    for (std::size_t i = 0; i < cfg.tables.size(); ++i) {
      if (!matches(cfg.tables[i], schema, table)) continue;
      if (cfg.tables[i].outbox) {
        OutboxTable t;
        t.schema = schema;
        t.table = table;
        t.config_index = i;
        t.outbox = &*cfg.tables[i].outbox;
        t.poll = cfg.source.mode == config::SourceMode::kPoll && t.outbox->poll.has_value();
        out.push_back(std::move(t));
      }
      break;
    }
  }
  return out;
}

/// Waits until the slot's confirmed_flush_lsn is at or past `lsn`, at most `limit`. True: it is;
/// false: not in time.
std::expected<bool, Failure> wait_delivered(PgSession& catalog, const std::string& slot,
                                            const std::string& lsn, std::chrono::milliseconds limit,
                                            const std::atomic<bool>& cancel) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (cancel) return std::unexpected(Failure{ExitCode::kOk, "stopped", true});
    auto rows = catalog.query(
        "SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false), confirmed_flush_lsn::text "
        "FROM pg_catalog.pg_replication_slots WHERE slot_name = $2",
        {lsn, slot});
    if (!rows) return std::unexpected(pg_failure("reading slot " + slot, rows.error()));
    if (rows->empty()) {
      return std::unexpected(
          Failure{ExitCode::kReadFailed, "replication slot " + slot +
                                             " does not exist: reconcile compares what walrelay "
                                             "delivered from it (source.slot)"});
    }
    if ((*rows)[0][0] == "t") return true;
    if (std::chrono::steady_clock::now() >= deadline) {
      spdlog::warn(
          "reconcile: slot {} confirmed {} but not yet {} after {} ms "
          "(reconcile.in_flight_limit): rows not in Kafka are in_flight breaks",
          slot, (*rows)[0][1].value_or("nothing"), lsn, limit.count());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// The ids of `ids` that `t` holds now (outside the comparison's snapshot).
std::expected<std::unordered_set<std::string>, Failure> present_in(
    PgSession& catalog, const OutboxTable& t, const std::vector<std::string>& ids) {
  std::unordered_set<std::string> present;
  const std::string col = pg::quote_ident(t.outbox->event_id);
  const std::string sql =
      "SELECT " + col + "::text FROM " + t.quoted() + " WHERE " + col + "::text = ANY($1::text[])";
  for (std::size_t i = 0; i < ids.size(); i += kPhantomLookupBatch) {
    const std::vector<std::string> batch(
        ids.begin() + static_cast<std::ptrdiff_t>(i),
        ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + kPhantomLookupBatch)));
    auto rows = catalog.query(sql, {text_array_literal(batch)});
    if (!rows) return std::unexpected(pg_failure("looking up " + t.name(), rows.error()));
    for (const auto& r : rows.value()) {
      if (r[0]) present.insert(*r[0]);
    }
  }
  return present;
}

/// Compares one outbox table. `snapshot` holds the source's transaction.
class TableComparison {
 public:
  TableComparison(const config::Config& cfg, const Options& options, PgSession& snapshot,
                  PgSession& catalog, router::TypeRegistry& types, std::int64_t now,
                  const std::atomic<bool>& cancel)
      : cfg_(cfg),
        options_(options),
        cancel_(cancel),
        catalog_(catalog),
        source_(snapshot, types),
        cutoff_(options.since ? now - options.since->count() : -1),
        now_(now) {}

  std::expected<TableReport, Failure> run(const OutboxTable& t, TableReport report) {
    report.table = t.name();
    const std::size_t buckets = cfg_.reconcile.buckets;
    BucketSums src(buckets);
    BucketSums kaf(buckets);
    std::set<std::string> topics;
    // Pass 1: sums of both sides (and, in poll mode, the rows not sent, each classified once).
    unsent_.clear();
    auto read_src = read_source(t, &report, [&](const SourceEvent& e) {
      if (topics.size() < 1000 && !topics.contains(std::string(e.topic))) {
        topics.emplace(e.topic);
      }
      src.add(e.id, e.digest);
    });
    if (!read_src) return std::unexpected(*read_src.error());
    report.topics.assign(topics.begin(), topics.end());
    auto reader = TopicReader::open(cfg_, report.topics, kKafkaTimeout);
    if (!reader) return std::unexpected(kafka_failure("describing the topics", reader.error()));
    if (auto r = read_kafka(*reader, [&](const Entry& e) { kaf.add(e.id, e.digest); }); !r) {
      return std::unexpected(r.error());
    }
    report.source_rows = src.total();
    report.kafka_records = kaf.total();

    // Pass 2: only the differing buckets, in rounds under the bound.
    const auto differing = differing_buckets(src, kaf);
    report.expanded_buckets = differing.size();
    const auto rounds = plan_rounds(differing, src, kaf, cfg_.reconcile.max_expanded_entries);
    for (const auto& round : rounds) {
      if (round.size() == 1 &&
          src.count(round[0]) + kaf.count(round[0]) > cfg_.reconcile.max_expanded_entries) {
        spdlog::warn(
            "reconcile: {}: bucket {} holds {} entries, more than "
            "reconcile.max_expanded_entries ({}): compared in memory anyway (raise "
            "reconcile.buckets)",
            t.name(), round[0], src.count(round[0]) + kaf.count(round[0]),
            cfg_.reconcile.max_expanded_entries);
      }
      const BucketSet members(buckets, round);
      std::unordered_map<std::uint32_t, std::pair<std::vector<Entry>, std::vector<Entry>>> groups;
      auto collected = read_source(t, nullptr, [&](const SourceEvent& e) {
        const auto b = src.bucket_of(e.id);
        if (!members.contains(b)) return;
        groups[b].first.push_back(
            Entry{std::string(e.id), std::string(e.digest), e.timestamp_ms, ""});
      });
      if (!collected) return std::unexpected(*collected.error());
      auto read = read_kafka(*reader, [&](const Entry& e) {
        const auto b = kaf.bucket_of(e.id);
        if (members.contains(b)) groups[b].second.push_back(e);
      });
      if (!read) return std::unexpected(read.error());
      for (auto& [bucket, sides] : groups) {
        classify_bucket(sides.first, sides.second, report.delivered, report.found);
      }
    }
    // Phantoms whose row exists now were committed after the snapshot: newer, not breaks.
    auto present = present_now(t, phantom_ids(report.found));
    if (!present) return std::unexpected(present.error());
    report.newer_than_snapshot = resolve_phantoms(report.found, *present);
    std::ranges::sort(report.found.breaks, [](const Break& a, const Break& b) {
      return std::tie(a.cls, a.id) < std::tie(b.cls, b.id);
    });
    if (unmappable_ > 0) {
      spdlog::warn("reconcile: {}: {} rows walrelay cannot publish were left out (the first: {})",
                   t.name(), unmappable_, first_unmappable_);
    }
    if (options_.repair) {
      // Only missing events (the slot passed them: never in_flight ones); read again in the same
      // snapshot, so each is the row that was compared.
      std::vector<std::string> missing;
      for (const auto& b : report.found.breaks) {
        if (b.cls == BreakClass::kMissing) missing.push_back(b.id);
      }
      repair_missing(cfg_, source_, t, missing, report);
    }
    return report;
  }

 private:
  // An error is a Failure (optional, so that success needs nothing).
  using Step = std::expected<void, std::optional<Failure>>;

  /// Visits the table's rows (after --since). In poll mode only the `sent` rows reach `visit`;
  /// the others are remembered in unsent_ (their records are not compared) and, when `classify`
  /// is set, counted or reported in it (unsent_row).
  Step read_source(const OutboxTable& t, TableReport* classify,
                   const std::function<void(const SourceEvent&)>& visit) {
    unmappable_ = 0;
    auto r = source_.read(
        t,
        [&](const SourceEvent& e) {
          if (cutoff_ >= 0 && e.timestamp_ms < cutoff_) return;
          if (e.status != RowStatus::kSent) {
            if (classify != nullptr) unsent_row(e, *classify);
            return;
          }
          visit(e);
        },
        unmappable_, first_unmappable_);
    if (!r) return std::unexpected(pg_failure("reading " + t.name(), r.error()));
    return {};
  }

  /// Poll mode: a row the relay has not sent. Pending (or a status the configuration does not
  /// name) is on its way: a break (in_flight) only once older than reconcile.in_flight_limit by
  /// the row's time (a row without one is never); failed is a break of its own.
  void unsent_row(const SourceEvent& e, TableReport& report) {
    unsent_.emplace(e.id);
    Break b;
    b.id = std::string(e.id);
    b.since_ms = e.timestamp_ms;
    if (e.status == RowStatus::kFailed) {
      b.cls = BreakClass::kFailed;
      b.detail = "attempts " + std::to_string(e.attempts);
      if (!e.last_error.empty()) b.detail += ", last_error: " + std::string(e.last_error);
      report.found.breaks.push_back(std::move(b));
      return;
    }
    const auto limit = cfg_.reconcile.in_flight_limit.count();
    if (e.timestamp_ms < 0 || now_ - e.timestamp_ms <= limit) {
      ++report.in_flight_rows;
      return;
    }
    b.cls = BreakClass::kInFlight;
    b.detail = "status " + std::string(e.status_text) + " for more than " +
               std::to_string(limit / 1000) + " s (reconcile.in_flight_limit), attempts " +
               std::to_string(e.attempts);
    report.found.breaks.push_back(std::move(b));
  }

  std::expected<void, Failure> read_kafka(TopicReader& reader,
                                          const std::function<void(const Entry&)>& visit) {
    Entry e;
    auto r = reader.read(
        [&](const TopicEvent& ev) {
          if (cutoff_ >= 0 && ev.timestamp_ms < cutoff_) return;
          // Poll mode: a record of a row not sent (a relay that crashed before its COMMIT, a
          // failed row's earlier try) is compared with nothing: the row is reported by status.
          if (!unsent_.empty() && unsent_.contains(std::string(ev.id))) return;
          e.where = std::string(ev.topic) + "/" + std::to_string(ev.partition) + "@" +
                    std::to_string(ev.offset);
          e.id = ev.id.empty() ? "(no id header) " + e.where : std::string(ev.id);
          e.digest = std::string(ev.digest);
          e.timestamp_ms = ev.timestamp_ms;
          visit(e);
        },
        cfg_.reconcile.read_timeout, &cancel_);
    if (!r) {
      if (cancel_) return std::unexpected(Failure{ExitCode::kOk, "stopped", true});
      return std::unexpected(kafka_failure("reading the topics", r.error()));
    }
    return {};
  }

  std::expected<std::unordered_set<std::string>, Failure> present_now(
      const OutboxTable& t, const std::vector<std::string>& ids) {
    return present_in(catalog_, t, ids);
  }

  const config::Config& cfg_;
  const Options& options_;
  const std::atomic<bool>& cancel_;
  PgSession& catalog_;
  OutboxSource source_;
  std::int64_t cutoff_;
  std::int64_t now_;
  std::unordered_set<std::string> unsent_;  ///< poll mode: the event ids of rows not sent
  std::uint64_t unmappable_ = 0;
  std::string first_unmappable_;
};

std::expected<Report, Failure> compare(const config::Config& cfg, const Options& options,
                                       const std::atomic<bool>& cancel) {
  Report report;
  report.now_ms = now_ms();
  report.repair = options.repair;
  auto catalog = PgSession::open(cfg.source.conninfo, kApplicationName);
  if (!catalog) return std::unexpected(pg_failure("source.conninfo", catalog.error()));
  auto found = find_outbox_tables(**catalog, cfg);
  if (!found) return std::unexpected(found.error());
  std::vector<OutboxTable> tables;
  if (options.tables.empty()) {
    tables = std::move(*found);
  } else {
    for (const auto& name : options.tables) {
      auto it = std::ranges::find_if(
          *found, [&](const OutboxTable& t) { return t.name() == name || t.quoted() == name; });
      if (it == found->end()) {
        return std::unexpected(Failure{
            ExitCode::kConfigError,
            "--table " + name +
                ": not an outbox table of the configuration found in the database (row-change "
                "tables are not compared yet)"});
      }
      tables.push_back(*it);
    }
  }
  if (tables.empty()) {
    return std::unexpected(Failure{ExitCode::kConfigError,
                                   "tables: no outbox table of the configuration exists in the "
                                   "database (row-change tables are not compared yet)"});
  }
  if (options.since) {
    for (const auto& t : tables) {
      if (!t.outbox->timestamp) {
        return std::unexpected(Failure{
            ExitCode::kConfigError,
            "tables[" + std::to_string(t.config_index) +
                "].outbox.timestamp: --since needs the outbox's timestamp column (it is also the "
                "record's timestamp, so both sides are cut at the same instant): " +
                t.name()});
      }
    }
  }
  if (options.inbox) {
    if (!cfg.inbox.present) {
      return std::unexpected(Failure{ExitCode::kConfigError,
                                     "inbox.conninfo: --inbox compares with the inbox of the "
                                     "configuration's inbox: section, which it does not have"});
    }
    if (cfg.inbox.event_id !=
        config::InboxField{config::InboxFieldSource::kHeader, std::string(header::kId)}) {
      return std::unexpected(Failure{ExitCode::kConfigError,
                                     "inbox.event_id: --inbox matches the ledger by the "
                                     "connector's event id header (header:id), not " +
                                         config::to_string(cfg.inbox.event_id)});
    }
  }
  router::TypeRegistry types;
  {
    OutboxSource describer(**catalog, types);
    for (auto& t : tables) {
      if (auto d = describer.describe(t); !d) {
        return std::unexpected(Failure{ExitCode::kReadFailed, d.error()});
      }
    }
  }

  // One snapshot for every table, and the WAL position in it: every row it shows was committed
  // at or before that position (the insert position, not the write position, so that a commit
  // with synchronous_commit off that is not yet written is still before it).
  // In poll mode (docs/relay.md) there is no slot: a row is marked sent in the transaction that
  // waited for Kafka's acknowledgement of its record, so a `sent` row in the snapshot is in Kafka
  // by the end offsets taken after it, and the other rows are told apart by their status.
  const bool poll = cfg.source.mode == config::SourceMode::kPoll;
  auto snapshot = PgSession::open(cfg.source.conninfo, kApplicationName);
  if (!snapshot) return std::unexpected(pg_failure("source.conninfo", snapshot.error()));
  const std::string begin =
      poll ? "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SELECT NULL::text"
           : "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; SELECT "
             "pg_catalog.pg_current_wal_insert_lsn()::text";
  auto lsn = (*snapshot)->query(begin);
  if (!lsn) return std::unexpected(pg_failure("taking the source's snapshot", lsn.error()));
  const std::string snapshot_lsn = lsn->empty() ? "" : (*lsn)[0][0].value_or("");
  std::expected<bool, Failure> delivered = true;
  if (!poll) {
    delivered = wait_delivered(**catalog, cfg.source.slot, snapshot_lsn,
                               cfg.reconcile.in_flight_limit, cancel);
    if (!delivered) return std::unexpected(delivered.error());
    spdlog::info("reconcile: snapshot at {}, slot {} {}", snapshot_lsn, cfg.source.slot,
                 *delivered ? "passed it" : "did not pass it in time");
  }

  TableComparison comparison(cfg, options, **snapshot, **catalog, types, report.now_ms, cancel);
  for (const auto& t : tables) {
    TableReport tr;
    tr.snapshot_lsn = snapshot_lsn;
    tr.delivered = *delivered;
    tr.poll = poll;
    auto done = comparison.run(t, std::move(tr));
    if (!done) return std::unexpected(done.error());
    spdlog::info("reconcile: {}: {} rows, {} records, {} breaks, {} duplicates", done->table,
                 done->source_rows, done->kafka_records, done->found.breaks.size(),
                 done->found.duplicates);
    report.tables.push_back(std::move(*done));
  }
  (void)(*snapshot)->query("COMMIT");
  if (options.inbox) {
    auto present = [&](const std::vector<std::string>& ids)
        -> std::expected<std::unordered_set<std::string>, Failure> {
      std::unordered_set<std::string> all;
      for (const auto& t : tables) {
        auto found_ids = present_in(**catalog, t, ids);
        if (!found_ids) return std::unexpected(found_ids.error());
        all.insert(found_ids->begin(), found_ids->end());
      }
      return all;
    };
    if (auto r = compare_inbox(cfg, report, present, cancel); !r) {
      return std::unexpected(r.error());
    }
  }
  return report;
}

/// Sets the breaks' first-seen times from the break-age file and writes it back.
void keep_break_ages(const config::Config& cfg, Report& report) {
  const std::string dir =
      cfg.source.state_dir.empty() ? StateStore::default_dir() : cfg.source.state_dir;
  const std::string path = break_ages_path(dir, cfg.source.slot);
  auto ages = load_break_ages(path);
  if (!ages) {
    spdlog::warn("reconcile: {} (source.state_dir): break ages count from this run", ages.error());
    ages.emplace();
  }
  apply_break_ages(report, *ages);
  if (auto saved = save_break_ages(dir, path, *ages); !saved) {
    spdlog::warn("reconcile: cannot keep the break ages (source.state_dir): {}", saved.error());
  }
}

}  // namespace

std::expected<Report, Failure> reconcile_once(const config::Config& cfg, const Options& options,
                                              const std::atomic<bool>& cancel) {
  auto report = compare(cfg, options, cancel);
  if (report) keep_break_ages(cfg, *report);
  return report;
}

ExitCode exit_code_of(const Report& report) {
  if (report.repair_failures() > 0) return ExitCode::kDeliveryFailed;
  return report.unrepaired_breaks() > 0 ? ExitCode::kBreaksFound : ExitCode::kOk;
}

ExitCode run(const config::Config& cfg, const Options& options, std::ostream& out) {
  if (options.schedule) return run_schedule(cfg, options, out);
  const std::atomic<bool> never{false};
  auto report = reconcile_once(cfg, options, never);
  if (!report) {
    spdlog::error("reconcile: {}", report.error().message);
    return report.error().code;
  }
  if (options.json) {
    write_json(out, *report);
  } else {
    write_summary(out, *report);
  }
  return exit_code_of(*report);
}

}  // namespace walrelay::reconcile
