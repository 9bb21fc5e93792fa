// Array values: PostgreSQL's array literal as a JSON array (value_mapping.hpp, "arrays").

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <string>
#include <string_view>

#include "value_mapping_internal.hpp"
#include "value_text.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router::values {

namespace {

// Array element text, one buffer per nesting depth (a deque: growing it keeps references valid).
thread_local std::deque<std::string> tl_elements;

// ------------------------------------------------------------------------------------------------
// Arrays: PostgreSQL's array literal (src/backend/utils/adt/arrayfuncs.c, array_out / ReadArrayStr)

class ArrayParser {
 public:
  ArrayParser(std::string& out, std::string_view text, char delim, const Resolved& element,
              std::int32_t typmod, Ctx& ctx, std::string& buf)
      : out_(out),
        s_(text),
        delim_(delim),
        element_(element),
        typmod_(typmod),
        ctx_(ctx),
        buf_(buf) {}

  bool parse() {
    skip_space();
    if (!parse_level()) return false;
    skip_space();
    return pos_ == s_.size() || error("trailing characters after the array");
  }

 private:
  bool error(std::string_view why) { return fail(ctx_, ctx_.type_oid, s_, why); }

  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  bool parse_level() {
    if (pos_ >= s_.size() || s_[pos_] != '{') return error("expected '{'");
    ++pos_;
    out_.push_back('[');
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out_.push_back(']');
      return true;
    }
    bool first = true;
    for (;;) {
      if (!first) out_.push_back(',');
      first = false;
      skip_space();
      if (pos_ < s_.size() && s_[pos_] == '{') {
        if (!parse_level()) return false;
      } else if (!parse_element()) {
        return false;
      }
      skip_space();
      if (pos_ >= s_.size()) return error("unterminated array");
      const char c = s_[pos_++];
      if (c == '}') break;
      if (c != delim_) return error("expected a delimiter or '}'");
    }
    out_.push_back(']');
    return true;
  }

  bool parse_element() {
    buf_.clear();
    bool quoted = false;
    bool escaped = false;
    if (pos_ < s_.size() && s_[pos_] == '"') {
      quoted = true;
      ++pos_;
      for (;;) {
        if (pos_ >= s_.size()) return error("unterminated quoted element");
        const char c = s_[pos_++];
        if (c == '"') break;
        if (c == '\\') {
          if (pos_ >= s_.size()) return error("unterminated quoted element");
          buf_.push_back(s_[pos_++]);
        } else {
          buf_.push_back(c);
        }
      }
    } else {
      // Unquoted: up to the delimiter or '}', backslash escapes honoured, surrounding white
      // space dropped (array_in ignores it; array_out never writes it).
      std::size_t keep = 0;  // buf_ length up to the last escaped or non-space character
      while (pos_ < s_.size()) {
        const char c = s_[pos_];
        if (c == delim_ || c == '}') break;
        if (c == '{' || c == '"') return error("unexpected character in an unquoted element");
        ++pos_;
        if (c == '\\') {
          if (pos_ >= s_.size()) return error("unterminated element");
          buf_.push_back(s_[pos_++]);
          escaped = true;
          keep = buf_.size();
        } else {
          buf_.push_back(c);
          if (!is_space(c)) keep = buf_.size();
        }
      }
      buf_.resize(keep);
      if (buf_.empty() && !escaped) return error("empty unquoted element");
    }
    if (!quoted && !escaped && iequals(buf_, "NULL")) {
      out_ += "null";
      return true;
    }
    if (element_.kind == Kind::kArray) {
      // A domain over an array used as an element: parse the inner literal with its own buffer.
      ++ctx_.depth;
      const bool ok = map_scalar(out_, buf_, false, element_, typmod_, ctx_);
      --ctx_.depth;
      return ok;
    }
    return map_scalar(out_, buf_, false, element_, typmod_, ctx_);
  }

  std::string& out_;
  std::string_view s_;
  std::size_t pos_ = 0;
  char delim_;
  Resolved element_;
  std::int32_t typmod_;
  Ctx& ctx_;
  std::string& buf_;
};

}  // namespace

bool map_array(std::string& out, std::string_view text, const Resolved& r, std::int32_t typmod,
               Ctx& ctx) {
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i < text.size() && text[i] == '[') {
    // A dimension decoration ("[0:2]={7,8,9}": a lower bound other than 1): the elements as a JSON
    // array like any other (a column's JSON type must not change from row to row; Debezium does
    // the same), the bounds dropped (docs/events.md).
    const auto eq = text.find('=', i);
    if (eq == std::string_view::npos) return fail(ctx, r.oid, text, "malformed array bounds");
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      spdlog::warn(
          "an array value with explicit bounds ({}) is published as a JSON array without its "
          "bounds, as Debezium does (said once)",
          text.substr(i, eq - i));
    }
    text = text.substr(eq + 1);
    i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
  }
  if (i >= text.size() || text[i] != '{') {
    // A vector type that is not a brace literal (int2vector, oidvector): the PostgreSQL text as a
    // JSON string.
    json::append_string(out, text);
    return true;
  }
  const Resolved element = classify(r.element, ctx.types);
  // typdelim of the element type (a domain carries its base type's delimiter in pg_type).
  const TypeInfo* et = ctx.types.find(r.element);
  if (et == nullptr) et = ctx.types.find(element.oid);
  const char delim = et != nullptr ? et->delimiter : ',';
  auto& bufs = tl_elements;
  const auto depth = static_cast<std::size_t>(ctx.depth);
  if (bufs.size() <= depth) bufs.resize(depth + 1);
  std::string& buf = bufs[depth];
  // An array of a domain: the column has no modifier, the domain carries its base type's.
  if (typmod < 0 && element.oid != r.element) typmod = ctx.types.domain_typmod(r.element);
  ArrayParser parser(out, text, delim, element, typmod, ctx, buf);
  return parser.parse();
}

}  // namespace walrelay::router::values
