#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "walrelay/core/headers.hpp"

namespace walrelay::config {

/// Where the inbox reads one field of a consumed record (`inbox.tenant`, `event_id`, `digest`,
/// `aggregate`, `version`): the spelling in the file is the comment of each value.
enum class InboxFieldSource {
  kNone,    ///< ""        no such field (tenant: one tenant ""; version: no ordering check)
  kHeader,  ///< header:NAME  the last header NAME (KIP-82), its bytes as text
  kKey,     ///< key       the record key's bytes as text
  kJson,    ///< json:/p   the value at JSON pointer /p (RFC 6901) of the payload (the value)
  kValue,   ///< value     digest only: router::payload_digest of the record value
};

/// One field's source: `source`, and `name` (the header's name, or the JSON pointer).
struct InboxField {
  InboxFieldSource source = InboxFieldSource::kNone;
  std::string name;
  bool operator==(const InboxField&) const = default;
};

/// `inbox.handlers[]`: SQL run in the decision's transaction for each APPLIED event of `topic`
/// whose `eventType` header is `event_type` ("" = any). Parameters: $1 the payload (value as
/// text), $2 the event id, $3 the record key (text, NULL for a null key), $4 the headers as a
/// JSON object (text; cast with `$4::jsonb`).
struct InboxHandler {
  std::string topic;
  std::string event_type;
  std::string sql;
};

/// `inbox:` (docs/inbox.md): `walrelay inbox`, Kafka into PostgreSQL with every event decided
/// once (APPLIED, DUPLICATE, DEFERRED, QUARANTINED) in the transaction of its effect.
struct InboxConfig {
  bool present = false;  ///< the file has an `inbox:` section
  /// libpq conninfo of the consumer's database (required).
  std::string conninfo;
  /// Kafka consumer group (required); partitions are shared by the processes of one group.
  std::string group_id;
  /// Topic names, or `^regex` patterns (librdkafka's subscription syntax); at least one.
  std::vector<std::string> topics;
  InboxField tenant{InboxFieldSource::kNone, ""};
  InboxField event_id{InboxFieldSource::kHeader, header::kId};
  /// Default: the `payload_digest` header, and router::record_digest of the value when it is
  /// absent (a row change's row values, any other value's bytes).
  InboxField digest{InboxFieldSource::kHeader, header::kPayloadDigest};
  InboxField aggregate{InboxFieldSource::kKey, ""};
  InboxField version{InboxFieldSource::kNone, ""};
  /// PostgreSQL schema of walrelay's tables (ledger, offsets, deferred, quarantine, events,
  /// audit). A plain identifier: [a-z_][a-z0-9_]*, at most 63 bytes.
  std::string schema = "walrelay";
  std::vector<InboxHandler> handlers;
  std::size_t batch_max_events = 500;            ///< events per PostgreSQL transaction, 1..100000
  std::chrono::milliseconds batch_max_wait{20};  ///< longest a batch waits to fill
  /// Ledger rows are kept at least this long (days: `30d`); at least defer_timeout.
  std::chrono::milliseconds retention{std::chrono::hours(24 * 30)};
  /// A version gap older than this is QUARANTINED (reason `defer_timeout`).
  std::chrono::milliseconds defer_timeout{std::chrono::hours(1)};
};

/// `""`, `header:NAME`, `key`, `json:/p`, `value`: the spelling of a field's source in the file.
std::string to_string(const InboxField& field);

}  // namespace walrelay::config
