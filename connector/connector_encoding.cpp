// The database's encoding (shared/cases/CASE-01.md): wal2json writes every value in it, and the
// replication protocol does not convert, so walrelay reads server_encoding before streaming and
// turns each line into UTF-8 (or checks it, for SQL_ASCII) before it is parsed.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "walrelay/catalog/source_encoding.hpp"
#include "walrelay/connector/connector.hpp"
#include "walrelay/decoder/utf8.hpp"

namespace walrelay {

Connector::Outcome Connector::check_encoding() {
  // On a replication connection this is the encoding of the connection's database: the one its
  // slots decode in.
  auto shown = stream_->query("SHOW server_encoding");
  if (!shown || shown->empty() || !(*shown)[0][0]) {
    reason_ = "cannot read server_encoding: " + (shown ? std::string("no value") : shown.error());
    return Outcome::kRetry;
  }
  const std::string encoding = *(*shown)[0][0];
  auto transcoder = transcoder_for_database(encoding, cfg_.source.allow_sql_ascii);
  if (!transcoder) {
    reason_ = transcoder.error();
    return fatal(ExitCode::kConfigError);
  }
  transcoder_ = std::move(*transcoder);
  if (encoding != logged_encoding_) {
    logged_encoding_ = encoding;
    if (transcoder_.mode() == decoder::TranscodeMode::kPassThrough) {
      spdlog::debug("database {}: server_encoding UTF8", system_.dbname);
    } else {
      spdlog::info("database {}: server_encoding {}: {}", system_.dbname, encoding,
                   describe_transcoding(transcoder_));
    }
  }
  return Outcome::kStreaming;
}

void Connector::on_unconvertible_line(const pg::XLogData& x, const decoder::TranscodeError& error) {
  // What the line is about, read from a copy whose bad bytes are U+FFFD: for the message and
  // the dead-letter headers only, never published.
  std::string source;
  std::string about;
  Lsn lsn = x.data_start;
  const std::string readable = decoder::utf8_for_message(x.data);
  if (auto decoded = decoder_.decode(readable); decoded) {
    const decoder::Change& c = **decoded;
    if (!c.lsn.is_zero()) lsn = c.lsn;
    if (!c.table.empty()) {
      source = std::string(c.schema) + "." + std::string(c.table);
      about = ", table " + source;
      // The key as the change carries it: the primary key's values (new row, else old key).
      std::string key;
      for (std::string_view name : c.pk) {
        for (const auto* image : {&c.columns, &c.identity}) {
          const auto it =
              std::find_if(image->begin(), image->end(),
                           [&](const decoder::Column& col) { return col.name == name; });
          if (it == image->end()) continue;
          key += std::string(key.empty() ? "" : ",") + std::string(it->name_json) + ":" +
                 std::string(it->value);
          break;
        }
      }
      if (!key.empty()) about += ", key {" + key + "}";
    } else if (c.action == decoder::Action::kMessage) {
      source = "message:" + std::string(c.prefix);
      about = ", logical message with prefix " + std::string(c.prefix);
    }
  }
  const bool sql_ascii = transcoder_.mode() == decoder::TranscodeMode::kValidate;
  std::string reason = "wal2json line at LSN " + lsn.to_string() + about + " is not " +
                       (sql_ascii ? std::string("UTF-8 (server_encoding SQL_ASCII, allowed by "
                                                "source.allow_sql_ascii)")
                                  : "convertible from server_encoding " +
                                        transcoder_.server_encoding() + " to UTF-8") +
                       ": " + error.reason;
  handle_unmappable(reason, x.data, nullptr, source);
}

}  // namespace walrelay
