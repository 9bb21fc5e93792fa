#pragma once
// Internal to walrelay_router: base64 as Kafka Connect's JsonConverter writes BYTES.

#include <cstdint>
#include <string>

namespace walrelay::router::detail {

// Base64 (RFC 4648 §4, standard alphabet with padding: java.util.Base64.getEncoder(), which Kafka
// Connect's JsonConverter uses for BYTES and for Decimal with decimal.format=BASE64)

inline constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Streams bytes into base64 text without buffering the input.
class Base64Writer {
 public:
  explicit Base64Writer(std::string& out) : out_(out) {}
  void put(std::uint8_t b) {
    acc_ = (acc_ << 8) | b;
    if (++n_ == 3) {
      out_.push_back(kB64[(acc_ >> 18) & 0x3F]);
      out_.push_back(kB64[(acc_ >> 12) & 0x3F]);
      out_.push_back(kB64[(acc_ >> 6) & 0x3F]);
      out_.push_back(kB64[acc_ & 0x3F]);
      acc_ = 0;
      n_ = 0;
    }
  }
  void finish() {
    if (n_ == 1) {
      out_.push_back(kB64[(acc_ >> 2) & 0x3F]);
      out_.push_back(kB64[(acc_ << 4) & 0x3F]);
      out_ += "==";
    } else if (n_ == 2) {
      out_.push_back(kB64[(acc_ >> 10) & 0x3F]);
      out_.push_back(kB64[(acc_ >> 4) & 0x3F]);
      out_.push_back(kB64[(acc_ << 2) & 0x3F]);
      out_.push_back('=');
    }
    acc_ = 0;
    n_ = 0;
  }

 private:
  std::string& out_;
  std::uint32_t acc_ = 0;
  int n_ = 0;
};

}  // namespace walrelay::router::detail
