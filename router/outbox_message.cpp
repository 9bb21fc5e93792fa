// A logical message outbox's content as outbox fields (outbox_record.hpp).

#include "json_check.hpp"
#include "walrelay/router/outbox_record.hpp"

namespace walrelay::router {

std::expected<void, std::string> outbox_message_fields(std::string_view content,
                                                       std::string& buffer,
                                                       std::vector<decoder::Column>& fields) {
  // The content is a JSON object whose top-level fields are named like the outbox columns.
  namespace od = simdjson::ondemand;
  static thread_local od::parser parser;
  buffer.assign(content);
  buffer.append(simdjson::SIMDJSON_PADDING, '\0');
  fields.clear();
  od::document doc;
  od::object obj;
  if (parser.iterate(buffer.data(), content.size(), buffer.size()).get(doc) ||
      doc.get_object().get(obj)) {
    return std::unexpected("content is not a JSON object");
  }
  const auto invalid = [] { return std::unexpected("content is not valid JSON"); };
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) || field.value().get(v)) return invalid();
    decoder::Column col;
    col.name = key;
    od::json_type t;
    if (v.type().get(t)) return invalid();
    std::string_view raw;
    if (t == od::json_type::object) {
      od::object o;
      if (v.get_object().get(o) || o.raw_json().get(raw)) return invalid();
      col.type_oid = oid::kJson;
    } else if (t == od::json_type::array) {
      od::array a;
      if (v.get_array().get(a) || a.raw_json().get(raw)) return invalid();
      col.type_oid = oid::kJson;
    } else {
      raw = v.raw_json_token();
      col.type_oid = t == od::json_type::string ? oid::kText : 0;
    }
    while (!raw.empty() &&
           (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\t' || raw.back() == '\r')) {
      raw.remove_suffix(1);
    }
    col.value = raw;
    fields.push_back(col);
  }
  if (!detail::at_document_end(doc)) return invalid();
  return {};
}

}  // namespace walrelay::router
