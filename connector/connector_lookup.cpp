// Catalog lookups ahead of routing: a change whose routing needs the catalog (a table seen for the
// first time, a shape to read again) waits for an asynchronous lookup instead of blocking the
// event loop, so delivery reports and standby status updates go on meanwhile (issue 10, "Event
// loop hygiene"). The order of changes is kept: the stream is paused at the waiting change. A
// snapshot signal naming tables whose shapes are not cached waits for their lookups the same way.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "walrelay/connector/connector.hpp"

namespace walrelay {

bool Connector::wait_for_lookup(const pg::XLogData& x, const decoder::Change& c) {
  if (!catalog_ || !router_) return false;
  auto need = router_->lookup_needed(c);
  if (!need || (!need->refresh && catalog_->cached(need->schema, need->table))) return false;
  park(x, {{need->schema, need->table}}, static_cast<std::uint32_t>(c.xid));
  return true;
}

bool Connector::wait_for_lookups(const pg::XLogData& x,
                                 const std::vector<std::pair<std::string, std::string>>& tables) {
  if (!catalog_) return false;
  std::vector<std::pair<std::string, std::string>> missing;
  for (const auto& t : tables) {
    if (!catalog_->cached(t.first, t.second) &&
        std::find(missing.begin(), missing.end(), t) == missing.end()) {
      missing.push_back(t);
    }
  }
  if (missing.empty()) return false;
  park(x, missing);
  return true;
}

void Connector::park(const pg::XLogData& x,
                     const std::vector<std::pair<std::string, std::string>>& tables,
                     std::uint32_t writer_xid) {
  parked_ = ParkedLine{x.data_start, x.wal_end, x.send_time, std::string(x.data)};
  stream_->pause();
  spdlog::debug("line at LSN {} waits for the catalog lookup of {}.{}{}", x.data_start.to_string(),
                tables.front().first, tables.front().second,
                tables.size() > 1 ? fmt::format(" and {} more", tables.size() - 1) : "");
  // Looked up in order on one connection; the line is processed again once every one completed.
  auto remaining = std::make_shared<std::size_t>(tables.size());
  for (const auto& [schema, table] : tables) {
    catalog_->prefetch(schema, table, writer_xid, [this, epoch = epoch_, remaining] {
      if (--*remaining == 0) on_lookup_done(epoch);
    });
  }
}

void Connector::on_lookup_done(std::uint64_t epoch) {
  if (epoch != epoch_ || !parked_) {
    if (!parked_) catalog_->end_prefetch();  // an ended session's lookup
    return;
  }
  ParkedLine line = std::move(*parked_);
  parked_.reset();
  if (!stopping_ && streaming_) {
    const pg::XLogData x{line.data_start, line.wal_end, line.send_time, line.data};
    replaying_parked_ = true;
    on_xlogdata(x);  // routed now from what the lookup put in the catalog's cache
    replaying_parked_ = false;
  }
  catalog_->end_prefetch();
  maybe_resume();
}

}  // namespace walrelay
