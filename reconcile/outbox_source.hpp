#pragma once

// One outbox table read the way walrelay publishes its rows: each row's configured columns (their
// text from a session with the pinned settings, pg_session.hpp) become wal2json tokens
// (decoder::append_wal2json_value, as the snapshot does for its rows) and then the event's record
// through the shared router::OutboxRecordBuilder; the event id is the record's `id` header and the
// digest router::payload_digest of its value, so both sides' bytes come from the same code.

#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pg_session.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/router/outbox_record.hpp"
#include "walrelay/router/type_registry.hpp"

namespace walrelay::reconcile {

/// An outbox table of the configuration, found in the catalog.
struct OutboxTable {
  std::string schema;
  std::string table;
  std::size_t config_index = 0;  ///< its `tables[i]` entry
  const config::OutboxConfig* outbox = nullptr;
  /// The configured columns the table has, with their type OIDs (pg_attribute.atttypid).
  std::vector<std::pair<std::string, std::uint32_t>> columns;
  /// `source.mode: poll` (then outbox->poll is set, config/relay_section.cpp): rows are told
  /// apart by their status (SourceEvent::status).
  bool poll = false;
  /// Poll mode: the SQL expression of the row's time in ms since the
  /// epoch (the timestamp column, else order_by, when it is a timestamp or date; else NULL), for
  /// the age of a row not yet sent.
  std::string poll_time_ms_sql;
  [[nodiscard]] std::string name() const { return schema + "." + table; }
  [[nodiscard]] std::string quoted() const;
};

/// A row's `poll.status` (docs/relay.md): only `kSent` rows must be in Kafka.
enum class RowStatus : std::uint8_t {
  kSent,     ///< statuses.sent (and every row in logical mode)
  kPending,  ///< statuses.pending: the relay has not published it yet
  kFailed,   ///< statuses.failed: the relay gave up on it
  kOther,    ///< a value the configuration does not name: treated as not yet sent
};

/// One row as its event: id, topic, digest ("" for a tombstone), timestamp (ms, -1 when the
/// outbox has no timestamp column or it is NULL).
struct SourceEvent {
  std::string_view id;
  std::string_view topic;
  std::string_view digest;
  std::int64_t timestamp_ms = -1;
  /// The record the connector would publish for the row (the builder's buffer: valid during the
  /// visit only), for `--repair` to publish again.
  router::RecordBuffer* record = nullptr;
  /// Poll mode: the row's status. A row not kSent is not built (`record` null, `digest` empty,
  /// `topic` empty: the builder may refuse what the relay failed on); its `id` is the event id
  /// column's text and `timestamp_ms` the row's time (OutboxTable::poll_time_ms_sql).
  RowStatus status = RowStatus::kSent;
  std::int64_t attempts = 0;     ///< poll mode: `poll.attempts`
  std::string_view status_text;  ///< poll mode: the status as stored
  std::string_view last_error;   ///< poll mode: `poll.last_error` ("" when not configured)
};

/// Reads outbox rows. Owned by one thread; uses `session` (in its snapshot transaction).
class OutboxSource {
 public:
  OutboxSource(PgSession& session, router::TypeRegistry& types)
      : session_(session), types_(types) {}

  /// Looks up `t`'s configured columns and their types (domains too, so a domain over jsonb is
  /// read as jsonb), and in poll mode the `poll` columns. Error: the server's, or "has no column
  /// <c>" for a required column.
  std::expected<void, std::string> describe(OutboxTable& t);

  /// Streams every row of `t` (a cursor fetching `batch` rows at a time, so memory does not grow
  /// with the table) to `visit`. Rows the builder refuses (what walrelay would dead-letter or fail
  /// on) are counted in `unmappable` and skipped; the first reason is kept in `first_error`.
  /// `only_ids` non-null: only the rows whose event id's text is one of them.
  std::expected<void, pg::Error> read(const OutboxTable& t,
                                      const std::function<void(const SourceEvent&)>& visit,
                                      std::uint64_t& unmappable, std::string& first_error,
                                      std::size_t batch = 2000,
                                      const std::vector<std::string>* only_ids = nullptr);

 private:
  PgSession& session_;
  router::TypeRegistry& types_;
  router::OutboxRecordBuilder builder_{types_};
  router::RecordBuffer buffer_;
  std::string tokens_;
  std::string digest_;
};

}  // namespace walrelay::reconcile
