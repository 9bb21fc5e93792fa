#include "walrelay/router/outbox_record.hpp"

#include "json_check.hpp"
#include "router_helpers.hpp"
#include "walrelay/core/bytea.hpp"
#include "walrelay/core/headers.hpp"
#include "walrelay/core/json.hpp"
#include "walrelay/router/commit_timestamp.hpp"
#include "walrelay/router/payload_digest.hpp"

namespace walrelay::router {

using detail::append_text;
using detail::find_column;
using detail::is_valid_json;
using detail::valid_topic_char;

void RecordBuffer::clear() {
  topic.clear();
  key.clear();
  value.clear();
  id.clear();
  has_key = false;
  has_value = true;
  timestamp_ms = 0;
  op = 0;
  header_values.clear();
  header_names.clear();
}

Record RecordBuffer::record() {
  headers.clear();
  headers.push_back(Header{header::kId, id});
  for (std::size_t h = 0; h < header_names.size(); ++h) {
    headers.push_back(Header{header_names[h], header_values[h]});
  }
  return Record{topic,
                has_key ? std::optional<std::string_view>(key) : std::nullopt,
                has_value ? std::optional<std::string_view>(value) : std::nullopt,
                std::span<const Header>(headers),
                timestamp_ms,
                op};
}

std::expected<OutboxColumns, MappingError> OutboxRecordBuilder::locate(
    const config::OutboxConfig& ob, std::span<const decoder::Column> row,
    const ErrorContext& where) {
  auto fail = [&](const std::string& why) {
    return std::unexpected(MappingError{where() + ": " + why});
  };
  OutboxColumns f;
  f.event_id = find_column(row, ob.event_id);
  f.aggregate_id = find_column(row, ob.aggregate_id);
  f.aggregate_type = find_column(row, ob.aggregate_type);
  f.payload = find_column(row, ob.payload);
  if (ob.event_type) f.event_type = find_column(row, *ob.event_type);
  if (ob.timestamp) f.timestamp = find_column(row, *ob.timestamp);
  if (f.event_id == nullptr || f.event_id->is_null()) {
    return fail("event id '" + ob.event_id + "' is missing or NULL");
  }
  if (f.aggregate_id == nullptr || f.aggregate_id->is_null()) {
    return fail("aggregate id '" + ob.aggregate_id + "' is missing or NULL");
  }
  if (f.aggregate_type == nullptr || f.aggregate_type->is_null()) {
    return fail("aggregate type '" + ob.aggregate_type + "' is missing or NULL");
  }
  if (f.payload == nullptr) return fail("payload column '" + ob.payload + "' is missing");
  return f;
}

std::expected<void, MappingError> OutboxRecordBuilder::build(const config::OutboxConfig& ob,
                                                             std::span<const decoder::Column> row,
                                                             std::int64_t fallback_timestamp_ms,
                                                             const ErrorContext& where,
                                                             RecordBuffer& out) {
  auto columns = locate(ob, row, where);
  if (!columns) return std::unexpected(std::move(columns.error()));
  return build(ob, row, *columns, fallback_timestamp_ms, where, out);
}

std::expected<void, MappingError> OutboxRecordBuilder::build(const config::OutboxConfig& ob,
                                                             std::span<const decoder::Column> row,
                                                             const OutboxColumns& columns,
                                                             std::int64_t fallback_timestamp_ms,
                                                             const ErrorContext& where,
                                                             RecordBuffer& out) {
  auto fail = [&](const std::string& why) {
    return std::unexpected(MappingError{where() + ": " + why});
  };
  out.clear();
  if (!append_text(out.id, columns.event_id->value)) return fail("malformed event id");
  out.has_key = true;
  if (!append_text(out.key, columns.aggregate_id->value)) return fail("malformed aggregate id");
  if (out.key.empty() && !ob.allow_empty_aggregate_id) {
    // Key '' would put unrelated aggregates on one key and partition (docs/events.md).
    return fail("aggregate id '" + ob.aggregate_id +
                "' is the empty string (events of unrelated aggregates would share one key; set "
                "outbox.allow_empty_aggregate_id: true to publish it)");
  }
  scratch_.clear();
  if (!append_text(scratch_, columns.aggregate_type->value))
    return fail("malformed aggregate type");
  if (scratch_.empty()) return fail("aggregate type '" + ob.aggregate_type + "' is empty");

  constexpr std::string_view kPlaceholder = "{aggregate_type}";
  const std::string_view tmpl = ob.topic;
  for (std::size_t pos = 0; pos < tmpl.size();) {
    const auto at = tmpl.find(kPlaceholder, pos);
    if (at == std::string_view::npos) {
      out.topic.append(tmpl.substr(pos));
      break;
    }
    out.topic.append(tmpl.substr(pos, at - pos));
    out.topic.append(scratch_);
    pos = at + kPlaceholder.size();
  }
  if (out.topic.empty() || out.topic.size() > 249 || out.topic == "." || out.topic == "..") {
    return fail("topic '" + out.topic + "' is not a valid Kafka topic name");
  }
  for (char ch : out.topic) {
    if (!valid_topic_char(ch)) {
      return fail("aggregate type gives topic '" + out.topic +
                  "', which has characters Kafka does not allow");
    }
  }

  // The value: the payload as JSON (a json/jsonb payload is the document itself, never a JSON
  // string holding it); text must hold JSON; bytea is published as its bytes.
  const decoder::Column& p = *columns.payload;
  if (p.is_null()) {
    if (!ob.tombstone_on_empty_payload) {
      return fail("payload '" + ob.payload +
                  "' is NULL (set tombstone_on_empty_payload to publish a tombstone)");
    }
    out.has_value = false;
  } else {
    const std::uint32_t type = types_.resolve_domain(p.type_oid);
    if (type == oid::kBytea) {
      scratch_.clear();
      if (!json::unescape_string(p.value, scratch_) || !bytea::append_bytes(out.value, scratch_)) {
        return fail("malformed bytea payload");
      }
    } else if (json::is_string_token(p.value)) {
      if (!json::unescape_string(p.value, out.value)) return fail("malformed payload string");
      if (type != oid::kJson && type != oid::kJsonb && !is_valid_json(out.value, scratch_)) {
        return fail("payload '" + ob.payload + "' is not JSON");
      }
    } else {
      out.value.append(p.value);  // a number, boolean, or (message form) an embedded document
    }
  }

  out.timestamp_ms = fallback_timestamp_ms;
  if (columns.timestamp != nullptr && !columns.timestamp->is_null()) {
    scratch_.clear();
    if (append_text(scratch_, columns.timestamp->value)) {
      if (auto ms = parse_commit_timestamp_ms(scratch_)) out.timestamp_ms = *ms;
    }
  }
  auto add_header = [&](std::string_view name, const decoder::Column* col) {
    if (col == nullptr || col->is_null()) return;
    out.header_names.push_back(name);
    out.header_values.emplace_back();
    append_text(out.header_values.back(), col->value);
  };
  if (ob.event_type) add_header(header::kEventType, columns.event_type);
  for (const auto& a : ob.additional) add_header(a.header, find_column(row, a.column));
  if (ob.payload_digest && out.has_value) {
    out.header_names.push_back(header::kPayloadDigest);
    out.header_values.emplace_back();
    append_payload_digest(out.header_values.back(), out.value);
  }
  return {};
}

}  // namespace walrelay::router
