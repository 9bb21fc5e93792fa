#include "walrelay/reconcile/classify.hpp"

#include <algorithm>

namespace walrelay::reconcile {

std::string_view to_string(BreakClass value) {
  switch (value) {
    case BreakClass::kMissing:
      return "missing";
    case BreakClass::kPhantom:
      return "phantom";
    case BreakClass::kConflict:
      return "conflict";
    case BreakClass::kInFlight:
      return "in_flight";
    case BreakClass::kDuplicate:
      return "duplicate";
    case BreakClass::kFailed:
      return "failed";
    case BreakClass::kNotInInbox:
      return "not_in_inbox";
    case BreakClass::kPhantomInInbox:
      return "phantom_in_inbox";
    case BreakClass::kQuarantined:
      return "quarantined";
    case BreakClass::kDeferred:
      return "deferred";
  }
  return "unknown";
}

namespace {

std::int64_t oldest(std::int64_t a, std::int64_t b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return a < b ? a : b;
}

std::string short_digest(std::string_view d) {
  return d.empty() ? std::string("(tombstone)") : std::string(d.substr(0, 12));
}

}  // namespace

void classify_bucket(std::vector<Entry>& source, std::vector<Entry>& kafka, bool delivered,
                     Classification& out) {
  auto by_id = [](const Entry& a, const Entry& b) { return a.id < b.id; };
  std::ranges::sort(source, by_id);
  std::ranges::sort(kafka, by_id);
  std::size_t s = 0;
  std::size_t k = 0;
  while (s < source.size() || k < kafka.size()) {
    std::string_view id;
    if (s < source.size() && (k >= kafka.size() || source[s].id <= kafka[k].id)) {
      id = source[s].id;
    } else {
      id = kafka[k].id;
    }
    const std::size_t s0 = s;
    const std::size_t k0 = k;
    while (s < source.size() && source[s].id == id) ++s;
    while (k < kafka.size() && kafka[k].id == id) ++k;
    Break b;
    b.id = std::string(id);
    for (std::size_t i = s0; i < s; ++i) b.since_ms = oldest(b.since_ms, source[i].timestamp_ms);
    for (std::size_t i = k0; i < k; ++i) b.since_ms = oldest(b.since_ms, kafka[i].timestamp_ms);
    if (k == k0) {
      b.cls = delivered ? BreakClass::kMissing : BreakClass::kInFlight;
      out.breaks.push_back(std::move(b));
      continue;
    }
    if (s == s0) {
      b.cls = BreakClass::kPhantom;
      b.detail = "at " + kafka[k0].where;
      if (k - k0 > 1) b.detail += " and " + std::to_string(k - k0 - 1) + " more";
      out.breaks.push_back(std::move(b));
      continue;
    }
    // Both sides hold the id: the source's digest (the first row's, should the table hold the id
    // twice) against every copy in Kafka.
    const std::string& expected = source[s0].digest;
    const Entry* other = nullptr;
    for (std::size_t i = s0 + 1; i < s && other == nullptr; ++i) {
      if (source[i].digest != expected) other = &source[i];
    }
    for (std::size_t i = k0; i < k && other == nullptr; ++i) {
      if (kafka[i].digest != expected) other = &kafka[i];
    }
    if (other != nullptr) {
      b.cls = BreakClass::kConflict;
      b.detail = "source digest " + short_digest(expected) + ", other digest " +
                 short_digest(other->digest) +
                 (other->where.empty() ? std::string(" in the source") : " at " + other->where);
      out.breaks.push_back(std::move(b));
      continue;
    }
    if (k - k0 > 1) {
      out.duplicates += k - k0 - 1;
      if (out.duplicate_ids.size() < Classification::kMaxExamples) {
        out.duplicate_ids.push_back(b.id);
      }
    }
  }
}

std::vector<std::string> phantom_ids(const Classification& c) {
  std::vector<std::string> ids;
  for (const auto& b : c.breaks) {
    if (b.cls == BreakClass::kPhantom) ids.push_back(b.id);
  }
  return ids;
}

std::uint64_t resolve_phantoms(Classification& c,
                               const std::unordered_set<std::string>& present_now) {
  const auto before = c.breaks.size();
  std::erase_if(c.breaks, [&](const Break& b) {
    return b.cls == BreakClass::kPhantom && present_now.contains(b.id);
  });
  return before - c.breaks.size();
}

}  // namespace walrelay::reconcile
