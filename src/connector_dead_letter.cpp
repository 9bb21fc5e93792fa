// The error policy's dead-letter path (docs/operations.md "Error policy"): a change that cannot be
// decoded or mapped, or a record Kafka refuses, is published to errors.dead_letter_topic with the
// reason in headers, in place of the event, inside the same transaction (and, with delivery
// exactly_once, the same Kafka transaction).

#include <spdlog/spdlog.h>

#include "connector.hpp"

namespace walrelay {

bool Connector::handle_unmappable(const std::string& reason, std::string_view original,
                                  const decoder::Change* change, std::string_view source_hint) {
  if (cfg_.errors.policy != "dead_letter") {
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
  const bool ok = publish_dead_letter(*tracker_.open_txn(), "mapping", reason, source, std::nullopt,
                                      original, lsn, event_id);
  if (!ok) return false;
  ++dead_lettered_mapping_;
  if (standalone && change == nullptr) {
    tracker_.commit();
    eos_on_unit_end();
  }
  return true;
}

bool Connector::publish_dead_letter(std::uint64_t seq, std::string_view kind,
                                    const std::string& reason, std::string_view source,
                                    std::optional<std::string_view> key,
                                    std::optional<std::string_view> body, Lsn lsn,
                                    std::string_view event_id) {
  if (exactly_once() && eos_unit_in_kafka()) {
    // Replayed after a restart: this unit's dead-letter record is in Kafka already.
    return true;
  }
  dlq_header_values_.assign(
      {std::string(kind), reason, std::string(source), lsn.to_string(), std::string(event_id)});
  std::vector<Header> headers = {{"walrelay.error.kind", dlq_header_values_[0]},
                                 {"walrelay.error.reason", dlq_header_values_[1]},
                                 {"walrelay.source", dlq_header_values_[2]},
                                 {"walrelay.lsn", dlq_header_values_[3]}};
  if (!event_id.empty()) headers.push_back({"id", dlq_header_values_[4]});
  Record rec{cfg_.errors.dead_letter_topic, key, body, headers, 0};
  rd_kafka_resp_err_t err = publisher_.publish(sink::RecordSource::kStream, rec, opaque(seq, true));
  if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE && rec.value) {
    // The original itself is too large: a record with the headers and no body.
    rec.value = std::nullopt;
    err = publisher_.publish(sink::RecordSource::kStream, rec, opaque(seq, true));
  }
  // A mapping error's reason already names its LSN ("(xid …, LSN …)"): not twice.
  const std::string at = reason.find("LSN " + lsn.to_string()) == std::string::npos
                             ? " (LSN " + lsn.to_string() + ")"
                             : std::string();
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    spdlog::error(
        "{}{}; publishing it to the dead-letter topic {} failed too: {}; stopping "
        "without confirming past it",
        reason, at, cfg_.errors.dead_letter_topic, rd_kafka_err2str(err));
    finish(kind == "mapping" ? ExitCode::kMappingFailed : ExitCode::kDeliveryFailed);
    return false;
  }
  tracker_.add_event_to(seq, sink::record_bytes(rec));
  spdlog::warn("dead-lettered ({}) to {}: {}{}", kind, cfg_.errors.dead_letter_topic, reason, at);
  return true;
}

}  // namespace walrelay
