#pragma once

// `walrelay reconcile --repair` (docs/reconcile.md "Repair"): the outbox rows classified
// `missing` are published again, each with its own event id, as the very record the connector
// publishes for them (read again in the comparison's snapshot and built by the shared
// router::OutboxRecordBuilder: same topic, key, value, headers and payload digest), through the
// shared publish path (sink::Publisher over a kafka::Producer, as the polling relay publishes,
// relay/relay.cpp), and counted as repaired only once Kafka acknowledged them. Phantoms,
// conflicts and in_flight rows are never touched: they are reported only.

#include <string>
#include <vector>

#include "outbox_source.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/reconcile/report.hpp"

namespace walrelay::reconcile {

/// Publishes the events `ids` of table `t` again: reads their rows through `source` (in the
/// comparison's snapshot), publishes each record and waits for every delivery report (at most
/// the producer's message.timeout.ms, 30 s unless kafka.properties sets it, plus 5 s). Fills
/// `report.repaired` with the ids Kafka acknowledged and `report.repair_failed` with the others
/// and why (the row is gone or cannot be built, the producer cannot be created, Kafka refused or
/// did not acknowledge it). Blocking; called from the thread that owns `source`.
void repair_missing(const config::Config& cfg, OutboxSource& source, const OutboxTable& t,
                    const std::vector<std::string>& ids, TableReport& report);

}  // namespace walrelay::reconcile
