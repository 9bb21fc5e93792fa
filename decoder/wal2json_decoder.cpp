#include "walrelay/decoder/wal2json_decoder.hpp"

#include <simdjson.h>

#include <array>
#include <bit>
#include <cstdint>
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

// ---- fast path ---------------------------------------------------------------------------------
//
// wal2json prints every format-version 2 line in one shape: an object without white space, known
// keys, names, LSNs and timestamps without escapes, integers for xid and typeoid. FastLine reads
// exactly that shape, in one pass over the padded buffer, into the same Change the simdjson path
// makes (the same views into the buffer). At anything else (white space, an unknown key, an
// escape where the text would need unescaping, a number simdjson might read differently, a
// missing field, bytes that are not UTF-8) it gives up, and the line is decoded with simdjson,
// which also words the errors: the fast path only ever takes lines whose result both paths agree
// on (tests/unit/decoder_test.cpp compares them).
class FastLine {
 public:
  FastLine(const char* begin, const char* end, Change& c, std::vector<Column>& pk)
      : p_(begin), end_(end), c_(c), pk_(pk) {}

  bool parse() {
    if (!take('{')) return false;
    bool have_action = false;
    do {
      if (!member(have_action)) return false;
    } while (take(','));
    return take('}') && p_ == end_ && have_action;
  }

 private:
  bool take(char ch) {
    if (p_ < end_ && *p_ == ch) {
      ++p_;
      return true;
    }
    return false;
  }

  // The high bit of each of the eight bytes of `w` (little endian) that is a quote, a backslash
  // or below 0x20, and maybe of bytes above such a byte (the has-zero-byte and has-less-than
  // tests of "Bit Twiddling Hacks": a borrow only runs upwards, so the lowest bit set is exact).
  static std::uint64_t special8(std::uint64_t w) {
    constexpr std::uint64_t kOnes = 0x0101010101010101ull;
    constexpr std::uint64_t kHigh = 0x8080808080808080ull;
    const std::uint64_t quote = w ^ (kOnes * '"');
    const std::uint64_t backslash = w ^ (kOnes * '\\');
    return (((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) |
            ((w - kOnes * 0x20) & ~w)) &
           kHigh;
  }

  // A string token at p_: `inner` is what is between its quotes; `escaped` when it has a
  // backslash. Control characters (which simdjson rejects) and an unterminated string: false.
  bool string(std::string_view& inner, bool& escaped) {
    const char* p = p_;
    if (p >= end_ || *p != '"') return false;
    const char* start = ++p;
    escaped = false;
    for (;;) {
      // Eight bytes a step to the next special byte. The reads stay inside the buffer's padding:
      // its zeros count as control characters, so no step passes end_.
      std::uint64_t w = 0;
      std::memcpy(&w, p, 8);
      static_assert(std::endian::native == std::endian::little);
      if (const std::uint64_t special = special8(w); special == 0) {
        p += 8;
        continue;
      } else {
        p += std::countr_zero(special) / 8;
      }
      if (p >= end_) return false;
      const auto ch = static_cast<unsigned char>(*p);
      if (ch == '"') break;
      if (ch < 0x20) return false;
      if (ch == '\\') {
        // The escaped character (a \uXXXX's digits are plain characters); a control character
        // there is as unescaped as anywhere else (simdjson rejects it).
        if (static_cast<unsigned char>(p[1]) < 0x20) return false;
        escaped = true;
        p += 2;
      } else {
        ++p;
      }
    }
    inner = std::string_view(start, static_cast<std::size_t>(p - start));
    p_ = p + 1;
    return true;
  }

  // A string without escapes: its text is its bytes.
  bool text(std::string_view& out) {
    bool escaped = false;
    return string(out, escaped) && !escaped;
  }

  bool is_null() {
    if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
      p_ += 4;
      return true;
    }
    return false;
  }

  // A string or null without escapes (null: empty).
  bool nullable_text(std::string_view& out) {
    if (is_null()) {
      out = {};
      return true;
    }
    return text(out);
  }

  bool lsn(Lsn& out) {
    std::string_view t;
    if (!nullable_text(t)) return false;
    if (t.empty()) {
      out = Lsn{};
      return true;
    }
    const auto parsed = Lsn::parse(t);
    if (!parsed) return false;
    out = *parsed;
    return true;
  }

  // An unsigned integer of at most 19 digits without a leading zero (what get_uint64 reads the
  // same), followed by the next member or the end of the object.
  bool uint(std::uint64_t& out) {
    const char* p = p_;
    std::uint64_t v = 0;
    while (p < end_ && *p >= '0' && *p <= '9') v = v * 10 + static_cast<std::uint64_t>(*p++ - '0');
    const auto n = p - p_;
    if (n == 0 || n > 19 || (n > 1 && *p_ == '0')) return false;
    out = v;
    p_ = p;
    return p < end_ && (*p == ',' || *p == '}');
  }

  // A value's raw token: a string token (escapes kept) or a bare token (letters, digits, `.+-`)
  // up to the next member.
  bool value(std::string_view& token) {
    const char* start = p_;
    if (p_ < end_ && *p_ == '"') {
      std::string_view inner;
      bool escaped = false;
      if (!string(inner, escaped)) return false;
    } else {
      const char* p = p_;
      while (p < end_ && kBare[static_cast<unsigned char>(*p)]) ++p;
      if (p == start) return false;
      p_ = p;
    }
    token = std::string_view(start, static_cast<std::size_t>(p_ - start));
    return p_ < end_ && (*p_ == ',' || *p_ == '}');
  }

