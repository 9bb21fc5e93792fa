// What holds the primary's WAL (issue "Hostile databases" item 7): the slot's restart_lsn, not
// its confirmed position, decides which WAL the server keeps. An open transaction that began
// before the confirmed position pins restart_lsn (logical decoding must be able to decode it),
// so "lag 0 bytes" can hide gigabytes of retained WAL. Polled with the progress line on the
// catalog connection; the holder is named once, without its query text.
#include <spdlog/spdlog.h>

#include "walrelay/connector/connector.hpp"

namespace walrelay {

// The queries run on the catalog's non-blocking connection: the event loop never waits for them.
void Connector::poll_retained_wal() {
  if (!catalog_ || retained_poll_running_) return;
  retained_poll_running_ = true;
  catalog_->query_async(
      "SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), restart_lsn)::bigint, "
      "restart_lsn::text, "
      "pg_catalog.pg_wal_lsn_diff(confirmed_flush_lsn, restart_lsn)::bigint "
      "FROM pg_catalog.pg_replication_slots WHERE slot_name = " +
          pg::quote_literal(cfg_.source.slot),
      [this](const pg::AsyncConnection::Result& rows) {
        if (!rows || rows->empty() || !(*rows)[0][0]) {
          retained_poll_running_ = false;
          return;
        }
        const auto& r = (*rows)[0];
        retained_wal_bytes_ = std::stoll(*r[0]);
        restart_lsn_text_ = r[1].value_or("?");
        const long long behind_confirmed = r[2] ? std::stoll(*r[2]) : 0;
        // restart_lsn well behind the confirmed position: a transaction that was open at the
        // confirmed position holds it. Name the oldest such transaction once.
        constexpr long long kWorthNaming = 16LL * 1024 * 1024;  // one WAL segment
        if (behind_confirmed < kWorthNaming) {
          retained_poll_running_ = false;
          return;
        }
        name_wal_holder(behind_confirmed);
      });
}

void Connector::name_wal_holder(long long behind_confirmed) {
  catalog_->query_async(
      "SELECT pid::text, state, "
      "to_char(now() - xact_start, 'HH24:MI:SS'), xact_start::text, coalesce(backend_type, '') "
      "FROM pg_catalog.pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> "
      "pg_catalog.pg_backend_pid() ORDER BY xact_start LIMIT 1",
      [this, behind_confirmed](const pg::AsyncConnection::Result& holder) {
        if (holder && !holder->empty()) {
          retained_poll_running_ = false;
          const auto& h = (*holder)[0];
          const std::string id = h[0].value_or("") + "@" + h[3].value_or("");
          if (id != wal_holder_named_) {
            wal_holder_named_ = id;
            spdlog::warn(
                "{} bytes of WAL are retained from the slot's restart_lsn {} ({} bytes before its "
                "confirmed position): the oldest open transaction, pid {} ({}, state {}, open for "
                "{}), keeps logical decoding from moving restart_lsn until it ends",
                retained_wal_bytes_, restart_lsn_text_, behind_confirmed, h[0].value_or("?"),
                h[4].value_or(""), h[1].value_or("?"), h[2].value_or("?"));
          }
          return;
        }
        catalog_->query_async(
            "SELECT gid, to_char(now() - prepared, 'HH24:MI:SS') FROM "
            "pg_catalog.pg_prepared_xacts ORDER BY prepared LIMIT 1",
            [this](const pg::AsyncConnection::Result& prepared) {
              retained_poll_running_ = false;
              if (!prepared || prepared->empty()) return;
              const auto& p = (*prepared)[0];
              const std::string id = "prepared:" + p[0].value_or("");
              if (id != wal_holder_named_) {
                wal_holder_named_ = id;
                spdlog::warn(
                    "{} bytes of WAL are retained from the slot's restart_lsn {}: prepared "
                    "transaction '{}' (prepared {} ago) keeps logical decoding from moving "
                    "restart_lsn until it is committed or rolled back",
                    retained_wal_bytes_, restart_lsn_text_, p[0].value_or("?"), p[1].value_or("?"));
              }
            });
      });
}

}  // namespace walrelay
