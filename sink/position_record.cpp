#include "walrelay/sink/position_record.hpp"

#include <simdjson.h>

#include <limits>
#include <utility>

#include "walrelay/core/json.hpp"

namespace walrelay::sink {

namespace {

void append_progress(std::string& out, const snapshot::SnapshotProgress& p) {
  out += "{\"slot\":";
  json::append_string(out, p.slot);
  out += ",\"lsn\":\"" + p.lsn.to_string() + "\",\"xid\":" + std::to_string(p.xid) +
         ",\"resumed\":" + (p.resumed ? "true" : "false") + ",\"tables\":[";
  for (std::size_t i = 0; i < p.tables.size(); ++i) {
    const snapshot::TableProgress& t = p.tables[i];
    if (i > 0) out.push_back(',');
    out += "{\"schema\":";
    json::append_string(out, t.schema);
    out += ",\"table\":";
    json::append_string(out, t.table);
    out += std::string(",\"done\":") + (t.done ? "true" : "false") +
           ",\"rows\":" + std::to_string(t.rows) + ",\"chunks\":" + std::to_string(t.chunks);
    if (t.last_key) {
      out += ",\"last_key\":[";
      for (std::size_t k = 0; k < t.last_key->size(); ++k) {
        if (k > 0) out.push_back(',');
        if (const auto& v = (*t.last_key)[k]) {
          json::append_string(out, *v);
        } else {
          out += "null";
        }
      }
      out.push_back(']');
    }
    out.push_back('}');
  }
  out += "]}";
}

std::optional<snapshot::SnapshotProgress> parse_progress(simdjson::dom::element e) {
  snapshot::SnapshotProgress p;
  std::string_view slot;
  std::string_view lsn;
  std::uint64_t xid = 0;
  bool resumed = false;
  simdjson::dom::array tables;
  if (e["slot"].get(slot) || e["lsn"].get(lsn) || e["xid"].get(xid) || e["resumed"].get(resumed) ||
      e["tables"].get(tables)) {
    return std::nullopt;
  }
  const auto parsed_lsn = Lsn::parse(lsn);
  if (!parsed_lsn) return std::nullopt;
  p.slot = slot;
  p.lsn = *parsed_lsn;
  p.xid = xid;
  p.resumed = resumed;
  for (simdjson::dom::element t : tables) {
    snapshot::TableProgress tp;
    std::string_view schema;
    std::string_view table;
    if (t["schema"].get(schema) || t["table"].get(table) || t["done"].get(tp.done) ||
        t["rows"].get(tp.rows) || t["chunks"].get(tp.chunks)) {
      return std::nullopt;
    }
    tp.schema = schema;
    tp.table = table;
    simdjson::dom::array key;
    if (auto k = t["last_key"]; k.error() == simdjson::SUCCESS) {
      if (k.get(key)) return std::nullopt;
      snapshot::KeyText text;
      for (simdjson::dom::element v : key) {
        std::string_view s;
        if (v.is_null()) {
          text.emplace_back(std::nullopt);
        } else if (v.get(s) == simdjson::SUCCESS) {
          text.emplace_back(std::string(s));
        } else {
          return std::nullopt;
        }
      }
      tp.last_key = std::move(text);
    }
    p.tables.push_back(std::move(tp));
  }
  return p;
}

}  // namespace

std::string encode_position(const StreamPosition& p) {
  std::string out = "{\"system_id\":";
  json::append_string(out, p.system_id);
  out += ",\"timeline\":" + std::to_string(p.timeline) + ",\"lsn\":\"" + p.lsn.to_string() +
         "\",\"index\":" + std::to_string(p.index);
  if (p.snapshot) {
    out += ",\"snapshot\":";
    append_progress(out, *p.snapshot);
  }
  if (p.incremental) {
    out += ",\"incremental\":";
    append_progress(out, *p.incremental);
  }
  out.push_back('}');
  return out;
}

std::optional<StreamPosition> decode_position(std::string_view value) {
  // Reused: read_position decodes every record of the topic since its last compaction.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(value.data(), value.size()).get(doc) != simdjson::SUCCESS) return std::nullopt;
  StreamPosition p;
  std::string_view system_id;
  std::string_view lsn_text;
  std::uint64_t timeline = 0;
  std::int64_t index = 0;
  if (doc["system_id"].get(system_id) || doc["timeline"].get(timeline) ||
      doc["lsn"].get(lsn_text) || doc["index"].get(index) || index < -1 ||
      timeline > std::numeric_limits<std::uint32_t>::max()) {
    return std::nullopt;
  }
  const auto lsn = Lsn::parse(lsn_text);
  if (!lsn) return std::nullopt;
  p.system_id = system_id;
  p.timeline = static_cast<std::uint32_t>(timeline);
  p.lsn = *lsn;
  p.index = index;
  for (auto [name, field] : {std::pair{"snapshot", &StreamPosition::snapshot},
                             std::pair{"incremental", &StreamPosition::incremental}}) {
    simdjson::dom::element section;
    if (doc[name].get(section) != simdjson::SUCCESS) continue;
    auto progress = parse_progress(section);
    if (!progress) return std::nullopt;
    p.*field = std::move(*progress);
  }
  return p;
}

std::string positions_topic(std::string_view prefix) {
  return std::string(prefix) + ".walrelay.positions";
}

}  // namespace walrelay::sink
