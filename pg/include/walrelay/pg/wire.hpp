#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "walrelay/core/lsn.hpp"

namespace walrelay::pg {

/// Microseconds since 2000-01-01 00:00:00 UTC: the clock the replication protocol uses
/// (PostgreSQL docs §55.4 "Streaming Replication Protocol", "the server's system clock at the
/// time of transmission, as microseconds since midnight on 2000-01-01").
using PgEpochMicros = std::int64_t;

/// Converts a Unix-epoch time in microseconds to the protocol's 2000-01-01 epoch.
constexpr PgEpochMicros unix_micros_to_pg(std::int64_t unix_us) {
  return unix_us - 946'684'800'000'000LL;
}

/// XLogData ('w'): a chunk of decoded output (one wal2json line per message in format 2).
struct XLogData {
  Lsn data_start;  ///< WAL start of the data (0/0 for logical messages from some paths)
  Lsn wal_end;     ///< current end of WAL on the server
  PgEpochMicros send_time = 0;
  std::string_view data;  ///< the plugin's output; a view into the caller's buffer
};

/// Primary keepalive ('k').
struct Keepalive {
  Lsn wal_end;  ///< current end of WAL on the server
  PgEpochMicros send_time = 0;
  bool reply_requested = false;  ///< the sender wants a status update at once
};

/// Parses an XLogData message (`w`, 3×Int64, bytes). Returns nullopt if `msg` does not start with
/// 'w' or is shorter than the 25-byte header. Bounds-checked: `msg` comes from the network.
std::optional<XLogData> parse_xlogdata(std::span<const char> msg);

/// Parses a primary keepalive (`k`, Int64 walEnd, Int64 sendTime, Byte1 replyRequested): exactly
/// 18 bytes. Returns nullopt for anything else.
std::optional<Keepalive> parse_keepalive(std::span<const char> msg);

/// Size in bytes of a standby status update.
inline constexpr std::size_t kStatusUpdateSize = 34;

/// Encodes a standby status update (`r`, Int64 write, Int64 flush, Int64 apply, Int64 clock,
/// Byte1 replyRequested) in network byte order into `out` (exactly 34 bytes).
/// `flush` is what the server may treat as durably consumed: it becomes the slot's
/// confirmed_flush_lsn.
void encode_status_update(Lsn write, Lsn flush, Lsn apply, PgEpochMicros now, bool reply_requested,
                          std::span<char, kStatusUpdateSize> out);

}  // namespace walrelay::pg
