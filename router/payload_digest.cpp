#include "walrelay/router/payload_digest.hpp"

#include <openssl/evp.h>

#include "router_helpers.hpp"

namespace walrelay::router {

namespace detail {

namespace {

void append_hex(std::string& out, const unsigned char* data, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 0xF]);
  }
}

}  // namespace

// Lower-case hex SHA-256 of the concatenation of `a` and `b` (OpenSSL EVP).
void append_sha256_hex(std::string& out, std::string_view a, std::string_view b) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, a.data(), a.size());
  EVP_DigestUpdate(ctx, b.data(), b.size());
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  append_hex(out, md, len);
}

}  // namespace detail

void append_payload_digest(std::string& out, std::string_view value) {
  detail::append_sha256_hex(out, {}, value);
}

std::string payload_digest(std::string_view value) {
  std::string out;
  append_payload_digest(out, value);
  return out;
}

}  // namespace walrelay::router
