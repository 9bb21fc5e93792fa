// Issue "Snapshots", "Progress and speed": rows done / estimated total (pg_class.reltuples),
// rows/s, ETA, in the progress line and on /metrics.
#include "walrelay/snapshot/snapshot_figures.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace walrelay::snapshot {
namespace {

using namespace std::chrono_literals;

SnapshotFigures two_tables() {
  SnapshotFigures f;
  f.kind = "initial";
  f.tables = {TableFigures{"public.orders", 30'000, 100'000, false},
              TableFigures{"public.small", 500, 0, true}};  // never analysed: its rows count
  f.rows_per_second = 10'000;
  return f;
}

TEST(SnapshotFigures, EtaIsTheEstimatedRowsLeftOverTheRate) {
  const SnapshotFigures f = two_tables();
  EXPECT_EQ(f.rows_done(), 30'500u);
  EXPECT_DOUBLE_EQ(f.rows_estimated(), 100'500);  // a table counts at least the rows it gave
  EXPECT_DOUBLE_EQ(f.eta_seconds(), 7);           // 70,000 rows at 10,000 rows/s
  EXPECT_EQ(f.tables_remaining(), 1u);
  EXPECT_EQ(f.summary(), "30500 / ~100500 rows, 10000 rows/s, ETA 7 s");
  SnapshotFigures no_rate = f;
  no_rate.rows_per_second = 0;
  EXPECT_DOUBLE_EQ(no_rate.eta_seconds(), 0);
}

TEST(SnapshotFigures, RateIsRowsBetweenTwoReadingsOverTheirInterval) {
  RateMeter m;
  const auto t0 = std::chrono::steady_clock::now();
  m.tick(0, t0);
  EXPECT_DOUBLE_EQ(m.tick(5'000, t0 + 2s), 2'500);
  EXPECT_DOUBLE_EQ(m.rate(), 2'500);
  EXPECT_DOUBLE_EQ(m.tick(5'000, t0 + 3s), 0);
  EXPECT_DOUBLE_EQ(m.tick(100, t0 + 4s), 0);  // a table started over: no negative rate
}

TEST(SnapshotFigures, MetricsHaveHelpAndTypeAlwaysAndSamplesPerRunningSnapshot) {
  std::string idle;
  append_metrics(idle, {});
  EXPECT_NE(idle.find("# TYPE walrelay_snapshot_table_rows gauge\n"), std::string::npos);
  EXPECT_NE(idle.find("# TYPE walrelay_snapshot_eta_seconds gauge\n"), std::string::npos);
  EXPECT_EQ(idle.find("walrelay_snapshot_table_rows{"), std::string::npos);

  SnapshotFigures inc;
  inc.kind = "incremental";
  inc.tables = {TableFigures{"public.\"Odd\"", 10, 0, false}};
  std::string out;
  append_metrics(out, {two_tables(), inc});
  EXPECT_NE(out.find("walrelay_snapshot_table_rows{snapshot=\"initial\",table=\"public.orders\"} "
                     "30000\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("walrelay_snapshot_table_rows_estimated{snapshot=\"initial\",table=\"public."
                     "orders\"} 100000\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("walrelay_snapshot_eta_seconds{snapshot=\"initial\"} 7\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("walrelay_snapshot_tables_remaining{snapshot=\"initial\"} 1\n"),
            std::string::npos)
      << out;
  // Label values escaped as the exposition format requires.
  EXPECT_NE(out.find("table=\"public.\\\"Odd\\\"\"} 10\n"), std::string::npos) << out;
  EXPECT_NE(out.find("walrelay_snapshot_rows_per_second{snapshot=\"incremental\"} 0\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace walrelay::snapshot
