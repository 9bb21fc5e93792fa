#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace walrelay::config {

/// `reconcile:` (docs/reconcile.md): how `walrelay reconcile` compares the source with Kafka.
/// Every key is optional.
struct ReconcileConfig {
  /// Buckets of hash(event id) mod `buckets` each side sums (16 bytes per bucket and side).
  /// More buckets: fewer entries read again per differing bucket. 1..16777216, default 65536.
  std::size_t buckets = 65'536;
  /// Entries (rows and records of the differing buckets) held at once while they are compared;
  /// more are compared in further rounds, each reading both sides again. About 200 bytes each
  /// plus the id. Default 100000.
  std::size_t max_expanded_entries = 100'000;
  /// How long reconcile waits for the slot's confirmed_flush_lsn to pass the position of its
  /// snapshot of the source; past it, rows not yet in Kafka are `in_flight` breaks. Default 60 s.
  std::chrono::milliseconds in_flight_limit{60'000};
  /// Longest time reading a topic may go without a record while its end offsets are not reached
  /// (a broker outage): then reconcile stops with a read failure. Default 30 s.
  std::chrono::milliseconds read_timeout{30'000};
};

}  // namespace walrelay::config
