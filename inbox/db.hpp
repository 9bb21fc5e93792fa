#pragma once

// pg::AsyncConnection's queries as Asio awaitables (C++20 coroutines, boost/asio/awaitable.hpp),
// so that a batch's decisions read in order. Internal to inbox/.

// <utility> first: Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>
// clang-format off
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
// clang-format on
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"

namespace walrelay::inbox::detail {

using Params = std::vector<std::optional<std::string>>;

/// Params from its items, without a braced list: GCC 12 cannot keep an initializer_list's array
/// in a coroutine frame across the co_await of the same full-expression ("array used as
/// initializer"), so calls in coroutines write `query(conn, ex, sql, params(a, b))`.
template <class... A>
Params params(A&&... items) {
  Params p;
  p.reserve(sizeof...(A));
  (p.emplace_back(std::forward<A>(items)), ...);
  return p;
}

/// bytea's hex format (PostgreSQL docs §8.4.1, bytea_output hex): `\x` and two lower-case hex
/// digits a byte; nullopt stays nullopt (SQL NULL).
inline std::optional<std::string> bytea_hex(const std::optional<std::string>& bytes) {
  if (!bytes) return std::nullopt;
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + bytes->size() * 2);
  for (const char c : *bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 0xF];
  }
  return out;
}

/// The bytes of a bytea value's text in the hex format (as bytea_hex writes it, or as the server
/// prints it with bytea_output hex); nullopt stays nullopt. Returns false in `ok` for text that is
/// not that format (then the result is nullopt).
inline std::optional<std::string> bytes_of_bytea_hex(const std::optional<std::string>& text,
                                                     bool& ok) {
  ok = true;
  if (!text) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text->size() < 2 || (*text)[0] != '\\' || (*text)[1] != 'x' || text->size() % 2 != 0) {
    ok = false;
    return std::nullopt;
  }
  std::string out;
  out.reserve((text->size() - 2) / 2);
  for (std::size_t i = 2; i < text->size(); i += 2) {
    const int hi = digit((*text)[i]);
    const int lo = digit((*text)[i + 1]);
    if (hi < 0 || lo < 0) {
      ok = false;
      return std::nullopt;
    }
    out += static_cast<char>((hi << 4) | lo);
  }
  return out;
}

/// A query's answer: the rows, or the typed error (pg/error.hpp) when `rows` is empty.
struct Answer {
  std::optional<pg::AsyncConnection::Rows> rows;
  pg::Error error;
  [[nodiscard]] bool ok() const { return rows.has_value(); }
};

/// Runs `sql` with text parameters on `conn` (queued behind its other queries) and resumes the
/// awaiting coroutine with the answer, posted to `conn`'s executor.
/// `types`: the parameters' type OIDs (0 or missing: inferred by the server).
inline boost::asio::awaitable<Answer> query(pg::AsyncConnection& conn,
                                            boost::asio::any_io_executor executor, std::string sql,
                                            Params params = {},
                                            std::vector<unsigned int> types = {}) {
  auto initiate = [&conn, executor](auto handler, std::string text, Params values,
                                    std::vector<unsigned int> oids) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    conn.query_params(std::move(text), std::move(values), std::move(oids),
                      [h, &conn, executor](pg::AsyncConnection::Result result) {
                        auto answer = std::make_shared<Answer>();
                        if (result) {
                          answer->rows = std::move(*result);
                        } else {
                          answer->error = conn.last_error();
                        }
                        boost::asio::post(executor,
                                          [h, answer]() mutable { (*h)(std::move(*answer)); });
                      });
  };
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable),
                                                 void(Answer)>(
      std::move(initiate), boost::asio::use_awaitable, std::move(sql), std::move(params),
      std::move(types));
}

/// A simple-protocol query (several statements allowed, no parameters): BEGIN, COMMIT, the DDL.
inline boost::asio::awaitable<Answer> simple(pg::AsyncConnection& conn,
                                             boost::asio::any_io_executor executor,
                                             std::string sql) {
  auto initiate = [&conn, executor](auto handler, std::string text) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    conn.query(std::move(text), {}, [h, &conn, executor](pg::AsyncConnection::Result result) {
      auto answer = std::make_shared<Answer>();
      if (result) {
        answer->rows = std::move(*result);
      } else {
        answer->error = conn.last_error();
      }
      boost::asio::post(executor, [h, answer]() mutable { (*h)(std::move(*answer)); });
    });
  };
  co_return co_await boost::asio::async_initiate<decltype(boost::asio::use_awaitable),
                                                 void(Answer)>(
      std::move(initiate), boost::asio::use_awaitable, std::move(sql));
}

}  // namespace walrelay::inbox::detail
