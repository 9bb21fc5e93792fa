#include "walrelay/inbox/event.hpp"

#include <simdjson.h>

#include <charconv>
#include <map>

#include "walrelay/core/headers.hpp"
#include "walrelay/core/json.hpp"
#include "walrelay/router/payload_digest.hpp"

namespace walrelay::inbox {

namespace {

using config::InboxField;
using config::InboxFieldSource;

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// The text at JSON pointer `pointer` of `document`: a string's unescaped text, a number's
// literal text (never through a double), nullopt when absent or another type. `why` says why.
std::optional<std::string> json_text_at(const std::string& document, const std::string& pointer,
                                        std::string& why) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(document).get(root) != simdjson::SUCCESS) {
    why = "the value is not JSON";
    return std::nullopt;
  }
  simdjson::dom::element at;
  if (root.at_pointer(pointer).get(at) != simdjson::SUCCESS) {
    why = "the value has nothing at " + pointer;
    return std::nullopt;
  }
  if (at.is_int64()) return std::to_string(at.get_int64().value());
  if (at.is_string()) return std::string(at.get_string().value());
  why = "the value at " + pointer + " is not an integer or a string";
  return std::nullopt;
}

}  // namespace

Event read_event(const kafka::Message& message, const config::InboxConfig& cfg) {
  Event raw;
  raw.topic = std::string(message.topic());
  raw.partition = message.partition();
  raw.offset = message.offset();
  raw.timestamp_ms = message.timestamp_ms();
  if (auto k = message.key()) raw.key = std::string(*k);
  if (auto v = message.value()) raw.value = std::string(*v);

  // Every header, the last value of a name winning (as Message::header reads them).
  Headers headers;
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(message.get(), &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    for (std::size_t i = 0;
         rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      headers[name] =
          value == nullptr
              ? std::nullopt
              : std::optional<std::string>(std::string(static_cast<const char*>(value), size));
    }
  }
  return decode_event(std::move(raw), headers, cfg);
}

std::optional<Headers> headers_from_json(const std::string& headers_json) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(headers_json).get(object) != simdjson::SUCCESS) return std::nullopt;
  Headers headers;
  for (const auto field : object) {
    if (field.value.is_null()) {
      headers[std::string(field.key)] = std::nullopt;
    } else if (field.value.is_string()) {
      headers[std::string(field.key)] = std::string(field.value.get_string().value());
    } else {
      return std::nullopt;
    }
  }
  return headers;
}

Event decode_event(Event raw, const Headers& headers, const config::InboxConfig& cfg) {
  Event e;
  e.topic = std::move(raw.topic);
  e.partition = raw.partition;
  e.offset = raw.offset;
  e.timestamp_ms = raw.timestamp_ms;
  e.key = std::move(raw.key);
  e.value = std::move(raw.value);
  e.headers_json = "{";
  for (const auto& [name, value] : headers) {
    if (e.headers_json.size() > 1) e.headers_json += ',';
    json::append_string(e.headers_json, name);
    e.headers_json += ':';
    if (value) {
      json::append_string(e.headers_json, *value);
    } else {
      e.headers_json += "null";
    }
  }
  e.headers_json += '}';

  const auto header = [&](const std::string& name) -> std::optional<std::string> {
    const auto it = headers.find(name);
    if (it == headers.end() || !it->second) return std::nullopt;
    return it->second;
  };
  const auto problem = [&](std::string why) {
    if (e.problem.empty()) e.problem = std::move(why);
  };
  // One field by its source; nullopt (and a problem when `required`) when it is absent.
  const auto field = [&](const InboxField& f, std::string_view what,
                         bool required) -> std::optional<std::string> {
    std::optional<std::string> out;
    std::string why;
    switch (f.source) {
      case InboxFieldSource::kNone:
        return std::nullopt;
      case InboxFieldSource::kHeader:
        out = header(f.name);
        if (!out) why = "no header " + f.name;
        break;
      case InboxFieldSource::kKey:
        out = e.key;
        if (!out) why = "a null key";
        break;
      case InboxFieldSource::kJson:
        if (e.value) {
          out = json_text_at(*e.value, f.name, why);
        } else {
          why = "no value";
        }
        break;
      case InboxFieldSource::kValue:
        return std::nullopt;
    }
    if (!out && required) problem("undecodable: no " + std::string(what) + " (" + why + ")");
    return out;
  };

  if (auto t = field(cfg.tenant, "tenant", true)) e.tenant = std::move(*t);
  if (auto id = field(cfg.event_id, "event id", true)) {
    if (id->empty()) {
      problem("undecodable: an empty event id");
    } else {
      e.id = std::move(*id);
    }
  }
  e.aggregate = field(cfg.aggregate, "aggregate", cfg.version.source != InboxFieldSource::kNone);
  if (auto v = field(cfg.version, "version", true)) {
    if (auto n = parse_int(*v)) {
      e.version = *n;
    } else {
      problem("undecodable: version " + *v + " is not an integer");
    }
  }
  if (auto t = header(header::kEventType)) e.event_type = std::move(*t);

  if (cfg.digest.source == InboxFieldSource::kHeader) {
    if (auto d = header(cfg.digest.name)) {
      e.digest = std::move(*d);
      // walrelay's own header is the SHA-256 of exactly the value's bytes
      // (router/payload_digest.hpp): another value means the payload changed after it.
      if (cfg.digest.name == header::kPayloadDigest && e.value) {
        const std::string computed = router::payload_digest(*e.value);
        if (computed != e.digest) {
          problem("the payload_digest header " + e.digest + " does not match the value's SHA-256 " +
                  computed);
        }
      }
    }
  }
  if (e.digest.empty()) {
    // A row change's digest is that of its row values (a replay with a new ts_ms and source is
    // the same change); any other value's is the SHA-256 of its bytes.
    e.digest = router::record_digest(e.value ? *e.value : std::string_view());
  }
  return e;
}

int placeholder_count(std::string_view sql) {
  int max = 0;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      const std::size_t end = sql.find(c, i + 1);
      if (end == std::string_view::npos) break;
      i = end;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const std::size_t end = sql.find('\n', i);
      if (end == std::string_view::npos) break;
      i = end;
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      const std::size_t end = sql.find("*/", i + 2);
      if (end == std::string_view::npos) break;
      i = end + 1;
    } else if (c == '$' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9' &&
               (i == 0 ||
                !(std::isalnum(static_cast<unsigned char>(sql[i - 1])) || sql[i - 1] == '_'))) {
      int n = 0;
      std::size_t j = i + 1;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9' && n < 1000) {
        n = n * 10 + (sql[j] - '0');
        ++j;
      }
      max = std::max(max, n);
      i = j - 1;
    }
  }
  return max;
}

}  // namespace walrelay::inbox
