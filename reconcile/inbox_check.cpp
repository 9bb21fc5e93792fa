#include "inbox_check.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <map>
#include <regex>
#include <unordered_map>

#include "pg_session.hpp"
#include "topic_reader.hpp"
#include "walrelay/kafka/security.hpp"
#include "walrelay/pg/replication_stream.hpp"

namespace walrelay::reconcile {

namespace {

constexpr const char* kApplicationName = "walrelay-reconcile-inbox";
constexpr auto kKafkaTimeout = std::chrono::seconds(10);
constexpr std::size_t kPhantomLookupBatch = 1000;

std::int64_t to_i64(const std::optional<std::string>& text, std::int64_t fallback = -1) {
  std::int64_t v = fallback;
  if (text) std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

/// A topic the inbox subscribes to: a name, or a `^regex` (librdkafka's subscription syntax,
/// read here as an ECMAScript regex: the patterns walrelay's examples use mean the same in both).
bool consumed(const config::InboxConfig& inbox, const std::string& topic) {
  for (const auto& t : inbox.topics) {
    if (!t.empty() && t[0] == '^') {
      try {
        if (std::regex_search(topic, std::regex(t))) return true;
      } catch (const std::regex_error&) {
      }
    } else if (t == topic) {
      return true;
    }
  }
  return false;
}

struct LedgerRow {
  std::size_t table = 0;  ///< index in report.tables
  std::string decision;
  std::int64_t decided_ms = -1;
  bool seen = false;  ///< a record read has its id
};

/// The inbox's side: what its tables hold for the topics compared.
class InboxSide {
 public:
  explicit InboxSide(const config::Config& cfg) : cfg_(cfg) {}

  std::expected<void, Failure> load(PgSession& db, const std::map<std::string, std::size_t>& owner,
                                    Report& report) {
    std::vector<std::string> topics;
    for (const auto& [t, i] : owner) topics.push_back(t);
    const std::string topics_array = text_array_literal(topics);
    const std::string s = pg::quote_ident(cfg_.inbox.schema);
    auto ms = [](const char* col) {
      return std::string("(extract(epoch FROM ") + col + ") * 1000)::bigint";
    };
    // One snapshot of the inbox's tables: the ledger and the positions are committed together
    // (docs/inbox.md "Offsets and restarts"), so an id below a position is in the ledger read.
    if (auto b = db.query("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"); !b) {
      return std::unexpected(failure("starting a transaction", b.error()));
    }
    auto ledger = db.query("SELECT event_id, topic, decision, " + ms("decided_at") + " FROM " + s +
                               ".ledger WHERE topic = ANY($1::text[])",
                           {topics_array});
    if (!ledger) return std::unexpected(failure("reading " + s + ".ledger", ledger.error()));
    for (const auto& r : *ledger) {
      if (!r[0] || !r[1]) continue;
      LedgerRow row;
      row.table = owner.at(*r[1]);
      row.decision = r[2].value_or("");
      row.decided_ms = to_i64(r[3]);
      ledger_.emplace(*r[0], std::move(row));
    }
    auto quarantine =
        db.query("SELECT event_id, topic, kafka_partition, kafka_offset, reason, sqlstate, " +
                     ms("quarantined_at") + " FROM " + s +
                     ".quarantine WHERE topic = ANY($1::text[]) ORDER BY id",
                 {topics_array});
    if (!quarantine) {
      return std::unexpected(failure("reading " + s + ".quarantine", quarantine.error()));
    }
    for (const auto& r : *quarantine) {
      const std::string where =
          r[1].value_or("") + "/" + r[2].value_or("") + "@" + r[3].value_or("");
      Break b;
      b.cls = BreakClass::kQuarantined;
      b.id = r[0] ? *r[0] : "(no id) " + where;
      b.since_ms = to_i64(r[6]);
      b.detail = r[4].value_or("") + (r[5] ? " (SQLSTATE " + *r[5] + ")" : "") + " at " + where;
      if (r[0]) quarantined_.insert(*r[0]);
      report.tables[owner.at(r[1].value_or(""))].found.breaks.push_back(std::move(b));
    }
    auto deferred = db.query(
        "SELECT event_id, topic, kafka_partition, kafka_offset, version, "
        "expected_version, " +
            ms("deferred_at") + " FROM " + s + ".deferred WHERE topic = ANY($1::text[])",
        {topics_array});
    if (!deferred) return std::unexpected(failure("reading " + s + ".deferred", deferred.error()));
    for (const auto& r : *deferred) {
      Break b;
      b.cls = BreakClass::kDeferred;
      b.id = r[0].value_or("");
      b.since_ms = to_i64(r[6]);
      b.detail = "version " + r[4].value_or("") + " waits for version " + r[5].value_or("") +
                 " at " + r[1].value_or("") + "/" + r[2].value_or("") + "@" + r[3].value_or("");
      report.tables[owner.at(r[1].value_or(""))].found.breaks.push_back(std::move(b));
    }
    auto offsets = db.query("SELECT topic, kafka_partition, next_offset FROM " + s +
                                ".offsets WHERE group_id = $1 AND topic = ANY($2::text[])",
                            {cfg_.inbox.group_id, topics_array});
    if (!offsets) return std::unexpected(failure("reading " + s + ".offsets", offsets.error()));
    for (const auto& r : *offsets) {
      next_offset_[{r[0].value_or(""), static_cast<std::int32_t>(to_i64(r[1], 0))}] =
          to_i64(r[2], 0);
    }
    (void)db.query("COMMIT");
    return {};
  }

  /// One record of a consumed topic.
  void visit(const TopicEvent& ev, std::size_t table, Report& report) {
    if (ev.id.empty() || ev.digest.empty()) return;  // no id: the quarantine has it; tombstone
    const std::string id(ev.id);
    if (auto it = ledger_.find(id); it != ledger_.end()) {
      it->second.seen = true;
      return;
    }
    if (quarantined_.contains(id)) return;
    // No stored position: the inbox has not committed a batch of this partition yet.
    const auto pos = next_offset_.find({std::string(ev.topic), ev.partition});
    TableReport& t = report.tables[table];
    if (pos == next_offset_.end() || ev.offset >= pos->second) {
      ++t.inbox_in_flight;
      return;
    }
    Break b;
    b.cls = BreakClass::kNotInInbox;
    b.id = id;
    b.since_ms = ev.timestamp_ms;
    b.detail = "at " + std::string(ev.topic) + "/" + std::to_string(ev.partition) + "@" +
               std::to_string(ev.offset) + ", below the inbox's position " +
               std::to_string(pos->second);
    t.found.breaks.push_back(std::move(b));
  }

  /// The ledger rows no record had: phantom_in_inbox unless an outbox row has the id.
  std::expected<void, Failure> phantoms(const PresentInSource& present_in_source, Report& report) {
    std::vector<std::string> candidates;
    for (const auto& [id, row] : ledger_) {
      if (!row.seen) candidates.push_back(id);
    }
    for (std::size_t i = 0; i < candidates.size(); i += kPhantomLookupBatch) {
      const std::vector<std::string> batch(
          candidates.begin() + static_cast<std::ptrdiff_t>(i),
          candidates.begin() +
              static_cast<std::ptrdiff_t>(std::min(candidates.size(), i + kPhantomLookupBatch)));
      auto present = present_in_source(batch);
      if (!present) return std::unexpected(present.error());
      for (const auto& id : batch) {
        if (present->contains(id)) continue;
        const LedgerRow& row = ledger_.at(id);
        Break b;
        b.cls = BreakClass::kPhantomInInbox;
        b.id = id;
        b.since_ms = row.decided_ms;
        b.detail = "decided " + row.decision + ", in no record read and no outbox row";
        report.tables[row.table].found.breaks.push_back(std::move(b));
      }
    }
    return {};
  }

 private:
  static Failure failure(const std::string& what, const pg::Error& e) {
    return Failure{
        e.kind == pg::ErrorKind::kConfiguration ? ExitCode::kConfigError : ExitCode::kReadFailed,
        "inbox: " + what + ": " + e.message};
  }

  const config::Config& cfg_;
  std::unordered_map<std::string, LedgerRow> ledger_;
  std::unordered_set<std::string> quarantined_;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> next_offset_;
};

}  // namespace

std::expected<void, Failure> compare_inbox(const config::Config& cfg, Report& report,
                                           const PresentInSource& present_in_source,
                                           const std::atomic<bool>& cancel) {
  std::map<std::string, std::size_t> owner;  // consumed topic -> its table's index
  for (std::size_t i = 0; i < report.tables.size(); ++i) {
    report.tables[i].inbox = true;
    for (const auto& topic : report.tables[i].topics) {
      if (consumed(cfg.inbox, topic)) owner.emplace(topic, i);
    }
  }
  if (owner.empty()) {
    spdlog::warn("reconcile --inbox: inbox.topics holds none of the compared tables' topics");
    return {};
  }
  auto db = PgSession::open(cfg.inbox.conninfo, kApplicationName);
  if (!db) {
    return std::unexpected(
        Failure{ExitCode::kConfigError, "inbox.conninfo: " + db.error().message});
  }
  InboxSide inbox(cfg);
  // The inbox's tables first, then the records: a record the inbox decides meanwhile is then
  // past the position read (in flight), never a break.
  if (auto r = inbox.load(**db, owner, report); !r) return r;
  std::vector<std::string> topics;
  for (const auto& [t, i] : owner) topics.push_back(t);
  auto reader = TopicReader::open(cfg, topics, kKafkaTimeout);
  auto kafka_failure = [&](const kafka::Error& e) {
    return Failure{kafka::security_failure(e) != kafka::SecurityFailure::kNone
                       ? ExitCode::kKafkaAuthFailed
                       : ExitCode::kReadFailed,
                   "inbox: reading the topics: " + e.describe()};
  };
  if (!reader) return std::unexpected(kafka_failure(reader.error()));
  auto read = reader->read(
      [&](const TopicEvent& ev) { inbox.visit(ev, owner.at(std::string(ev.topic)), report); },
      cfg.reconcile.read_timeout, &cancel);
  if (!read) {
    if (cancel) return std::unexpected(Failure{ExitCode::kOk, "stopped", true});
    return std::unexpected(kafka_failure(read.error()));
  }
  if (auto r = inbox.phantoms(present_in_source, report); !r) return r;
  for (auto& t : report.tables) {
    std::ranges::sort(t.found.breaks, [](const Break& a, const Break& b) {
      return std::tie(a.cls, a.id) < std::tie(b.cls, b.id);
    });
  }
  return {};
}

}  // namespace walrelay::reconcile
