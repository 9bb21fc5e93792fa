#pragma once

#include <expected>
#include <string>

#include "walrelay/decoder/line_transcoder.hpp"

namespace walrelay {

/// What walrelay does with a database whose `SHOW server_encoding` is `server_encoding`
/// (docs/operations.md "Database encoding"; shared/cases/CASE-01.md): wal2json writes the
/// database's encoding and walrelay publishes UTF-8 only.
/// - UTF8: a pass-through transcoder.
/// - SQL_ASCII: refused unless `allow_sql_ascii` (source.allow_sql_ascii); then a validating one.
/// - any other server encoding: a transcoder to UTF-8.
/// Error (the caller exits 2): SQL_ASCII without the option, or an encoding that cannot be
/// converted; the message names the encoding and the way out.
std::expected<decoder::LineTranscoder, std::string> transcoder_for_database(
    const std::string& server_encoding, bool allow_sql_ascii);

/// What the transcoder does, for logs and `walrelay check`: `ok (UTF8)`,
/// `transcoded from LATIN1 to UTF-8 (iconv ISO-8859-1)`, or `SQL_ASCII allowed by
/// source.allow_sql_ascii: every change is checked to be UTF-8`.
std::string describe_transcoding(const decoder::LineTranscoder& transcoder);

}  // namespace walrelay
