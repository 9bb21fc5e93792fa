#pragma once

// Classifies the entries of expanded buckets (buckets.hpp) into breaks: what the source holds
// and what the topic holds for the same event ids. Pure: no I/O.
//
// Per event id, with S the source's entries and K the topic's:
//   S, no K                      -> missing (kInFlight instead while the pipeline has not been
//                                   seen to pass the source's snapshot: `delivered` false)
//   K, no S                      -> phantom (a candidate: the caller drops those whose row was
//                                   committed after the snapshot, see resolve_phantoms)
//   S and K, some digest differs -> conflict (same id, other payload)
//   S and n > 1 K, same digests  -> n - 1 duplicates: expected under at-least-once delivery
//                                   (docs/delivery.md), counted, not a break

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace walrelay::reconcile {

/// The classes of a break (and `kDuplicate`, counted but not a break). to_string gives the name
/// the report and the metrics use.
enum class BreakClass : std::uint8_t {
  kMissing,    ///< in the source, not in Kafka
  kPhantom,    ///< in Kafka, not in the source
  kConflict,   ///< same id, another payload digest
  kInFlight,   ///< in the source, not yet in Kafka, and the pipeline did not pass it in time
  kDuplicate,  ///< same id, same digest, more than once in Kafka: not a break
  /// `source.mode: poll` only: a row the polling relay marked failed (docs/relay.md "Failures"),
  /// reported with its attempts and last_error
  kFailed,
  /// `--inbox` (inbox_check.hpp): a record below the inbox's stored position the inbox never
  /// decided
  kNotInInbox,
  kPhantomInInbox,  ///< `--inbox`: a ledger row whose id no record and no outbox row has
  kQuarantined,     ///< `--inbox`: a row of the inbox's quarantine
  kDeferred,        ///< `--inbox`: a row of the inbox's deferred events
};
/// The classes that are breaks, in the order the report and the metrics list them.
inline constexpr BreakClass kBreakClasses[] = {
    BreakClass::kMissing,        BreakClass::kPhantom,     BreakClass::kConflict,
    BreakClass::kInFlight,       BreakClass::kFailed,      BreakClass::kNotInInbox,
    BreakClass::kPhantomInInbox, BreakClass::kQuarantined, BreakClass::kDeferred};
std::string_view to_string(BreakClass value);

/// One event as one side holds it.
struct Entry {
  std::string id;      ///< the event id (header `id` / the event_id column's text)
  std::string digest;  ///< lower-case hex SHA-256 of the value (payload_digest), "" = tombstone
  /// When the event happened, ms since the epoch (the row's timestamp column, the record's
  /// timestamp); -1 when unknown.
  std::int64_t timestamp_ms = -1;
  /// Where it is, for the report: "topic/partition@offset" for a record, "" for a row.
  std::string where;
};

/// One break found.
struct Break {
  BreakClass cls = BreakClass::kMissing;
  std::string id;
  /// When the event happened (Entry::timestamp_ms, the oldest of its entries); -1 unknown. The
  /// break's age is measured from it unless an earlier run saw it first.
  std::int64_t since_ms = -1;
  std::string detail;  ///< e.g. "source digest 3f2a…, kafka digest 9b1c… at t/0@17"
  /// When the break was first seen (ms since the epoch): the earlier of `since_ms` and the first
  /// run that reported it, kept across runs in the break-age file (break_ages.hpp); -1 before
  /// apply_break_ages. The break's age is measured from it.
  std::int64_t first_seen_ms = -1;
};

/// What classify_bucket found. Accumulates over buckets.
struct Classification {
  std::vector<Break> breaks;
  std::uint64_t duplicates = 0;            ///< extra copies (n - 1 per id)
  std::vector<std::string> duplicate_ids;  ///< the ids with copies, at most kMaxExamples
  static constexpr std::size_t kMaxExamples = 5;
};

/// Classifies one bucket's entries (both vectors are sorted by id here). `delivered`: the
/// pipeline passed the source's snapshot position (so a missing event is a break, not lag).
void classify_bucket(std::vector<Entry>& source, std::vector<Entry>& kafka, bool delivered,
                     Classification& out);

/// The phantom ids of `c`, for the caller to look up in the table as it is now.
std::vector<std::string> phantom_ids(const Classification& c);

/// Drops the phantoms whose id is in `present_now` (rows that exist in the table now but were not
/// in the snapshot: committed after it, so their records are newer than the comparison, not
/// breaks). Returns how many were dropped.
std::uint64_t resolve_phantoms(Classification& c,
                               const std::unordered_set<std::string>& present_now);

}  // namespace walrelay::reconcile
