#pragma once

// One batch of events decided in one PostgreSQL transaction (docs/inbox.md "Decisions"): each
// event under a savepoint of its own, the ledger claimed with INSERT … ON CONFLICT … RETURNING
// and the digests compared, the effect (handlers or the events table), the versions and the
// deferred events, and the partitions' next offsets, committed together. Internal to inbox/.

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
// clang-format on
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "db.hpp"
#include "walrelay/app/metrics/histogram.hpp"
#include "walrelay/config/inbox.hpp"
#include "walrelay/inbox/counts.hpp"
#include "walrelay/inbox/event.hpp"
#include "walrelay/inbox/failure.hpp"
#include "walrelay/pg/async_connection.hpp"

namespace walrelay::inbox::detail {

enum class Outcome : std::uint8_t { kCommitted, kRetry, kFatal };

struct BatchResult {
  Outcome outcome = Outcome::kCommitted;
  Counts counts;                           ///< every topic's
  std::map<std::string, Counts> by_topic;  ///< by the topic of the event decided
  pg::Error error;                         ///< for kRetry and kFatal
};

/// Whether handler `h` runs for `e` (its topic, and its event_type unless that is empty).
bool handler_matches(const config::InboxHandler& h, const Event& e);

/// A failed statement's error as a quarantine reason: `SQLSTATE primary message`.
std::string reason_of(const pg::Error& error);

/// Decides batches on one connection. Holds references to `conn` and `cfg`; one batch at a time;
/// on `executor`'s thread.
class Decider {
 public:
  Decider(pg::AsyncConnection& conn, boost::asio::any_io_executor executor,
          const config::InboxConfig& cfg);

  /// Decides `events` (in partition order) and stores `next_offsets` ((topic, partition) → the
  /// offset of the next record to read) in one transaction. kCommitted: all of it committed;
  /// otherwise nothing was (the transaction is rolled back, or its connection is gone).
  /// `prelude`: statements (with their parameters) run first in the same transaction (a
  /// redrive's audit row and the removal of the quarantined decision it replaces); one that fails
  /// fails the batch (kFatal, or kRetry for a transient error).
  boost::asio::awaitable<BatchResult> run(
      const std::vector<Event>& events,
      const std::map<std::pair<std::string, std::int32_t>, std::int64_t>& next_offsets,
      std::vector<std::pair<std::string, Params>> prelude = {});

  /// Seconds each event's effect took (apply: its matching handlers' statements, or the events
  /// table's insert without handlers; decide_batch's one insert for a batch is one observation),
  /// round trips to PostgreSQL included; every run counted, also one rolled back afterwards.
  [[nodiscard]] const metrics::Histogram& handler_seconds() const { return handler_seconds_; }

 private:
  struct Step;
  /// Whether decide_batch may decide `events`: no `inbox.version`, and every event with a value
  /// has an id, no problem and is not older than the ledger's horizon.
  [[nodiscard]] bool batch_fits(const std::vector<Event>& events) const;
  /// Decides `events` with one ledger claim for all (decide_batch.cpp), under the savepoint
  /// `batch`. kRetry/kFatal (error set): the batch must end. Otherwise `decided` says whether it
  /// did (counts added to `by_topic`); false: rolled back to its savepoint, decide each event.
  boost::asio::awaitable<Failure> decide_batch(const std::vector<Event>& events,
                                               std::map<std::string, Counts>& by_topic,
                                               pg::Error& error, bool& decided);
  boost::asio::awaitable<Answer> q(std::string sql, Params params = {});
  boost::asio::awaitable<Failure> decide(const Event& e, Counts& counts, pg::Error& error);
  /// The event's effect: every matching handler, or a row of the events table; timed in
  /// handler_seconds_.
  boost::asio::awaitable<Answer> apply(const Event& e);
  /// apply's statements (apply times them).
  boost::asio::awaitable<Answer> effect(const Event& e);
  /// Applies the deferred events of (tenant, aggregate) from version `next` on, in order.
  boost::asio::awaitable<Failure> apply_deferred(const std::string& tenant,
                                                 const std::string& aggregate, std::int64_t next,
                                                 Counts& counts, pg::Error& error);
  /// Records `e` in the quarantine table with `reason` (after ROLLBACK TO its savepoint); with
  /// `ledger_decision`, the ledger row (already claimed) is set QUARANTINED too.
  boost::asio::awaitable<Failure> quarantine(const Event& e, const std::string& reason,
                                             const std::string& sqlstate, bool ledger_decision,
                                             pg::Error& error);

  pg::AsyncConnection& conn_;
  boost::asio::any_io_executor executor_;
  const config::InboxConfig& cfg_;
  std::vector<int> handler_params_;  // placeholder_count of each handler's SQL
  std::string s_;                    // the schema
  metrics::Histogram handler_seconds_{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                       0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
};

}  // namespace walrelay::inbox::detail
