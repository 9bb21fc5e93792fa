// The error policy's dead-letter path (docs/operations.md "Error policy"): a change that cannot be
// decoded or mapped, or a record Kafka refuses, is published to errors.dead_letter_topic with the
// reason in headers, in place of the event, inside the same transaction (and, with delivery
// exactly_once, the same Kafka transaction).

#include <spdlog/spdlog.h>

#include "walrelay/connector/connector.hpp"

namespace walrelay {

bool Connector::handle_unmappable(const std::string& reason, std::string_view original,
                                  const decoder::Change* change, std::string_view source_hint) {
  if (!dead_letters_) {
    spdlog::error("{}; stopping without confirming past it (errors.policy=fail)", reason);
    finish(ExitCode::kMappingFailed);
    return false;
  }
  const bool standalone = !tracker_.open_txn().has_value();
  const Lsn lsn = change != nullptr ? change->lsn : received_lsn_;
  if (standalone) {
    tracker_.begin(lsn);
    eos_on_begin(lsn);
  }
  std::string source(source_hint);
  if (change != nullptr && !change->table.empty()) {
    source = std::string(change->schema) + "." + std::string(change->table);
  } else if (change != nullptr && change->action == decoder::Action::kMessage) {
    source = "message:" + std::string(change->prefix);
  }
  const std::string event_id =
      change != nullptr ? router_->outbox_event_id(*change).value_or("") : std::string();
  const bool ok = publish_dead_letter(
      *tracker_.open_txn(),
      {sink::DeadLetterKind::kMapping, reason, source, lsn, event_id, std::nullopt, original});
  if (!ok) return false;
  ++dead_lettered_mapping_;
  if (standalone && change == nullptr) {
    tracker_.commit();
    eos_on_unit_end();
  }
  return true;
}

bool Connector::publish_dead_letter(std::uint64_t seq, const sink::DeadLetter& dead_letter) {
  if (exactly_once() && eos_unit_in_kafka()) {
    // Replayed after a restart: this unit's dead-letter record is in Kafka already.
    return true;
  }
  const sink::DeadLetterWriter::Result r =
      dead_letters_->publish(sink::RecordSource::kStream, opaque(seq, true), dead_letter);
  if (!r.queued()) {
    spdlog::error(
        "{}{}; publishing it to the dead-letter topic {} failed too: {}; stopping "
        "without confirming past it",
        dead_letter.reason, sink::lsn_suffix(dead_letter.reason, dead_letter.lsn),
        dead_letters_->topic(), r.error);
    finish(dead_letter.kind == sink::DeadLetterKind::kMapping ? ExitCode::kMappingFailed
                                                              : ExitCode::kDeliveryFailed);
    return false;
  }
  tracker_.add_event_to(seq, r.bytes);
  return true;
}

}  // namespace walrelay
