#include <cctype>

#include "walrelay/config/config.hpp"

namespace walrelay::config {

namespace {

constexpr std::string_view kMask = "****";

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

/// libpq keywords whose values are secrets (libpq docs §34.1.2 "Parameter Key Words":
/// `password`, and `sslpassword` for an encrypted client key). Compared case-insensitively, wider
/// than libpq, so a misspelt-case keyword in an error message is masked too.
bool is_secret_keyword(std::string_view keyword) {
  const std::string k = lower(keyword);
  return k == "password" || k == "sslpassword";
}

/// True when libpq would read `text` as a URI (docs §34.1.1.2: both prefixes are accepted).
std::size_t uri_prefix_length(std::string_view text) {
  for (std::string_view prefix : {"postgresql://", "postgres://"}) {
    if (text.size() >= prefix.size() && lower(text.substr(0, prefix.size())) == prefix) {
      return prefix.size();
    }
  }
  return 0;
}

std::string mask_uri(std::string_view uri, std::size_t prefix) {
  std::string out(uri.substr(0, prefix));
  const std::string_view rest = uri.substr(prefix);
  const std::size_t query = rest.find('?');
  const std::string_view head = rest.substr(0, query);
  // The last `@` before the query ends the user info. libpq stops at the first `/`, but a password
  // holding an unencoded `/` must still be masked, so this errs towards masking more.
  const std::size_t at = head.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = head.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    if (colon != std::string_view::npos && colon + 1 < userinfo.size()) {
      out += userinfo.substr(0, colon + 1);
      out += kMask;
    } else {
      out += userinfo;
    }
    out += head.substr(at);
  } else {
    out += head;
  }
  if (query == std::string_view::npos) return out;
  out += '?';
  std::string_view params = rest.substr(query + 1);
  for (bool first = true;; first = false) {
    if (!first) out += '&';
    const std::size_t amp = params.find('&');
    const std::string_view param = params.substr(0, amp);
    const std::size_t eq = param.find('=');
    if (eq != std::string_view::npos && is_secret_keyword(param.substr(0, eq))) {
      out += param.substr(0, eq + 1);
      out += kMask;
    } else {
      out += param;
    }
    if (amp == std::string_view::npos) break;
    params = params.substr(amp + 1);
  }
  return out;
}

/// Masks a `dbname` value that libpq would expand as a connection string itself (docs §34.1.2
/// "dbname": a value containing `=` or starting with a URI prefix). `raw` is the value as written.
std::string mask_dbname(std::string_view raw) {
  std::string_view inner = raw;
  const bool quoted = raw.size() >= 2 && raw.front() == '\'' && raw.back() == '\'';
  if (quoted) inner = raw.substr(1, raw.size() - 2);
  if (inner.find('=') == std::string_view::npos && uri_prefix_length(inner) == 0) {
    return std::string(raw);
  }
  const std::string masked = mask_conninfo(std::string(inner));
  return quoted ? "'" + masked + "'" : masked;
}

/// Keyword/value form, following libpq's conninfo_parse: `kw = value`, values either bare (up to
/// whitespace) or single-quoted, with `\` escaping the next character in both.
std::string mask_keyword_value(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  const std::size_t n = text.size();
  bool seen_secret = false;  // a malformed string after a secret may hold the secret's rest
  while (i < n) {
    const std::size_t token_start = i;
    while (i < n && is_space(text[i])) ++i;
    const std::size_t kw_start = i;
    while (i < n && text[i] != '=' && !is_space(text[i])) ++i;
    const std::string_view keyword = text.substr(kw_start, i - kw_start);
    while (i < n && is_space(text[i])) ++i;
    if (i >= n || text[i] != '=') {
      // Malformed (libpq: `missing "=" after ...`). A secret may follow a password keyword, so
      // hide everything after it; anything else is copied up to the next token.
      if (is_secret_keyword(keyword)) {
        out += text.substr(token_start, kw_start + keyword.size() - token_start);
        out += ' ';
        out += kMask;
        return out;
      }
      if (seen_secret) {
        // e.g. `password=two words` unquoted: libpq takes `two` and fails on `words`; both may be
        // the user's password, so nothing after it is shown.
        out += ' ';
        out += kMask;
        return out;
      }
      out += text.substr(token_start, i - token_start);
      continue;
    }
    ++i;  // '='
    while (i < n && is_space(text[i])) ++i;
    out += text.substr(token_start, i - token_start);
    const std::size_t value_start = i;
    if (i < n && text[i] == '\'') {
      ++i;
      while (i < n && text[i] != '\'') i += text[i] == '\\' ? 2 : 1;
      i = i < n ? i + 1 : n;  // an unterminated quote runs to the end
    } else {
      while (i < n && !is_space(text[i])) i += text[i] == '\\' ? 2 : 1;
      i = i < n ? i : n;
    }
    const std::string_view value = text.substr(value_start, i - value_start);
    if (is_secret_keyword(keyword)) {
      out += kMask;
      seen_secret = true;
    } else if (lower(keyword) == "dbname") {
      out += mask_dbname(value);
    } else {
      out += value;
    }
  }
  return out;
}

}  // namespace

std::string mask_conninfo(const std::string& conninfo) {
  const std::size_t prefix = uri_prefix_length(conninfo);
  if (prefix > 0) return mask_uri(conninfo, prefix);
  return mask_keyword_value(conninfo);
}

bool is_secret_property(const std::string& name) {
  const std::string n = lower(name);
  // ssl.key.pem holds a client private key in PEM form (librdkafka CONFIGURATION.md).
  return n.find("password") != std::string::npos || n.find("secret") != std::string::npos ||
         n.starts_with("sasl.") || n == "ssl.key.pem";
}

}  // namespace walrelay::config
