#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/decoder/change.hpp"

namespace walrelay::router {

/// What the router knows about the transaction a change belongs to (from its B line).
struct TxnInfo {
  std::uint64_t xid = 0;
  Lsn commit_lsn;                 ///< `lsn` of the B/C lines: start of the commit record
  std::int64_t commit_ts_ms = 0;  ///< commit time, ms since the Unix epoch
  std::uint32_t position = 0;     ///< 0-based index of the change within the transaction
};

/// Why a change could not be turned into an event (the change is not skipped: the connector stops
/// or dead-letters it, and never confirms past it).
struct MappingError {
  std::string reason;
};

/// How the router treats one source table.
enum class TableRole : std::uint8_t { kIgnored, kRowChange, kOutbox };

/// Settings the router needs besides the tables.
struct RouterSettings {
  std::string connector_name;  ///< `name`; Debezium's source.name is the topic prefix instead
  std::string topic_prefix;    ///< topics.prefix
  std::string database;        ///< current_database() of the source, for source.db
  std::string version;         ///< walrelay version for source.version
};

/// Maps decoded changes to Kafka records (architecture: EventRouter).
///
/// - Row-change tables: one record per INSERT/UPDATE/DELETE on `<prefix>.<schema>.<table>`, key =
///   the primary key columns as a compact JSON object in column order (`{"id":1}`), value = a
///   Debezium-style envelope `{"before":…,"after":…,"source":{…},"op":"c|u|d","ts_ms":…}`, and
///   header `id` = `<commit lsn>:<position>` (deterministic across replays of the same WAL).
/// - Outbox tables (Debezium outbox event router): each INSERT → one record on the topic template
///   with `{aggregate_type}` replaced by the route-by value, key = the aggregate id text, value =
///   the payload (a json/jsonb payload as the JSON document itself, not a string of JSON), header
///   `id` = the event id. UPDATE and DELETE of an outbox table produce nothing.
/// - TRUNCATE and logical messages produce nothing yet.
///
/// Output records and their bytes live in the router and are valid until the next `route` call.
/// Owned by the connector's io_context thread; not thread-safe.
class EventRouter {
 public:
  EventRouter(RouterSettings settings, std::vector<config::TableConfig> tables);

  /// Routes one I/U/D/T/M change. Returns the records to publish (possibly none), or a
  /// MappingError naming the table and column when the change cannot be mapped (e.g. an outbox row
  /// without its aggregate id, or a payload that is not JSON).
  std::expected<std::span<const Record>, MappingError> route(const decoder::Change& change,
                                                             const TxnInfo& txn);

  /// The role of `schema.table` under the configured rules (first matching entry wins).
  TableRole role_of(std::string_view schema, std::string_view table);

  /// The topic row changes of `schema.table` go to (`<prefix>.<schema>.<table>`, with characters
  /// Kafka does not allow replaced by `_`).
  std::string row_topic(std::string_view schema, std::string_view table) const;

 private:
  struct Rule {
    TableRole role = TableRole::kIgnored;
    std::string topic;                             // row-change topic
    const config::OutboxConfig* outbox = nullptr;  // for kOutbox
  };
  const Rule& rule_for(std::string_view schema, std::string_view table);
  std::expected<std::span<const Record>, MappingError> route_row(const decoder::Change& c,
                                                                 const TxnInfo& txn,
                                                                 const Rule& rule);
  std::expected<std::span<const Record>, MappingError> route_outbox(const decoder::Change& c,
                                                                    const Rule& rule);

  RouterSettings settings_;
  std::vector<config::TableConfig> tables_;
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Rule, StringHash, std::equal_to<>> rules_;
  std::string lookup_;  // reused "schema\0table" lookup key

  // Reused output buffers (no per-event allocation once warm).
  std::string key_;
  std::string value_;
  std::string topic_;
  std::string id_;
  std::string scratch_;
  std::array<Header, 4> headers_{};
  std::array<Record, 2> records_{};
};

/// Parses wal2json's commit timestamp (`2026-11-30 00:14:37.104367+00`, DateStyle ISO; the
/// offset may be `+05:30`) to ms since the Unix epoch. Returns nullopt for any other shape.
std::optional<std::int64_t> parse_commit_timestamp_ms(std::string_view text);

}  // namespace walrelay::router
