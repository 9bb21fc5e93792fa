#include "walrelay/reconcile/report.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "walrelay/core/json.hpp"

namespace walrelay::reconcile {

namespace {

constexpr std::size_t kExamples = 3;

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

bool Report::has_breaks() const {
  for (const auto& t : tables) {
    if (!t.found.breaks.empty()) return true;
  }
  return false;
}

std::uint64_t Report::unrepaired_breaks() const {
  std::uint64_t n = 0;
  for (const auto& t : tables)
    n += t.found.breaks.size() - std::min(t.found.breaks.size(), t.repaired.size());
  return n;
}

std::uint64_t Report::repair_failures() const {
  std::uint64_t n = 0;
  for (const auto& t : tables) n += t.repair_failed.size();
  return n;
}

std::int64_t break_age_ms(const Break& b, std::int64_t now_ms) {
  const std::int64_t from = b.first_seen_ms >= 0 ? b.first_seen_ms : b.since_ms;
  if (from < 0) return -1;
  return now_ms > from ? now_ms - from : 0;
}

std::string format_age(std::int64_t ms) {
  if (ms < 0) return "-";
  const std::int64_t s = ms / 1000;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

void write_summary(std::ostream& out, const Report& report) {
  for (const auto& t : report.tables) {
    out << t.table << ": " << t.source_rows << " rows, " << t.kafka_records << " records in";
    for (const auto& topic : t.topics) out << " " << topic;
    if (t.topics.empty()) out << " (no topic)";
    if (t.poll) {
      out << "; poll mode, " << t.in_flight_rows << " pending rows in flight";
    } else {
      out << "; snapshot at " << t.snapshot_lsn
          << (t.delivered ? ", delivered" : ", NOT delivered in time (missing = in_flight)");
    }
    if (t.inbox) out << "; " << t.inbox_in_flight << " records not yet read by the inbox";
    if (t.expanded_buckets > 0) out << "; " << t.expanded_buckets << " buckets expanded";
    if (t.newer_than_snapshot > 0) {
      out << "; " << t.newer_than_snapshot << " records newer than the snapshot";
    }
    out << "\n";
  }
  out << "\n"
      << pad("table", 32) << " " << pad("class", 16) << " " << pad("count", 8) << " "
      << pad("oldest", 8) << " examples\n";
  bool any = false;
  for (const auto& t : report.tables) {
    for (const BreakClass cls : kBreakClasses) {
      std::uint64_t count = 0;
      std::int64_t oldest = -1;  // the largest age
      std::string examples;
      std::size_t shown = 0;
      for (const auto& b : t.found.breaks) {
        if (b.cls != cls) continue;
        ++count;
        oldest = std::max(oldest, break_age_ms(b, report.now_ms));
        if (shown < kExamples) {
          examples += (shown > 0 ? ", " : "") + b.id;
          ++shown;
        }
      }
      if (count == 0) continue;
      any = true;
      if (count > shown) examples += ", …";
      out << pad(t.table, 32) << " " << pad(std::string(to_string(cls)), 16) << " "
          << pad(std::to_string(count), 8) << " " << pad(format_age(oldest), 8) << " " << examples
          << "\n";
    }
    if (t.found.duplicates > 0) {
      std::string examples;
      for (std::size_t i = 0; i < t.found.duplicate_ids.size() && i < kExamples; ++i) {
        examples += (i > 0 ? ", " : "") + t.found.duplicate_ids[i];
      }
      out << pad(t.table, 32) << " " << pad("duplicate", 16) << " "
          << pad(std::to_string(t.found.duplicates), 8) << " " << pad("-", 8) << " " << examples
          << " (not a break)\n";
    }
  }
  if (!any) out << "no breaks\n";
  if (!report.repair) return;
  for (const auto& t : report.tables) {
    if (t.repaired.empty() && t.repair_failed.empty()) continue;
    out << "\n"
        << t.table << ": --repair re-emitted " << t.repaired.size()
        << " missing event(s), acknowledged by Kafka";
    for (std::size_t i = 0; i < t.repaired.size() && i < kExamples; ++i) {
      out << (i == 0 ? ": " : ", ") << t.repaired[i];
    }
    if (t.repaired.size() > kExamples) out << ", …";
    out << "\n";
    for (const auto& [id, reason] : t.repair_failed) {
      out << t.table << ": --repair could not re-emit " << id << ": " << reason << "\n";
    }
  }
}

void write_json(std::ostream& out, const Report& report) {
  std::string s;
  std::uint64_t total = 0;
  s += "{\"tables\":[";
  for (std::size_t i = 0; i < report.tables.size(); ++i) {
    const auto& t = report.tables[i];
    s += i > 0 ? ",{" : "{";
    s += "\"table\":";
    json::append_string(s, t.table);
    s += ",\"topics\":[";
    for (std::size_t j = 0; j < t.topics.size(); ++j) {
      if (j > 0) s += ',';
      json::append_string(s, t.topics[j]);
    }
    s += "],\"source_rows\":" + std::to_string(t.source_rows);
    s += ",\"kafka_records\":" + std::to_string(t.kafka_records);
    s += ",\"expanded_buckets\":" + std::to_string(t.expanded_buckets);
    s += ",\"duplicates\":" + std::to_string(t.found.duplicates);
    s += ",\"duplicate_ids\":[";
    for (std::size_t j = 0; j < t.found.duplicate_ids.size(); ++j) {
      if (j > 0) s += ',';
      json::append_string(s, t.found.duplicate_ids[j]);
    }
    s += "],\"newer_than_snapshot\":" + std::to_string(t.newer_than_snapshot);
    s += ",\"snapshot_lsn\":";
    json::append_string(s, t.snapshot_lsn);
    s += std::string(",\"delivered\":") + (t.delivered ? "true" : "false");
    if (t.poll) s += ",\"mode\":\"poll\",\"in_flight_rows\":" + std::to_string(t.in_flight_rows);
    if (t.inbox) s += ",\"inbox_in_flight\":" + std::to_string(t.inbox_in_flight);
    s += ",\"breaks\":[";
    for (std::size_t j = 0; j < t.found.breaks.size(); ++j) {
      const auto& b = t.found.breaks[j];
      s += j > 0 ? ",{" : "{";
      s += "\"class\":";
      json::append_string(s, to_string(b.cls));
      s += ",\"id\":";
      json::append_string(s, b.id);
      s += ",\"since_ms\":" + (b.since_ms >= 0 ? std::to_string(b.since_ms) : "null");
      const std::int64_t age = break_age_ms(b, report.now_ms);
      s += ",\"age_s\":" + (age >= 0 ? std::to_string(age / 1000) : "null");
      s +=
          ",\"first_seen_ms\":" + (b.first_seen_ms >= 0 ? std::to_string(b.first_seen_ms) : "null");
      s += ",\"detail\":";
      json::append_string(s, b.detail);
      s += '}';
    }
    total += t.found.breaks.size();
    s += ']';
    if (report.repair) {
      s += ",\"repaired\":[";
      for (std::size_t j = 0; j < t.repaired.size(); ++j) {
        if (j > 0) s += ',';
        json::append_string(s, t.repaired[j]);
      }
      s += "],\"repair_failed\":[";
      for (std::size_t j = 0; j < t.repair_failed.size(); ++j) {
        s += j > 0 ? ",{\"id\":" : "{\"id\":";
        json::append_string(s, t.repair_failed[j].first);
        s += ",\"reason\":";
        json::append_string(s, t.repair_failed[j].second);
        s += '}';
      }
      s += ']';
    }
    s += '}';
  }
  s += "],\"breaks\":" + std::to_string(total);
  s += ",\"now_ms\":" + std::to_string(report.now_ms) + "}\n";
  out << s;
}

}  // namespace walrelay::reconcile
