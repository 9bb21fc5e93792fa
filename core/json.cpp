#include "walrelay/core/json.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

namespace walrelay::json {

namespace {

// The bytes of w (little endian) that need escaping in a JSON string (below 0x20, '"', '\\') have
// their top bit set in the result; the lowest set byte is always right (a borrow can only flag
// bytes above a real hit). Bytes >= 0x80 are never flagged.
std::uint64_t needs_escape8(std::uint64_t w) {
  static_assert(std::endian::native == std::endian::little);
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  const std::uint64_t quote = w ^ (kOnes * static_cast<unsigned char>('"'));
  const std::uint64_t backslash = w ^ (kOnes * static_cast<unsigned char>('\\'));
  return (((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) |
          ((backslash - kOnes) & ~backslash)) &
         kHigh;
}

// The offset of the first byte of text[from..] that needs escaping, or text.size(): eight bytes
// a step, then byte by byte.
std::size_t next_escape(std::string_view text, std::size_t from) {
  std::size_t i = from;
  while (text.size() - i >= 8) {
    std::uint64_t chunk = 0;
    std::memcpy(&chunk, text.data() + i, 8);
    if (const std::uint64_t hit = needs_escape8(chunk); hit != 0) {
      return i + static_cast<std::size_t>(std::countr_zero(hit) / 8);
    }
    i += 8;
  }
  for (; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == '"' || c == '\\') return i;
  }
  return i;
}

}  // namespace

void append_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + text.size() + 2);
  out.push_back('"');
  std::size_t run = 0;  // start of the current run of bytes that need no escaping
  for (std::size_t i = next_escape(text, 0); i < text.size(); i = next_escape(text, run)) {
    const auto c = static_cast<unsigned char>(text[i]);
    out.append(text.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
  }
  out.append(text.data() + run, text.size() - run);
  out.push_back('"');
}

namespace {

bool parse_hex4(std::string_view s, std::size_t pos, std::uint32_t& out) {
  if (pos + 4 > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + 4; ++i) {
    const char c = s[i];
    std::uint32_t d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<std::uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<std::uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<std::uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
    out = (out << 4) | d;
  }
  return true;
}

// The bytes of w (little endian) that are a backslash have their top bit set in the result; the
// lowest set byte is always right (a borrow can only flag bytes above a real hit).
std::uint64_t backslash8(std::uint64_t w) {
  static_assert(std::endian::native == std::endian::little);
  constexpr std::uint64_t kOnes = 0x0101010101010101ull;
  const std::uint64_t v = w ^ (kOnes * static_cast<unsigned char>('\\'));
  return (v - kOnes) & ~v & 0x8080808080808080ull;
}

// Writes cp as UTF-8 at w (1 to 4 bytes) and returns the end.
char* write_utf8(char* w, std::uint32_t cp) {
  if (cp < 0x80) {
    *w++ = static_cast<char>(cp);
  } else if (cp < 0x800) {
    *w++ = static_cast<char>(0xC0 | (cp >> 6));
    *w++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *w++ = static_cast<char>(0xE0 | (cp >> 12));
    *w++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *w++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *w++ = static_cast<char>(0xF0 | (cp >> 18));
    *w++ = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *w++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *w++ = static_cast<char>(0x80 | (cp & 0x3F));
  }
  return w;
}

}  // namespace

