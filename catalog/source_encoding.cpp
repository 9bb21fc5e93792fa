#include "walrelay/catalog/source_encoding.hpp"

namespace walrelay {

namespace {

constexpr const char* kWayOut =
    "convert the database to UTF8 (dump it and restore it into a database created with ENCODING "
    "'UTF8'), or stream from a UTF8 copy of it";

}  // namespace

std::expected<decoder::LineTranscoder, std::string> transcoder_for_database(
    const std::string& server_encoding, bool allow_sql_ascii) {
  auto transcoder = decoder::LineTranscoder::for_server_encoding(server_encoding);
  if (!transcoder) {
    return std::unexpected("the database's server_encoding is " + server_encoding + ": " +
                           transcoder.error() + ". walrelay publishes UTF-8 only: " + kWayOut);
  }
  if (transcoder->mode() == decoder::TranscodeMode::kValidate && !allow_sql_ascii) {
    return std::unexpected(
        "the database's server_encoding is SQL_ASCII: its text has no defined encoding (any "
        "bytes), so walrelay cannot convert it to UTF-8. Set source.allow_sql_ascii: true to "
        "stream it anyway with every change checked to be UTF-8 (one that is not is a mapping "
        "error under errors.policy), or " +
        std::string(kWayOut));
  }
  return transcoder;
}

std::string describe_transcoding(const decoder::LineTranscoder& transcoder) {
  switch (transcoder.mode()) {
    case decoder::TranscodeMode::kPassThrough:
      return "ok (UTF8)";
    case decoder::TranscodeMode::kValidate:
      return "SQL_ASCII allowed by source.allow_sql_ascii: every change is checked to be UTF-8";
    case decoder::TranscodeMode::kTranscode:
      break;
  }
  return "transcoded from " + transcoder.server_encoding() + " to UTF-8 (iconv " +
         transcoder.iconv_name() + ")";
}

}  // namespace walrelay
