#include "walrelay/decoder/line_transcoder.hpp"

#include <iconv.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "walrelay/decoder/utf8.hpp"

namespace walrelay::decoder {

namespace {

// PostgreSQL docs §24.3.1 Table 24.3, the server encodings other than UTF8, SQL_ASCII and
// MULE_INTERNAL, with the names glibc's iconv knows them by (`iconv -l`).
constexpr std::pair<std::string_view, std::string_view> kIconvNames[] = {
    {"EUC_CN", "EUC-CN"},         {"EUC_JP", "EUC-JP"},         {"EUC_JIS_2004", "EUC-JISX0213"},
    {"EUC_KR", "EUC-KR"},         {"EUC_TW", "EUC-TW"},         {"ISO_8859_5", "ISO-8859-5"},
    {"ISO_8859_6", "ISO-8859-6"}, {"ISO_8859_7", "ISO-8859-7"}, {"ISO_8859_8", "ISO-8859-8"},
    {"KOI8R", "KOI8-R"},          {"KOI8U", "KOI8-U"},          {"LATIN1", "ISO-8859-1"},
    {"LATIN2", "ISO-8859-2"},     {"LATIN3", "ISO-8859-3"},     {"LATIN4", "ISO-8859-4"},
    {"LATIN5", "ISO-8859-9"},     {"LATIN6", "ISO-8859-10"},    {"LATIN7", "ISO-8859-13"},
    {"LATIN8", "ISO-8859-14"},    {"LATIN9", "ISO-8859-15"},    {"LATIN10", "ISO-8859-16"},
    {"WIN866", "CP866"},          {"WIN874", "CP874"},          {"WIN1250", "CP1250"},
    {"WIN1251", "CP1251"},        {"WIN1252", "CP1252"},        {"WIN1253", "CP1253"},
    {"WIN1254", "CP1254"},        {"WIN1255", "CP1255"},        {"WIN1256", "CP1256"},
    {"WIN1257", "CP1257"},        {"WIN1258", "CP1258"},
};

const iconv_t kNoDescriptor = reinterpret_cast<iconv_t>(-1);

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Eight bytes at a time: most lines of a non-UTF8 database are pure ASCII.
bool is_ascii(std::string_view s) {
  constexpr std::uint64_t kHighBits = 0x8080808080808080ull;
  std::uint64_t any = 0;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, s.data() + i, 8);
    any |= word;
  }
  for (; i < s.size(); ++i) any |= static_cast<unsigned char>(s[i]);
  return (any & kHighBits) == 0;
}

}  // namespace

std::optional<std::string_view> iconv_name_of(std::string_view pg_encoding) {
  const std::string name = upper(pg_encoding);
  for (const auto& [pg, iconv] : kIconvNames) {
    if (pg == name) return iconv;
  }
  return std::nullopt;
}

LineTranscoder::~LineTranscoder() {
  close();
}

LineTranscoder::LineTranscoder(LineTranscoder&& other) noexcept
    : mode_(other.mode_),
      server_encoding_(std::move(other.server_encoding_)),
      iconv_name_(std::move(other.iconv_name_)),
      cd_(std::exchange(other.cd_, nullptr)),
      buffer_(std::move(other.buffer_)) {
  other.mode_ = TranscodeMode::kPassThrough;
}

