#pragma once

#include <libpq-fe.h>

#include <expected>
#include <string>

namespace walrelay::pg {

/// Sets the client_encoding of an open, idle, blocking connection so that the text walrelay
/// reads from it (catalog names, snapshot rows, query results) is in the same encoding as the
/// wal2json lines after LineTranscoder (PostgreSQL docs §24.3.3 "Automatic Character Set
/// Conversion Between Server and Client"):
/// - a UTF8 database: nothing to do (nothing is sent when client_encoding already is UTF8);
/// - any other real server encoding (LATIN1, WIN1252, EUC_JP, …): UTF8, the server converts;
/// - SQL_ASCII: SQL_ASCII, i.e. the bytes as stored, exactly as the replication stream carries
///   them. The server cannot convert SQL_ASCII; with client_encoding UTF8 it would only check
///   the bytes and fail the whole query on one bad value, so walrelay checks them itself.
/// Reads the server_encoding the server reported at connection start (ParameterStatus).
/// Error: the server refused the setting (libpq's message).
std::expected<void, std::string> use_walrelay_client_encoding(PGconn* conn);

/// The same choice for a connection driven without blocking: the `SET client_encoding` statement
/// to send first, or an empty string when the connection already uses the encoding wanted.
std::string walrelay_client_encoding_sql(PGconn* conn);

}  // namespace walrelay::pg
