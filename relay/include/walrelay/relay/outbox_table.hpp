#pragma once

// One outbox table the relay drains, as found in the catalog at start-up (relay/preflight.cpp),
// and the SQL the relay runs on it (relay/claim_sql.cpp, docs/relay.md "The claim").

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "walrelay/config/config.hpp"

namespace walrelay::relay {

struct OutboxTable {
  std::size_t config_index = 0;  ///< its `tables[i]` entry
  std::string schema;
  std::string table;
  const config::OutboxConfig* outbox = nullptr;    ///< the entry's outbox (poll set)
  const config::OutboxPollConfig* poll = nullptr;  ///< `outbox->poll`
  /// The columns the record builder reads (event id, aggregate id and type, payload, then the
  /// optional event type, timestamp and additional columns the table has), with their type OIDs
  /// (pg_attribute.atttypid). Filled by the preflight.
  std::vector<std::pair<std::string, std::uint32_t>> columns;
  std::size_t key_column = 0;  ///< index in `columns` of the aggregate id
  /// The column a pending row's age is read from (`outbox.timestamp` when configured, else
  /// `poll.order_by` when it is a timestamp or date); "" = none (no ages). Filled by the preflight.
  std::string age_column;

  /// `schema.table` as written in logs and messages.
  [[nodiscard]] std::string name() const { return schema + "." + table; }
  /// `"schema"."table"`, quoted for SQL.
  [[nodiscard]] std::string quoted() const;
};

/// The claim statement (one extended-protocol statement; run in READ COMMITTED inside the
/// claim transaction): `$1` the pending status, `$2` the failed status (only when
/// `failed_blocks_key`: the statement has no `$2` otherwise). It locks up to
/// `batch` pending rows in (`order_by`, `event_id`) order with FOR UPDATE SKIP LOCKED (rows of a
/// key behind a failed row are left out when `failed_blocks_key`), then returns only the locked
/// rows no older row of the same aggregate id is still pending (or failed, when it blocks) outside
/// the locked set: the rows this instance may publish without overtaking a row another instance
/// holds (PostgreSQL docs "The Locking Clause" and §13.2.1 "Read Committed Isolation Level": the
/// statement's one snapshot serves both parts). Result columns: 0 the row's ctid, 1 its attempts,
/// then `t.columns` in order; rows in (`order_by`, `event_id`) order.
std::string claim_sql(const OutboxTable& t, std::size_t batch, bool failed_blocks_key);

/// `relay.claim: lease`'s claim (docs/relay.md "The lease variant"), one statement run on its
/// own (its own short transaction): `$1` pending, `$2` retry_wait, `$3` claimed, `$4` the owner
/// token, `$5` the lease in milliseconds, `$6` failed (only when `failed_blocks_key`: the statement
/// has no `$6` otherwise). It locks up to `batch` rows that are pending, retry_wait, or claimed
/// with a lease that has passed, with FOR UPDATE SKIP LOCKED in (`order_by`, `event_id`) order,
/// keeps those no older row of their key outside the locked set holds back (pending, retry_wait,
/// claimed whatever its lease, failed when it blocks), and sets them claimed, owned by `$4` until
/// now() + `$5`. Result columns as claim_sql's, column 0 the ctid of the row as updated.
std::string lease_claim_sql(const OutboxTable& t, std::size_t batch, bool failed_blocks_key);

/// The lease variant's marks touch only rows `owner` = the token and `status` = claimed (a row
/// whose lease passed and another instance claimed is left alone); each returns one row per row
/// changed. Sent: `$1` sent, `$2` a tid[] literal, `$3` the token, `$4` claimed; sets sent_at and
/// clears owner and lease_until.
std::string lease_mark_sent_sql(const OutboxTable& t);

/// One row's failure under a lease: attempts + `$1` (0 or 1), status `$2` (retry_wait or failed),
/// `$3` its ctid, `$4` the token, `$5` claimed, `$6` the reason (only with last_error configured);
/// clears owner and lease_until.
std::string lease_mark_failure_sql(const OutboxTable& t);

/// Gives claimed rows back without counting an attempt: status `$1` (pending), `$2` a tid[]
/// literal, `$3` the token, `$4` claimed; clears owner and lease_until.
std::string lease_release_sql(const OutboxTable& t);

/// Marks rows sent: `$1` the sent status, `$2` a tid[] literal of the rows (their ctid, stable
/// while the claim transaction holds their locks).
std::string mark_sent_sql(const OutboxTable& t);

/// One row's publish failure: attempts + `$1` (0 or 1), status `$2` (pending, or failed), `$3`
/// the row's ctid, and `$4` the reason into last_error (only when that column is configured: the
/// statement has no `$4` otherwise).
std::string mark_failure_sql(const OutboxTable& t);

/// The backlog per aggregate type (docs/relay.md "Status"), with backlog_params(t): `$1` the
/// pending status, `$2` the failed one, and under `claim: lease` `$3` retry_wait and `$4` claimed.
/// One row per aggregate type (its text; NULL for a NULL type) with a row not sent: type, rows
/// waiting to be claimed (pending, and retry_wait under a lease), failed rows, the oldest unsent
/// row's age in whole seconds (NULL without `age_column` or without such rows), claimed rows
/// (0 without a lease). Reads only rows not sent (the partial index on `status <> sent` serves it).
std::string backlog_sql(const OutboxTable& t);
/// The parameters of backlog_sql(t).
std::vector<std::optional<std::string>> backlog_params(const OutboxTable& t);

/// The oldest `limit` failed rows (`$1` the failed status): event id, aggregate type, aggregate
/// id, attempts, last_error (NULL when not configured), age in whole seconds (NULL without
/// `age_column`).
std::string failed_rows_sql(const OutboxTable& t, std::size_t limit);

/// The retention job's statement (docs/relay.md "Retention"): deletes at most `limit` rows whose
/// status is `$1` (the sent status) and whose sent_at is older than `$2` milliseconds; returns one
/// row, the number deleted. The status and age are checked again on the row deleted, so a row
/// another session set back to pending meanwhile is not.
std::string retention_sql(const OutboxTable& t, std::size_t limit);

/// `walrelay outbox retry`'s lock of the rows it changes (in its transaction): the failed rows
/// (`$1` the failed status), all of them, or with `by_id` those whose event id's text is in `$2`
/// (a text[] literal). Columns: ctid, event id, attempts, last_error (NULL when not configured).
std::string lock_failed_sql(const OutboxTable& t, bool by_id);

/// Puts rows back: status `$1` (pending), attempts 0, last_error NULL (when configured), for the
/// ctids of `$2` (a tid[] literal). Never touches another column.
std::string retry_sql(const OutboxTable& t);

/// The event id and status (as text) of the rows whose event id's text is in `$1` (text[]).
std::string status_of_ids_sql(const OutboxTable& t);

/// `{"a","b"}`: a text[] literal of the given strings (quotes and backslashes escaped).
std::string text_array(const std::vector<std::string>& items);

/// `{"(0,1)","(0,2)"}`: a tid[] literal of ctids as PostgreSQL prints them.
std::string tid_array(const std::vector<std::string>& tids);

}  // namespace walrelay::relay
