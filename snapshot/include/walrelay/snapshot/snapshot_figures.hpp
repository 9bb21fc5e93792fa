#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::snapshot {

/// One table of a snapshot: rows snapshotted so far and PostgreSQL's estimate of its size.
struct TableFigures {
  std::string name;           ///< `schema.table`
  std::uint64_t rows = 0;     ///< rows read (incremental) or acknowledged by Kafka (initial)
  double estimated_rows = 0;  ///< pg_class.reltuples when its read started; 0 unknown / not yet
  bool done = false;
};

/// What a snapshot has done and has left (issue "Snapshots", "Progress and speed"): the figures of
/// its periodic log line and of /metrics.
struct SnapshotFigures {
  std::string_view kind;  ///< "initial" or "incremental" (the `snapshot` label of the metrics)
  std::vector<TableFigures> tables;
  double rows_per_second = 0;  ///< over the last progress interval

  [[nodiscard]] std::uint64_t rows_done() const;
  /// Sum over the tables of max(estimate, rows done): a table never counts less than it gave.
  [[nodiscard]] double rows_estimated() const;
  /// (estimated − done) ÷ rows/s, seconds; 0 when the rate is 0 (nothing to tell yet).
  [[nodiscard]] double eta_seconds() const;
  [[nodiscard]] std::size_t tables_remaining() const;
  /// `12000 / ~50000 rows, 4000 rows/s, ETA 10 s` (the progress lines' figures).
  [[nodiscard]] std::string summary() const;
};

/// Rows per second between two readings of a running total (one per progress interval).
class RateMeter {
 public:
  /// Takes a reading: `total` rows at `now`. Returns and keeps the rate since the last reading
  /// (since construction for the first).
  double tick(std::uint64_t total,
              std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  [[nodiscard]] double rate() const { return rate_; }

 private:
  std::uint64_t last_total_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  double rate_ = 0;
};

/// Appends the snapshots' metrics to a /metrics page: HELP and TYPE always (docs/operations.md
/// "Metrics" lists them), samples for each snapshot given (a running one):
/// `walrelay_snapshot_table_rows{snapshot,table}`, `walrelay_snapshot_table_rows_estimated{…}`,
/// `walrelay_snapshot_rows_per_second{snapshot}`, `walrelay_snapshot_eta_seconds{snapshot}`,
/// `walrelay_snapshot_tables_remaining{snapshot}`.
void append_metrics(std::string& out, const std::vector<SnapshotFigures>& running);

}  // namespace walrelay::snapshot
