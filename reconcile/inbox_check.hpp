#pragma once

// `walrelay reconcile --inbox` (docs/reconcile.md "Inbox"): the records of the outbox tables'
// topics that the configuration's inbox consumes (`inbox.topics`) against the inbox's ledger in
// its own database (`inbox.conninfo`, tables of `inbox.schema`: inbox/schema.cpp). Matched by
// event id (the `id` header, the inbox's default `inbox.event_id`).
//
// Classes (classify.hpp), each added to the report of the outbox table whose topic it is of:
//   not_in_inbox      a record at an offset the inbox's stored position of its partition
//                     (`offsets.next_offset` of `inbox.group_id`) has passed, whose id neither the
//                     ledger nor the quarantine has; a record at or past the position is the
//                     consumer's lag, counted (TableReport::inbox_in_flight), not a break
//   phantom_in_inbox  a ledger row of such a topic whose id no record read and no outbox row has
//   quarantined       a `quarantine` row (its reason as detail, its age from quarantined_at)
//   deferred          a `deferred` row (version and the version it waits for, age from
//                     deferred_at)
//
// Memory: the ledger's ids of those topics (and their quarantine and deferred rows) are held in
// a hash map, about 100 bytes plus the id each: not bucketed as the outbox comparison is.

#include <atomic>
#include <expected>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "run_once.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/reconcile/report.hpp"

namespace walrelay::reconcile {

/// The ids of `ids` that an outbox table of the comparison holds now (phantom_in_inbox's check).
using PresentInSource = std::function<std::expected<std::unordered_set<std::string>, Failure>(
    const std::vector<std::string>& ids)>;

/// Adds the inbox's breaks to `report` (its tables' `topics` say which topic is whose). Reads
/// `cfg.inbox` (present: the caller checked). Errors: the inbox's database (kReadFailed, or
/// kConfigError for a conninfo that cannot be parsed, naming `inbox.conninfo`), Kafka (kReadFailed
/// or kKafkaAuthFailed), or `cancel` set (a cancelled Failure).
std::expected<void, Failure> compare_inbox(const config::Config& cfg, Report& report,
                                           const PresentInSource& present_in_source,
                                           const std::atomic<bool>& cancel);

}  // namespace walrelay::reconcile
