// Catalog lookups ahead of routing: a change whose routing needs the catalog (a table seen for the
// first time, a shape to read again) waits for an asynchronous lookup instead of blocking the
// event loop, so delivery reports and standby status updates go on meanwhile (issue 10, "Event
// loop hygiene"). The order of changes is kept: the stream is paused at the waiting change.
#include <spdlog/spdlog.h>

#include "connector.hpp"

namespace walrelay {

bool Connector::wait_for_lookup(const replication::XLogData& x, const decoder::Change& c) {
  if (!catalog_ || !router_) return false;
  auto need = router_->lookup_needed(c);
  if (!need || (!need->refresh && catalog_->cached(need->schema, need->table))) return false;
  parked_ = ParkedLine{x.data_start, x.wal_end, x.send_time, std::string(x.data)};
  stream_->pause();
  spdlog::debug("change at LSN {} waits for the catalog lookup of {}.{}", c.lsn.to_string(),
                need->schema, need->table);
  catalog_->prefetch(need->schema, need->table, [this, epoch = epoch_] { on_lookup_done(epoch); });
  return true;
}

void Connector::on_lookup_done(std::uint64_t epoch) {
  if (epoch != epoch_ || !parked_) {
    if (!parked_) catalog_->end_prefetch();  // an ended session's lookup
    return;
  }
  ParkedLine line = std::move(*parked_);
  parked_.reset();
  if (!stopping_ && streaming_) {
    const replication::XLogData x{line.data_start, line.wal_end, line.send_time, line.data};
    replaying_parked_ = true;
    on_xlogdata(x);  // routed now from what the lookup put in the catalog's cache
    replaying_parked_ = false;
  }
  catalog_->end_prefetch();
  maybe_resume();
}

}  // namespace walrelay