  static constexpr std::array<bool, 256> kBare = [] {
    std::array<bool, 256> t{};
    for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = true;
    for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = true;
    t['.'] = t['-'] = t['+'] = true;
    return t;
  }();

  // Whether the key at p_ is `lit` (`"name":`, quotes and colon included); moves past it. A
  // key wal2json never escapes; the read stays inside the buffer's padding, whose zeros match no
  // literal past end_.
  template <std::size_t N>
  bool key(const char (&lit)[N]) {
    static_assert(N - 1 <= 16 && 16 < simdjson::SIMDJSON_PADDING);
    if (std::memcmp(p_, lit, N - 1) != 0) return false;
    p_ += N - 1;
    return true;
  }

  // `[{"name":..,"type":..,"typeoid":..,"value":..,"optional":..}, ...]`
  bool columns(std::vector<Column>& out, bool want_value) {
    if (!take('[')) return false;
    if (take(']')) return true;
    do {
      if (!take('{')) return false;
      Column col;
      bool have_value = false;
      do {
        if (p_ >= end_) return false;
        if (key("\"name\":")) {
          const char* start = p_;
          if (!text(col.name)) return false;
          col.name_json = std::string_view(start, static_cast<std::size_t>(p_ - start));
        } else if (key("\"typeoid\":")) {
          std::uint64_t oid = 0;
          if (!uint(oid)) return false;
          col.type_oid = static_cast<std::uint32_t>(oid);
        } else if (key("\"value\":")) {
          if (!value(col.value)) return false;
          have_value = true;
        } else if (key("\"type\":")) {
          std::string_view ignored;
          bool escaped = false;
          if (!string(ignored, escaped)) return false;
        } else if (key("\"optional\":")) {
          std::string_view ignored;
          if (!value(ignored)) return false;
        } else {
          return false;
        }
      } while (take(','));
      if (!take('}') || col.name_json.empty() || (want_value && !have_value)) return false;
      out.push_back(col);
    } while (take(','));
    return take(']');
  }

  // One member of the line's object.
  bool member(bool& have_action) {
    if (p_ + 1 >= end_ || *p_ != '"') return false;
    switch (p_[1]) {
      case 'a':
        if (key("\"action\":")) {
          std::string_view a;
          if (!text(a) || a.size() != 1 || std::strchr("BCIUDTM", a[0]) == nullptr) return false;
          c_.action = static_cast<Action>(a[0]);
          have_action = true;
          return true;
        }
        return false;
      case 'x':
        return key("\"xid\":") && (is_null() ? (c_.xid = 0, true) : uint(c_.xid));
      case 't':
        if (key("\"timestamp\":")) return nullable_text(c_.timestamp);
        if (key("\"table\":")) return text(c_.table);
        if (key("\"transactional\":")) {
          if (end_ - p_ >= 4 && std::memcmp(p_, "true", 4) == 0) {
            p_ += 4;
            c_.transactional = true;
          } else if (end_ - p_ >= 5 && std::memcmp(p_, "false", 5) == 0) {
            p_ += 5;
            c_.transactional = false;
          } else {
            return false;
          }
          return p_ < end_ && (*p_ == ',' || *p_ == '}');
        }
        return false;
      case 'l':
        return key("\"lsn\":") && lsn(c_.lsn);
      case 'n':
        return key("\"nextlsn\":") && lsn(c_.next_lsn);
      case 's':
        return key("\"schema\":") && text(c_.schema);
      case 'c':
        if (key("\"columns\":")) return columns(c_.columns, true);
        return key("\"content\":") && text(c_.content);
      case 'p':
        if (key("\"pk\":")) return columns(pk_, false);
        return key("\"prefix\":") && text(c_.prefix);
      case 'i':
        return key("\"identity\":") && columns(c_.identity, true);
      default:
        return false;
    }
  }

  const char* p_;
  const char* end_;
  Change& c_;
  std::vector<Column>& pk_;
};

void reset(Change& c) {
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
}

}  // namespace

Wal2JsonDecoder::Wal2JsonDecoder(bool fast_path) : impl_(new Impl), fast_path_(fast_path) {}
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
  auto& pk_columns = impl_->pk_scratch;
  if (fast_path_ && simdjson::validate_utf8(buf.data(), line.size())) {
    reset(c);
    pk_columns.clear();
    const Action action_before = c.action;
    if (FastLine(buf.data(), buf.data() + line.size(), c, pk_columns).parse()) {
      for (const auto& p : pk_columns) c.pk.push_back(p.name);
      return &c;
    }
    c.action = action_before;  // as the simdjson path leaves it until it reads `action`
  }
  reset(c);

  od::document doc;
  if (auto ec = impl_->parser.iterate(buf.data(), line.size(), buf.size()).get(doc); ec) {
    return fail("line", ec);
  }
  od::object obj;
  if (auto ec = doc.get_object().get(obj); ec) return fail("line", ec);

  bool have_action = false;
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
