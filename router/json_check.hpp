#pragma once

// JSON validation the outbox needs (private to walrelay_router): a text payload must hold JSON,
// a logical message's content must be one JSON object.

#include <simdjson.h>

#include <string>
#include <string_view>

namespace walrelay::router::detail {

/// True when `text` is one JSON document (RFC 8259; a scalar counts) with nothing but whitespace
/// after it. Numbers are checked by the grammar, never converted (30-digit numbers and 1e400
/// pass, as PostgreSQL's json type accepts them). `padded` is scratch space.
bool is_valid_json(std::string_view text, std::string& padded);

/// True when nothing but whitespace follows the root value (simdjson 3.0.1 has no at_end() on a
/// document: current_location() reports OUT_OF_BOUNDS there).
bool at_document_end(simdjson::ondemand::document& doc);

}  // namespace walrelay::router::detail
