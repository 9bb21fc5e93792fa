#include "json_check.hpp"

namespace walrelay::router::detail {

namespace {

// Validates a JSON document without converting numbers (so 30-digit numbers and 1e400 pass, as
// PostgreSQL's json type accepts them): structure and string escapes via simdjson on-demand.
bool validate_value(simdjson::ondemand::value v, int depth) {
  namespace od = simdjson::ondemand;
  if (depth > 256) return false;
  od::json_type t;
  if (v.type().get(t)) return false;
  switch (t) {
    case od::json_type::object: {
      od::object obj;
      if (v.get_object().get(obj)) return false;
      for (auto field : obj) {
        std::string_view key;
        if (field.unescaped_key().get(key)) return false;
        od::value fv;
        if (field.value().get(fv)) return false;
        if (!validate_value(fv, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array arr;
      if (v.get_array().get(arr)) return false;
      for (auto element : arr) {
        od::value ev;
        if (element.get(ev)) return false;
        if (!validate_value(ev, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      return !v.get_string().get(s);
    }
    case od::json_type::number: {
      // RFC 8259 §6 number grammar on the raw token.
      std::string_view n = v.raw_json_token();
      while (!n.empty() &&
             (n.back() == ' ' || n.back() == '\n' || n.back() == '\t' || n.back() == '\r')) {
        n.remove_suffix(1);
      }
      std::size_t i = 0;
      if (i < n.size() && n[i] == '-') ++i;
      if (i >= n.size()) return false;
      if (n[i] == '0') {
        ++i;
      } else if (n[i] >= '1' && n[i] <= '9') {
        while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
      } else {
        return false;
      }
      if (i < n.size() && n[i] == '.') {
        ++i;
        const std::size_t start = i;
        while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
        if (i == start) return false;
      }
      if (i < n.size() && (n[i] == 'e' || n[i] == 'E')) {
        ++i;
        if (i < n.size() && (n[i] == '+' || n[i] == '-')) ++i;
        const std::size_t start = i;
        while (i < n.size() && n[i] >= '0' && n[i] <= '9') ++i;
        if (i == start) return false;
      }
      return i == n.size();
    }
    case od::json_type::boolean: {
      bool b = false;
      return !v.get_bool().get(b);
    }
    case od::json_type::null: {
      // A token that only starts like null (`name`) is an error, not a throw (found by the
      // fuzzer: simdjson_result<bool> converted to bool throws on error).
      bool is_null = false;
      return !v.is_null().get(is_null) && is_null;
    }
  }
  return false;
}

// True when nothing but whitespace follows the root value (simdjson 3.0.1 has no at_end() on a

}  // namespace

bool at_document_end(simdjson::ondemand::document& doc) {
  const char* loc = nullptr;
  return doc.current_location().get(loc) == simdjson::OUT_OF_BOUNDS;
}

bool is_valid_json(std::string_view text, std::string& padded) {
  namespace od = simdjson::ondemand;
  static thread_local od::parser parser;
  padded.assign(text);
  padded.append(simdjson::SIMDJSON_PADDING, '\0');
  od::document doc;
  if (parser.iterate(padded.data(), text.size(), padded.size()).get(doc)) return false;
  od::value root;
  // A scalar document (a bare number or string) is valid JSON too.
  bool scalar = false;
  if (doc.is_scalar().get(scalar)) return false;
  if (scalar) {
    od::json_type t;
    if (doc.type().get(t)) return false;
    if (t == od::json_type::string) {
      std::string_view s;
      if (doc.get_string().get(s)) return false;
    } else if (t == od::json_type::number) {
      std::string_view raw;
      if (doc.raw_json_token().get(raw)) return false;
    } else if (t == od::json_type::boolean) {
      bool b = false;
      if (doc.get_bool().get(b)) return false;
    } else {
      bool n = false;
      if (doc.is_null().get(n) || !n) return false;
    }
    return true;  // scalar documents are checked for trailing content by their getters
  }
  if (doc.get_value().get(root)) return false;
  if (!validate_value(root, 0)) return false;
  return at_document_end(doc);
}

}  // namespace walrelay::router::detail
