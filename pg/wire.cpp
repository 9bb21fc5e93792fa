#include "walrelay/pg/wire.hpp"

namespace walrelay::pg {

namespace {

std::uint64_t read_be64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void write_be64(std::uint64_t v, char* p) {
  for (int i = 7; i >= 0; --i) {
    p[i] = static_cast<char>(v & 0xFF);
    v >>= 8;
  }
}

}  // namespace

std::optional<XLogData> parse_xlogdata(std::span<const char> msg) {
  constexpr std::size_t kHeader = 1 + 8 + 8 + 8;
  if (msg.size() < kHeader || msg[0] != 'w') return std::nullopt;
  XLogData x;
  x.data_start = Lsn(read_be64(msg.data() + 1));
  x.wal_end = Lsn(read_be64(msg.data() + 9));
  x.send_time = static_cast<PgEpochMicros>(read_be64(msg.data() + 17));
  x.data = std::string_view(msg.data() + kHeader, msg.size() - kHeader);
  return x;
}

std::optional<Keepalive> parse_keepalive(std::span<const char> msg) {
  if (msg.size() != 18 || msg[0] != 'k') return std::nullopt;
  Keepalive k;
  k.wal_end = Lsn(read_be64(msg.data() + 1));
  k.send_time = static_cast<PgEpochMicros>(read_be64(msg.data() + 9));
  k.reply_requested = msg[17] != 0;
  return k;
}

void encode_status_update(Lsn write, Lsn flush, Lsn apply, PgEpochMicros now, bool reply_requested,
                          std::span<char, kStatusUpdateSize> out) {
  out[0] = 'r';
  write_be64(write.value(), out.data() + 1);
  write_be64(flush.value(), out.data() + 9);
  write_be64(apply.value(), out.data() + 17);
  write_be64(static_cast<std::uint64_t>(now), out.data() + 25);
  out[33] = reply_requested ? 1 : 0;
}

}  // namespace walrelay::pg
