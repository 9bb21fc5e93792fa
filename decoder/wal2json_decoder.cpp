#include "walrelay/decoder/wal2json_decoder.hpp"

#include <simdjson.h>

#include <cstring>

namespace walrelay::decoder {

namespace od = simdjson::ondemand;

struct Wal2JsonDecoder::Impl {
  od::parser parser;
  std::vector<char> buffer;  // padded copy of the current line (simdjson needs SIMDJSON_PADDING)
  std::vector<Column> pk_scratch;  // `pk` entries before their names are copied to Change::pk
  Change change;
};

namespace {

std::string_view trim_right(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::unexpected<DecodeError> fail(std::string reason) {
  return std::unexpected(DecodeError{std::move(reason)});
}

std::unexpected<DecodeError> fail(std::string_view field, simdjson::error_code ec) {
  std::string r = "field '";
  r += field;
  r += "': ";
  r += simdjson::error_message(ec);
  return fail(std::move(r));
}

// Reads a string-or-null field; null gives an empty view.
simdjson::error_code get_nullable_string(od::value v, std::string_view& out) {
  bool is_null = false;
  if (auto ec = v.is_null().get(is_null); ec) return ec;
  if (is_null) {
    out = {};
    return simdjson::SUCCESS;
  }
  return v.get_string().get(out);
}

simdjson::error_code get_lsn(od::value v, Lsn& out) {
  std::string_view text;
  if (auto ec = get_nullable_string(v, text); ec) return ec;
  if (text.empty()) {
    out = Lsn{};
    return simdjson::SUCCESS;
  }
  auto lsn = Lsn::parse(text);
  if (!lsn) return simdjson::INCORRECT_TYPE;
  out = *lsn;
  return simdjson::SUCCESS;
}

// Parses `columns`, `identity` or `pk` arrays: [{"name":..,"type":..,"typeoid":..,"value":..}].
std::expected<void, DecodeError> parse_columns(od::value v, std::string_view field,
                                               std::vector<Column>& out, bool want_value) {
  od::array arr;
  if (auto ec = v.get_array().get(arr); ec) return fail(field, ec);
  for (auto element : arr) {
    od::object obj;
    if (auto ec = element.get_object().get(obj); ec) return fail(field, ec);
    Column col;
    bool have_value = false;
    for (auto f : obj) {
      std::string_view key;
      if (auto ec = f.unescaped_key().get(key); ec) return fail(field, ec);
      od::value fv;
      if (auto ec = f.value().get(fv); ec) return fail(field, ec);
      if (key == "name") {
        col.name_json = trim_right(fv.raw_json_token());
        if (auto ec = fv.get_string().get(col.name); ec) return fail(field, ec);
      } else if (key == "typeoid") {
        std::uint64_t oid = 0;
        if (auto ec = fv.get_uint64().get(oid); ec) return fail(field, ec);
        col.type_oid = static_cast<std::uint32_t>(oid);
      } else if (key == "value") {
        col.value = trim_right(fv.raw_json_token());
        have_value = true;
      }
      // "type" (include-types) and "optional" are not used: types are resolved by OID.
    }
    if (col.name_json.empty()) return fail(std::string(field) + ": column without a name");
    if (want_value && !have_value) {
      return fail(std::string(field) + ": column '" + std::string(col.name) + "' has no value");
    }
    out.push_back(col);
  }
  return {};
}

}  // namespace

Wal2JsonDecoder::Wal2JsonDecoder() : impl_(new Impl) {}
Wal2JsonDecoder::~Wal2JsonDecoder() {
  delete impl_;
}

std::expected<const Change*, DecodeError> Wal2JsonDecoder::decode(std::string_view line) {
  auto& buf = impl_->buffer;
  const std::size_t need = line.size() + simdjson::SIMDJSON_PADDING;
  if (buf.size() < need) buf.resize(need);
  std::memcpy(buf.data(), line.data(), line.size());
  std::memset(buf.data() + line.size(), 0, simdjson::SIMDJSON_PADDING);

  Change& c = impl_->change;
  c.xid = 0;
  c.lsn = Lsn{};
  c.next_lsn = Lsn{};
  c.timestamp = {};
  c.schema = {};
  c.table = {};
  c.columns.clear();
  c.identity.clear();
  c.pk.clear();
  c.transactional = false;
  c.prefix = {};
  c.content = {};

  od::document doc;
  if (auto ec = impl_->parser.iterate(buf.data(), line.size(), buf.size()).get(doc); ec) {
    return fail("line", ec);
  }
  od::object obj;
  if (auto ec = doc.get_object().get(obj); ec) return fail("line", ec);

  bool have_action = false;
  auto& pk_columns = impl_->pk_scratch;
  pk_columns.clear();
  for (auto f : obj) {
    std::string_view key;
    if (auto ec = f.unescaped_key().get(key); ec) return fail("line", ec);
    od::value v;
    if (auto ec = f.value().get(v); ec) return fail(key, ec);
    if (key == "action") {
      std::string_view a;
      if (auto ec = v.get_string().get(a); ec) return fail(key, ec);
      if (a.size() != 1 || std::strchr("BCIUDTM", a[0]) == nullptr) {
        return fail("unknown action '" + std::string(a) + "'");
      }
      c.action = static_cast<Action>(a[0]);
      have_action = true;
    } else if (key == "xid") {
      bool is_null = false;
      if (auto ec = v.is_null().get(is_null); ec) return fail(key, ec);
      if (!is_null) {
        if (auto ec = v.get_uint64().get(c.xid); ec) return fail(key, ec);
      }
    } else if (key == "lsn") {
      if (auto ec = get_lsn(v, c.lsn); ec) return fail(key, ec);
    } else if (key == "nextlsn") {
      if (auto ec = get_lsn(v, c.next_lsn); ec) return fail(key, ec);
    } else if (key == "timestamp") {
      if (auto ec = get_nullable_string(v, c.timestamp); ec) return fail(key, ec);
    } else if (key == "schema") {
      if (auto ec = v.get_string().get(c.schema); ec) return fail(key, ec);
    } else if (key == "table") {
      if (auto ec = v.get_string().get(c.table); ec) return fail(key, ec);
    } else if (key == "columns") {
      if (auto r = parse_columns(v, key, c.columns, true); !r) return std::unexpected(r.error());
    } else if (key == "identity") {
      if (auto r = parse_columns(v, key, c.identity, true); !r) return std::unexpected(r.error());
    } else if (key == "pk") {
      if (auto r = parse_columns(v, key, pk_columns, false); !r) return std::unexpected(r.error());
    } else if (key == "transactional") {
      if (auto ec = v.get_bool().get(c.transactional); ec) return fail(key, ec);
    } else if (key == "prefix") {
      if (auto ec = v.get_string().get(c.prefix); ec) return fail(key, ec);
    } else if (key == "content") {
      if (auto ec = v.get_string().get(c.content); ec) return fail(key, ec);
    }
  }
  if (!have_action) return fail("line has no 'action'");
  for (const auto& p : pk_columns) c.pk.push_back(p.name);
  return &c;
}

}  // namespace walrelay::decoder
