#include "walrelay/pg/notices.hpp"

#include <spdlog/spdlog.h>

#include <string_view>

namespace walrelay::pg {

std::string fit_application_name(std::string name) {
  if (name.size() <= 63) return name;
  std::size_t cut = 63;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  name.resize(cut);
  return name;
}

void route_notices_to_log(PGconn* conn) {
  if (conn == nullptr) return;
  PQsetNoticeProcessor(
      conn,
      [](void*, const char* message) {
        std::string_view m(message);
        while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.remove_suffix(1);
        spdlog::warn("postgres: {}", m);
      },
      nullptr);
}

}  // namespace walrelay::pg
