#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace walrelay::decoder {

/// What the transcoder does with each line.
enum class TranscodeMode : std::uint8_t {
  kPassThrough,  ///< UTF8 database: lines are returned as they are (no work at all)
  kValidate,     ///< SQL_ASCII database: no defined encoding; each line must already be UTF-8
  kTranscode,    ///< any other server encoding: each line is converted to UTF-8 with iconv
};

/// Why a line could not be made UTF-8.
struct TranscodeError {
  std::size_t offset = 0;  ///< byte offset in the line of the first byte that failed
  /// e.g. `byte sequence 0xa4 0x22 at offset 57 is not valid EUC_JP` (never quotes the line).
  std::string reason;
};

/// The glibc iconv name of a PostgreSQL server encoding, as `SHOW server_encoding` prints it
/// (PostgreSQL docs §24.3.1 "Supported Character Sets", Table 24.3, the encodings with
/// "Server = Yes"): LATIN1 → ISO-8859-1, LATIN9 → ISO-8859-15, WIN1252 → CP1252,
/// EUC_JP → EUC-JP, EUC_JIS_2004 → EUC-JISX0213, KOI8R → KOI8-R, … Case-insensitive.
/// nullopt for UTF8 and SQL_ASCII (nothing to convert), MULE_INTERNAL (iconv has no such
/// encoding) and names that are not server encodings.
std::optional<std::string_view> iconv_name_of(std::string_view pg_encoding);

/// Turns wal2json lines, which wal2json writes in the database's encoding and the replication
/// protocol delivers unconverted (client_encoding does not apply to the stream), into UTF-8
/// before they are parsed as JSON.
///
/// Every PostgreSQL server encoding is a superset of ASCII, and wal2json writes non-ASCII bytes
/// unescaped and only inside JSON strings, so a line is converted as a whole and its JSON
/// structure is unchanged. Conversion is exact: a byte sequence that has no UTF-8 equivalent is
/// an error, never replaced or skipped. Memory: one output buffer reused for every line, as large
/// as the largest converted line needed (at most 3 bytes per input byte plus a little).
/// Owned by one thread; not thread-safe. Movable, not copyable (it owns an iconv descriptor).
class LineTranscoder {
 public:
  /// A pass-through transcoder (a UTF8 database).
  LineTranscoder() = default;
  ~LineTranscoder();
  LineTranscoder(LineTranscoder&& other) noexcept;
  LineTranscoder& operator=(LineTranscoder&& other) noexcept;
  LineTranscoder(const LineTranscoder&) = delete;
  LineTranscoder& operator=(const LineTranscoder&) = delete;

  /// The transcoder for a database whose `SHOW server_encoding` is `pg_encoding`: UTF8 →
  /// kPassThrough, SQL_ASCII → kValidate, any other server encoding → kTranscode through iconv
  /// (`iconv_name_of`). Whether SQL_ASCII may be streamed at all is the caller's decision.
  /// Error (reason names the encoding): an encoding without an iconv name (MULE_INTERNAL, or not
  /// a server encoding), or iconv cannot open the conversion to UTF-8 (e.g. glibc's gconv
  /// modules are not installed).
  static std::expected<LineTranscoder, std::string> for_server_encoding(
      std::string_view pg_encoding);

  [[nodiscard]] TranscodeMode mode() const { return mode_; }
  /// The PostgreSQL name it was made for ("UTF8" for a default-constructed one).
  [[nodiscard]] const std::string& server_encoding() const { return server_encoding_; }
  /// The iconv name converted from; empty unless kTranscode.
  [[nodiscard]] const std::string& iconv_name() const { return iconv_name_; }

  /// `line` as UTF-8. kPassThrough: `line` itself. kValidate: `line` itself when it is valid
  /// UTF-8. kTranscode: `line` itself when it is pure ASCII, else the converted text in the
  /// transcoder's buffer, valid until the next call.
  /// Error: kValidate, the line is not well-formed UTF-8; kTranscode, a byte sequence is invalid
  /// in the server encoding or incomplete at the end of the line (iconv's EILSEQ/EINVAL), or has
  /// no exact UTF-8 equivalent. The error's offset and reason say where.
  std::expected<std::string_view, TranscodeError> to_utf8(std::string_view line);

 private:
  std::expected<std::string_view, TranscodeError> convert(std::string_view line);
  void close();

  TranscodeMode mode_ = TranscodeMode::kPassThrough;
  std::string server_encoding_ = "UTF8";
  std::string iconv_name_;
  void* cd_ = nullptr;  // iconv_t, open in kTranscode
  std::string buffer_;  // converted output, reused
};

}  // namespace walrelay::decoder
