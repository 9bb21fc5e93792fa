#pragma once

// The configuration of the polling outbox relay (`source.mode: poll`, docs/relay.md): the
// `relay:` section and the columns polling needs (`tables[].outbox.poll`). Plain data with
// defaults; the loader (config/relay_section.cpp) fills and checks them.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace walrelay::config {

/// `source.mode`: where the events come from.
enum class SourceMode : std::uint8_t {
  kLogical,  ///< logical: the replication slot (wal2json), every table kind (default)
  kPoll,     ///< poll: outbox tables read with SELECT ... FOR UPDATE SKIP LOCKED (docs/relay.md)
};

/// `relay.claim`: how a relay instance claims rows.
enum class RelayClaim : std::uint8_t {
  /// transaction: claim, publish, wait for Kafka, mark sent and COMMIT in one PostgreSQL
  /// transaction (the row locks are the claim).
  kTransaction,
  /// lease: a short transaction sets the rows claimed with this process's owner token and a
  /// lease; they are published with no transaction open and marked in a second short one, only
  /// where the token still owns them (docs/relay.md "The lease variant").
  kLease,
};

std::string_view to_string(SourceMode value);
std::string_view to_string(RelayClaim value);

/// `relay:` (only read by `source.mode: poll`). Every key is optional.
struct RelayConfig {
  RelayClaim claim = RelayClaim::kTransaction;
  /// Rows claimed per tick (per table), 1..10000. Default 200 (the seed article's figure).
  std::size_t batch = 200;
  /// Backstop poll when no notification arrives. Default 200 ms.
  std::chrono::milliseconds poll_interval{200};
  /// LISTEN channel (a PostgreSQL identifier, at most 63 bytes); "" = poll only. Default
  /// `walrelay_outbox`.
  std::string notify_channel = "walrelay_outbox";
  /// Per-row publish failures (batches where other rows were acknowledged) before the row is
  /// `failed`. 1..1000, default 8.
  std::size_t max_attempts = 8;
  /// Whole-tick back-off while Kafka is unavailable (no record of a batch acknowledged): starts at
  /// `backoff_min`, doubles up to `backoff_max`. Defaults 500 ms and 30 s.
  std::chrono::milliseconds backoff_min{500};
  std::chrono::milliseconds backoff_max{30'000};
  /// Longest wait for Kafka's acknowledgements of a claimed batch; past it the claim transaction
  /// is rolled back (locks and the xmin horizon released) and the tick backs off. Also the relay
  /// producer's message.timeout.ms unless kafka.properties sets it. Default 30 s.
  std::chrono::milliseconds ack_timeout{30'000};
  /// A `failed` row blocks the later rows of its key (order over liveness, default true); false:
  /// they flow past it.
  bool failed_blocks_key = true;
  /// `claim: lease` only: how long a claim holds its rows; a claimed row whose lease passed may be
  /// claimed by any instance. Must be longer than `ack_timeout`. Default 30 s.
  std::chrono::milliseconds lease{30'000};
  /// Delete `sent` rows older than this (their `sent_at`; 0 = keep, the default): the relay's
  /// retention job, in batches of at most 1,000 rows per table (docs/relay.md "Retention").
  std::chrono::milliseconds retention{0};
  /// PostgreSQL schema of walrelay's own tables (`audit`, written by `walrelay outbox retry`;
  /// the inbox's `inbox.schema` default is the same). A plain identifier: [a-z_][a-z0-9_]*, at
  /// most 63 bytes. Created when first needed.
  std::string schema = "walrelay";
};

/// `tables[].outbox.poll`: the columns (and status values) polling reads and writes, besides the
/// outbox's own columns.
struct OutboxPollConfig {
  std::string status = "status";        ///< text column holding one of the statuses below
  std::string attempts = "attempts";    ///< integer column: per-row publish failures
  std::string sent_at = "sent_at";      ///< timestamptz column set to now() when marked sent
  std::string order_by = "created_at";  ///< per-key order (a timestamp, a sequence, bigserial)
  std::string pending = "pending";      ///< statuses.pending
  std::string sent = "sent";            ///< statuses.sent
  std::string failed = "failed";        ///< statuses.failed
  /// Optional text column for the reason a row failed ("" = none).
  std::string last_error;
  // `relay.claim: lease` only. Empty unless it is configured; the loader then fills the
  // defaults (and refuses them with `claim: transaction`).
  std::string owner;        ///< text or uuid column: the claiming process's token (`claimed_by`)
  std::string lease_until;  ///< timestamptz column: the claim's end (`lease_until`)
  std::string claimed;      ///< statuses.claimed (`claimed`)
  std::string retry_wait;   ///< statuses.retry_wait: failed once, claimable again (`retry_wait`)
};

}  // namespace walrelay::config
