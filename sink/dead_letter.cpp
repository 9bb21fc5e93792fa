#include "walrelay/sink/dead_letter.hpp"

#include <spdlog/spdlog.h>

#include <array>

#include "walrelay/core/headers.hpp"

namespace walrelay::sink {

std::string_view to_string(DeadLetterKind kind) {
  switch (kind) {
    case DeadLetterKind::kMapping:
      return "mapping";
    case DeadLetterKind::kOversize:
      return "oversize";
    case DeadLetterKind::kDelivery:
      return "delivery";
  }
  return "mapping";
}

std::string lsn_suffix(std::string_view reason, Lsn lsn) {
  const std::string text = lsn.to_string();
  if (reason.find("LSN " + text) != std::string_view::npos) return {};
  return " (LSN " + text + ")";
}

DeadLetterWriter::Result DeadLetterWriter::publish(RecordSource source, std::uint64_t unit,
                                                   const DeadLetter& dl) {
  lsn_ = dl.lsn.to_string();
  const std::array<Header, 5> headers = {{{header::kErrorKind, to_string(dl.kind)},
                                          {header::kErrorReason, dl.reason},
                                          {header::kSource, dl.source},
                                          {header::kLsn, lsn_},
                                          {header::kId, dl.event_id}}};
  Record rec{topic_, dl.key, dl.body,
             std::span<const Header>(headers.data(), dl.event_id.empty() ? 4 : 5), 0};
  PublishResult r = publisher_.publish(source, rec, unit);
  if (r.status == PublishStatus::kTooLarge && rec.value) {
    // The original itself is too large: a record with the headers and no body.
    rec.value = std::nullopt;
    r = publisher_.publish(source, rec, unit);
  }
  Result out;
  out.status = r.status;
  if (!r.queued()) {
    out.error = r.error();
    return out;
  }
  out.bytes = kafka::record_bytes(rec);
  spdlog::warn("dead-lettered ({}) to {}: {}{}", to_string(dl.kind), topic_, dl.reason,
               lsn_suffix(dl.reason, dl.lsn));
  return out;
}

}  // namespace walrelay::sink
