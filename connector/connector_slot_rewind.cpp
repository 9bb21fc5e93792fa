// A slot that moved back: PostgreSQL keeps a logical slot's confirmed_flush_lsn
// in memory and writes it to disk only at a checkpoint (or when restart_lsn moves), so a restart
// without one (a crash, `pg_ctl stop -m immediate`) brings the slot back to an older position
// than walrelay confirmed. Nothing is lost (the WAL in between is decoded again), but its changes
// reach Kafka a second time: said once, with how far back, and counted on /metrics.
#include <spdlog/spdlog.h>

#include "walrelay/connector/connector.hpp"

namespace walrelay {

void Connector::note_slot_rewind(Lsn slot_confirmed) {
  // The record must be of this slot's stream: the same cluster, and not a slot it replaced.
  if (!record_ || record_->reset_used || record_->system_id != system_.system_id) return;
  const Lsn told = record_->confirmed;
  if (told <= slot_confirmed) return;
  // A later session of the same move back (the replay is not yet past it): said once.
  if (rewind_reported_ == told && slot_confirmed >= rewind_reported_from_) return;
  const std::uint64_t bytes = told.value() - slot_confirmed.value();
  rewind_reported_ = told;
  rewind_reported_from_ = slot_confirmed;
  ++slot_rewinds_;
  slot_rewind_bytes_ += bytes;
  spdlog::warn(
      "slot {} moved back: its confirmed_flush_lsn {} is {} bytes behind {}, the position "
      "walrelay confirmed to the server (slot record {}). The server did not keep that "
      "confirmation (PostgreSQL keeps a slot's position only as of its last checkpoint: it was "
      "restarted without one, or the last status update did not reach it). Those {} bytes of WAL "
      "are decoded again: {}",
      cfg_.source.slot, slot_confirmed.to_string(), bytes, told.to_string(), state_.path(), bytes,
      exactly_once() ? "what Kafka's last committed position has is skipped (delivery exactly_once)"
                     : "their changes are published again, with the same ids (at least once)");
}

}  // namespace walrelay
