// libFuzzer target: the streaming-replication wire format (pg/include/walrelay/pg/wire.hpp) and LSN
// text.
//
// Bytes from the network go through parse_xlogdata and parse_keepalive; whatever parses is checked
// against an independent big-endian reading of the input, and its LSNs/clock are round-tripped
// through encode_status_update. The XLogData payload (or the whole input) is also parsed as LSN
// text (`X/X`), and a parsed LSN must print and re-parse to itself.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "walrelay/core/lsn.hpp"
#include "walrelay/pg/wire.hpp"

namespace {

using walrelay::Lsn;
namespace rep = walrelay::pg;

#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

std::uint64_t be64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void check_status_update(Lsn write, Lsn flush, Lsn apply, rep::PgEpochMicros now, bool reply) {
  std::array<char, rep::kStatusUpdateSize> out{};
  rep::encode_status_update(write, flush, apply, now, reply, out);
  FUZZ_CHECK(out[0] == 'r');
  FUZZ_CHECK(be64(out.data() + 1) == write.value());
  FUZZ_CHECK(be64(out.data() + 9) == flush.value());
  FUZZ_CHECK(be64(out.data() + 17) == apply.value());
  FUZZ_CHECK(static_cast<rep::PgEpochMicros>(be64(out.data() + 25)) == now);
  FUZZ_CHECK(out[33] == (reply ? 1 : 0));
}

void check_lsn_text(std::string_view text) {
  const auto lsn = Lsn::parse(text);
  if (!lsn) return;
  const std::string printed = lsn->to_string();
  FUZZ_CHECK(Lsn::parse(printed) == lsn);
  char buf[32];
  std::memset(buf, 0x7f, sizeof buf);
  const std::size_t n = lsn->format_to(buf);
  FUZZ_CHECK(n <= 17 && std::string_view(buf, n) == printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // An exact-size copy: ASan catches any read past the message.
  const std::unique_ptr<char[]> copy(new char[size]);
  if (size != 0) std::memcpy(copy.get(), data, size);
  const std::span<const char> msg(copy.get(), size);

  if (const auto x = rep::parse_xlogdata(msg)) {
    FUZZ_CHECK(size >= 25 && msg[0] == 'w');
    FUZZ_CHECK(x->data_start.value() == be64(msg.data() + 1));
    FUZZ_CHECK(x->wal_end.value() == be64(msg.data() + 9));
    FUZZ_CHECK(static_cast<std::uint64_t>(x->send_time) == be64(msg.data() + 17));
    FUZZ_CHECK(x->data.data() == msg.data() + 25 && x->data.size() == size - 25);
    check_status_update(x->data_start, x->wal_end, x->data_start, x->send_time, size % 2 == 0);
    check_lsn_text(x->data);
  } else {
    FUZZ_CHECK(size < 25 || msg[0] != 'w');
  }

  if (const auto k = rep::parse_keepalive(msg)) {
    FUZZ_CHECK(size == 18 && msg[0] == 'k');
    FUZZ_CHECK(k->wal_end.value() == be64(msg.data() + 1));
    FUZZ_CHECK(static_cast<std::uint64_t>(k->send_time) == be64(msg.data() + 9));
    FUZZ_CHECK(k->reply_requested == (msg[17] != 0));
    check_status_update(k->wal_end, k->wal_end, Lsn(), k->send_time, k->reply_requested);
  } else {
    FUZZ_CHECK(size != 18 || msg[0] != 'k');
  }

  check_lsn_text(std::string_view(msg.data(), msg.size()));
  return 0;
}