LineTranscoder& LineTranscoder::operator=(LineTranscoder&& other) noexcept {
  if (this != &other) {
    close();
    mode_ = std::exchange(other.mode_, TranscodeMode::kPassThrough);
    server_encoding_ = std::move(other.server_encoding_);
    iconv_name_ = std::move(other.iconv_name_);
    cd_ = std::exchange(other.cd_, nullptr);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

void LineTranscoder::close() {
  if (cd_ != nullptr) {
    iconv_close(static_cast<iconv_t>(cd_));
    cd_ = nullptr;
  }
}

std::expected<LineTranscoder, std::string> LineTranscoder::for_server_encoding(
    std::string_view pg_encoding) {
  LineTranscoder t;
  t.server_encoding_ = upper(pg_encoding);
  if (t.server_encoding_ == "UTF8") return t;
  if (t.server_encoding_ == "SQL_ASCII") {
    t.mode_ = TranscodeMode::kValidate;
    return t;
  }
  const auto name = iconv_name_of(t.server_encoding_);
  if (!name) {
    return std::unexpected("server encoding " + t.server_encoding_ +
                           " has no iconv equivalent to convert from (PostgreSQL docs §24.3.1 "
                           "lists the server encodings)");
  }
  const std::string from(*name);
  const iconv_t cd = iconv_open("UTF-8", from.c_str());
  if (cd == kNoDescriptor) {
    return std::unexpected("iconv cannot convert server encoding " + t.server_encoding_ + " (" +
                           from + ") to UTF-8: " + std::strerror(errno) +
                           " (are glibc's gconv modules installed?)");
  }
  t.mode_ = TranscodeMode::kTranscode;
  t.iconv_name_ = from;
  t.cd_ = cd;
  return t;
}

std::expected<std::string_view, TranscodeError> LineTranscoder::to_utf8(std::string_view line) {
  switch (mode_) {
    case TranscodeMode::kPassThrough:
      return line;
    case TranscodeMode::kValidate:
      if (const auto bad = first_invalid_utf8(line)) {
        return std::unexpected(TranscodeError{*bad, "byte sequence " + hex_bytes(line, *bad) +
                                                        " at offset " + std::to_string(*bad) +
                                                        " is not valid UTF-8"});
      }
      return line;
    case TranscodeMode::kTranscode:
      break;
  }
  // ASCII means the same in every server encoding: nothing to convert.
  if (is_ascii(line)) return line;
  return convert(line);
}

std::expected<std::string_view, TranscodeError> LineTranscoder::convert(std::string_view line) {
  const auto cd = static_cast<iconv_t>(cd_);
  iconv(cd, nullptr, nullptr, nullptr, nullptr);  // back to the initial shift state
  // UTF-8 needs at most 3 bytes per input byte for every server encoding; E2BIG grows it anyway.
  const std::size_t want = line.size() * 3 + 16;
  if (buffer_.size() < want) buffer_.resize(want);
  char* in = const_cast<char*>(line.data());  // iconv's signature; it never writes the input
  std::size_t in_left = line.size();
  std::size_t used = 0;
  bool flushing = false;
  while (true) {
    char* out = buffer_.data() + used;
    std::size_t out_left = buffer_.size() - used;
    // After the input, a call without input writes what a stateful decoder still holds.
    const std::size_t r = flushing ? iconv(cd, nullptr, nullptr, &out, &out_left)
                                   : iconv(cd, &in, &in_left, &out, &out_left);
    used = static_cast<std::size_t>(out - buffer_.data());
    const std::size_t offset = static_cast<std::size_t>(in - line.data());
    if (r == static_cast<std::size_t>(-1)) {
      const int err = errno;
      if (err == E2BIG) {
        buffer_.resize(buffer_.size() * 2);
        continue;
      }
      const std::string what =
          err == EINVAL ? " is incomplete at the end of the line in " : " is not valid ";
      return std::unexpected(TranscodeError{offset, "byte sequence " + hex_bytes(line, offset) +
                                                        " at offset " + std::to_string(offset) +
                                                        what + server_encoding_});
    }
    if (r > 0) {
      // Irreversible conversions: not an exact one (glibc does not do this to UTF-8 unless told
      // to transliterate, but an exact copy is the contract).
      return std::unexpected(TranscodeError{offset, "the line has " + std::to_string(r) +
                                                        " character(s) of " + server_encoding_ +
                                                        " without an exact UTF-8 equivalent"});
    }
    if (!flushing) {
      flushing = true;
      continue;
    }
    return std::string_view(buffer_.data(), used);
  }
}

}  // namespace walrelay::decoder
