// The digest of a row change's values (payload_digest.hpp: row_change_digest, record_digest).

#include <optional>
#include <string>
#include <string_view>

#include "json_check.hpp"
#include "router_helpers.hpp"
#include "walrelay/router/payload_digest.hpp"

namespace walrelay::router {

namespace {

// `raw` (a JSON value's text) without the whitespace outside its strings, appended to `out`.
bool append_minified(std::string& out, std::string_view raw) {
  const std::size_t at = out.size();
  out.resize(at + raw.size());
  std::size_t len = 0;
  if (simdjson::minify(raw.data(), raw.size(), out.data() + at, len) != simdjson::SUCCESS) {
    return false;
  }
  out.resize(at + len);
  return true;
}

}  // namespace

std::optional<std::string> row_change_digest(std::string_view value) {
  namespace od = simdjson::ondemand;
  static thread_local std::string padded;
  static thread_local std::string canonical;
  static thread_local od::parser parser;
  // Validated first (is_valid_json leaves `padded` holding the padded copy): on-demand parsing
  // only checks what it reads, and a value that is not one JSON document is no envelope.
  if (!detail::is_valid_json(value, padded)) return std::nullopt;
  od::document doc;
  od::object obj;
  if (parser.iterate(padded.data(), value.size(), padded.size()).get(doc) ||
      doc.get_object().get(obj)) {
    return std::nullopt;
  }
  std::optional<std::string_view> op;
  std::optional<std::string_view> before;
  std::optional<std::string_view> after;
  bool source = false;
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) || field.value().get(v)) return std::nullopt;
    std::optional<std::string_view>* slot = nullptr;
    if (key == "op") {
      slot = &op;
    } else if (key == "before") {
      slot = &before;
    } else if (key == "after") {
      slot = &after;
    } else if (key != "source") {
      continue;  // ts_ms, ts_us, ts_ns, transaction, anything else: not the change's values
    }
    od::json_type t;
    if (v.type().get(t)) return std::nullopt;
    if (slot == nullptr) {  // source
      if (source || t != od::json_type::object) return std::nullopt;
      source = true;
      continue;
    }
    if (slot->has_value()) return std::nullopt;  // a name twice: which one is the change?
    std::string_view raw;
    if (slot == &op) {
      if (t != od::json_type::string) return std::nullopt;
      raw = v.raw_json_token();
    } else if (t == od::json_type::object) {
      od::object o;
      if (v.get_object().get(o) || o.raw_json().get(raw)) return std::nullopt;
    } else if (t == od::json_type::null) {
      raw = v.raw_json_token();
    } else {
      return std::nullopt;  // a row image is an object or null
    }
    *slot = raw;
  }
  if (!op || !source) return std::nullopt;

  canonical.assign("{\"op\":");
  if (!append_minified(canonical, *op)) return std::nullopt;
  if (before) {
    canonical.append(",\"before\":");
    if (!append_minified(canonical, *before)) return std::nullopt;
  }
  if (after) {
    canonical.append(",\"after\":");
    if (!append_minified(canonical, *after)) return std::nullopt;
  }
  canonical.push_back('}');
  std::string out;
  detail::append_sha256_hex(out, {}, canonical);
  return out;
}

std::string record_digest(std::string_view value) {
  if (auto d = row_change_digest(value)) return std::move(*d);
  return payload_digest(value);
}

}  // namespace walrelay::router
