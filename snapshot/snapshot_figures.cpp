#include "walrelay/snapshot/snapshot_figures.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "walrelay/app/metrics/exposition.hpp"

namespace walrelay::snapshot {

std::uint64_t SnapshotFigures::rows_done() const {
  std::uint64_t n = 0;
  for (const auto& t : tables) n += t.rows;
  return n;
}

double SnapshotFigures::rows_estimated() const {
  double n = 0;
  for (const auto& t : tables) n += std::max(t.estimated_rows, static_cast<double>(t.rows));
  return n;
}

double SnapshotFigures::eta_seconds() const {
  if (rows_per_second <= 0) return 0;
  return std::max(0.0, rows_estimated() - static_cast<double>(rows_done())) / rows_per_second;
}

std::size_t SnapshotFigures::tables_remaining() const {
  return static_cast<std::size_t>(
      std::count_if(tables.begin(), tables.end(), [](const TableFigures& t) { return !t.done; }));
}

std::string SnapshotFigures::summary() const {
  return fmt::format("{} / ~{:.0f} rows, {:.0f} rows/s, ETA {:.0f} s", rows_done(),
                     rows_estimated(), rows_per_second, eta_seconds());
}

double RateMeter::tick(std::uint64_t total, std::chrono::steady_clock::time_point now) {
  const double secs = std::chrono::duration<double>(now - last_).count();
  // A total that went down (a table started over) restarts the count.
  rate_ = secs > 0 && total >= last_total_ ? static_cast<double>(total - last_total_) / secs : 0;
  last_total_ = total;
  last_ = now;
  return rate_;
}

void append_metrics(std::string& out, const std::vector<SnapshotFigures>& running) {
  using metrics::label;
  using metrics::metric;
  using metrics::sample;
  const auto kind = [](const SnapshotFigures& f) { return "snapshot=\"" + label(f.kind) + "\""; };
  // A per-table gauge of every running snapshot: HELP and TYPE, then one sample a table.
  const auto per_table = [&](std::string_view name, std::string_view help, auto value) {
    metric(out, name, "gauge", help);
    for (const auto& f : running) {
      for (const auto& t : f.tables) {
        sample(out, name, value(t), kind(f) + ",table=\"" + label(t.name) + "\"");
      }
    }
  };
  per_table("walrelay_snapshot_table_rows",
            "rows of the table snapshotted so far (initial: acknowledged by Kafka; incremental: "
            "read)",
            [](const TableFigures& t) { return t.rows; });
  per_table("walrelay_snapshot_table_rows_estimated",
            "pg_class.reltuples of the table when its read started (0: unknown or not started)",
            [](const TableFigures& t) { return t.estimated_rows; });
  metric(out, "walrelay_snapshot_rows_per_second", "gauge",
         "rows snapshotted per second over the last progress interval");
  for (const auto& f : running)
    sample(out, "walrelay_snapshot_rows_per_second", f.rows_per_second, kind(f));
  metric(out, "walrelay_snapshot_eta_seconds", "gauge",
         "estimated rows left divided by rows per second (0: no rate yet)");
  for (const auto& f : running)
    sample(out, "walrelay_snapshot_eta_seconds", f.eta_seconds(), kind(f));
  metric(out, "walrelay_snapshot_tables_remaining", "gauge", "tables of the snapshot not done");
  for (const auto& f : running)
    sample(out, "walrelay_snapshot_tables_remaining", f.tables_remaining(), kind(f));
}

}  // namespace walrelay::snapshot
