#pragma once
// `--log-format json`: one JSON object per log line for log shippers,
// {"ts":"2026-12-01T03:50:39.384+00:00","level":"info","msg":"..."}. The message is the same text
// the plain format prints (secrets are redacted before a message is formatted), JSON-escaped.

#include <spdlog/formatter.h>

#include <memory>

namespace walrelay {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override;
};

}  // namespace walrelay
