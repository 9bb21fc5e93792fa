#include "walrelay/app/json_log_formatter.hpp"

#include <spdlog/common.h>

#include <chrono>
#include <ctime>
#include <string>

#include "walrelay/core/json.hpp"

namespace walrelay {

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const auto t = std::chrono::system_clock::to_time_t(msg.time);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[40];
  const std::size_t n = std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = "{\"ts\":\"";
  line.append(ts, n);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%03dZ", static_cast<int>(ms.count()));
  line += frac;
  line += "\",\"level\":";
  const auto level = spdlog::level::to_string_view(msg.level);
  json::append_string(line, std::string_view(level.data(), level.size()));
  line += ",\"msg\":";
  json::append_string(line, std::string_view(msg.payload.data(), msg.payload.size()));
  line += "}\n";
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace walrelay