bool unescape_string(std::string_view token, std::string& out) {
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return false;
  const std::string_view s = token.substr(1, token.size() - 2);
  // Written in place: the text never grows by unescaping (a 6-byte \uXXXX gives at most 3 bytes,
  // a 12-byte surrogate pair 4), so out is sized once and cut to what was written. A jsonb payload
  // is short runs between its escaped quotes: found and copied eight bytes a step.
  bool ok = true;
  const std::size_t base = out.size();
  out.resize(base + s.size());
  {
    char* w = out.data() + base;
    std::size_t i = 0;
    while (i < s.size()) {
      // Eight bytes a step to the next backslash, each step copied whole: w never runs ahead of
      // i, so an 8-byte store at w stays inside what i + 8 <= s.size() leaves of out.
      while (s.size() - i >= 8) {
        std::uint64_t chunk = 0;
        std::memcpy(&chunk, s.data() + i, 8);
        std::memcpy(w, &chunk, 8);
        const std::uint64_t hit = backslash8(chunk);
        if (hit == 0) {
          w += 8;
          i += 8;
          continue;
        }
        const auto run = static_cast<std::size_t>(std::countr_zero(hit) / 8);
        w += run;
        i += run;
        break;
      }
      while (i < s.size() && s[i] != '\\') *w++ = s[i++];
      if (i == s.size()) break;
      ++i;
      if (i >= s.size()) {
        ok = false;
        break;
      }
      switch (s[i]) {
        case '"':
        case '\\':
        case '/':
          *w++ = s[i];
          break;
        case 'b':
          *w++ = '\b';
          break;
        case 'f':
          *w++ = '\f';
          break;
        case 'n':
          *w++ = '\n';
          break;
        case 'r':
          *w++ = '\r';
          break;
        case 't':
          *w++ = '\t';
          break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!parse_hex4(s, i + 1, cp)) {
            ok = false;
            break;
          }
          i += 4;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t lo = 0;
            if (i + 2 >= s.size() || s[i + 1] != '\\' || s[i + 2] != 'u' ||
                !parse_hex4(s, i + 3, lo) || lo < 0xDC00 || lo > 0xDFFF) {
              ok = false;
              break;
            }
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            ok = false;
            break;
          }
          w = write_utf8(w, cp);
          break;
        }
        default:
          ok = false;
      }
      if (!ok) break;
      ++i;
    }
    out.resize(static_cast<std::size_t>(w - out.data()));
  }
  return ok;
}

namespace {

// True when a byte of `w` is >= 0xF0 (all four top bits set): those bytes are 0 in
// (w & F0..) ^ F0.., and (v - 01..) & ~v & 80.. is non-zero exactly when v has a zero byte.
constexpr bool has_lead4(std::uint64_t w) {
  constexpr std::uint64_t kF0 = 0xF0F0F0F0F0F0F0F0ull;
  const std::uint64_t v = (w & kF0) ^ kF0;
  return ((v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull) != 0;
}

// The first position at or after `i` of a byte >= 0xF0 (a 4-byte UTF-8 lead byte), or `n`.
// Sixteen bytes a step: JSON text is mostly ASCII, and almost never has such a byte.
std::size_t find_lead4(const char* p, std::size_t i, std::size_t n) {
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  for (; i + 16 <= n; i += 16) {
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    std::memcpy(&a, p + i, 8);
    std::memcpy(&b, p + i + 8, 8);
    if (((a | b) & kHigh) != 0 && (has_lead4(a) || has_lead4(b))) break;
  }
  while (i < n && static_cast<unsigned char>(p[i]) < 0xF0) ++i;
  return i;
}

}  // namespace

void escape_supplementary(std::string& json, std::size_t from) {
  const std::size_t n = json.size();
  std::size_t i = find_lead4(json.data(), std::min(from, n), n);
  if (i >= n) return;
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(n + 16);
  out.append(json, 0, i);
  while (i < n) {
    const auto b0 = static_cast<unsigned char>(json[i]);
    if (b0 >= 0xF0 && b0 <= 0xF4 && i + 3 < n) {
      const auto b1 = static_cast<unsigned char>(json[i + 1]);
      const auto b2 = static_cast<unsigned char>(json[i + 2]);
      const auto b3 = static_cast<unsigned char>(json[i + 3]);
      if ((b1 & 0xC0) == 0x80 && (b2 & 0xC0) == 0x80 && (b3 & 0xC0) == 0x80) {
        const std::uint32_t cp = (static_cast<std::uint32_t>(b0 & 0x07) << 18) |
                                 (static_cast<std::uint32_t>(b1 & 0x3F) << 12) |
                                 (static_cast<std::uint32_t>(b2 & 0x3F) << 6) | (b3 & 0x3F);
        if (cp >= 0x10000 && cp <= 0x10FFFF) {
          const std::uint32_t v = cp - 0x10000;
          for (const std::uint32_t unit : {0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)}) {
            out += "\\u";
            out.push_back(kHex[(unit >> 12) & 0xF]);
            out.push_back(kHex[(unit >> 8) & 0xF]);
            out.push_back(kHex[(unit >> 4) & 0xF]);
            out.push_back(kHex[unit & 0xF]);
          }
          i += 4;
          continue;
        }
      }
    }
    out.push_back(json[i]);
    ++i;
  }
  json.swap(out);
}

void append_string_or_null(std::string& out, const std::optional<std::string>& text) {
  if (text) {
    append_string(out, *text);
  } else {
    out += "null";
  }
}

void append_number_or_null(std::string& out, const std::optional<std::string>& number) {
  out += number ? *number : std::string_view("null");
}

}  // namespace walrelay::json
