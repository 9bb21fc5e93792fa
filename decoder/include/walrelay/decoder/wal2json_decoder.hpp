#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/decoder/change.hpp"

namespace walrelay::decoder {

/// Why a line could not be decoded: a human-readable reason naming the field.
struct DecodeError {
  std::string reason;
};

/// Turns wal2json format-version 2 lines (one XLogData payload each) into `Change` values.
///
/// Uses simdjson's on-demand API with one parser and one padded buffer reused for every line (the
/// DOM API rejects lines with numbers beyond 64 bits: shared/cases/README.md item 11). Values are
/// kept as their raw JSON tokens, so numerics keep every digit.
/// Owned by one thread (the connector's io_context); not thread-safe.
class Wal2JsonDecoder {
 public:
  /// `fast_path` (the default) reads lines of the exact shape wal2json prints with a one-pass
  /// reader and everything else with simdjson; false reads every line with simdjson (tests
  /// compare the two). The results are the same.
  explicit Wal2JsonDecoder(bool fast_path = true);
  ~Wal2JsonDecoder();
  Wal2JsonDecoder(const Wal2JsonDecoder&) = delete;
  Wal2JsonDecoder& operator=(const Wal2JsonDecoder&) = delete;

  /// Decodes one line (no trailing newline needed). On success returns a pointer to a `Change`
  /// owned by the decoder whose views are valid until the next call. Errors: the line is not a
  /// JSON object, `action` is missing or unknown, or a field has the wrong type (reason names it).
  std::expected<const Change*, DecodeError> decode(std::string_view line);

 private:
  struct Impl;
  Impl* impl_;
  bool fast_path_;
};

}  // namespace walrelay::decoder
