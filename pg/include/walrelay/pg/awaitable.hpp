#pragma once

// AsyncConnection's queries as Asio awaitables (C++20 coroutines, boost/asio/awaitable.hpp),
// so that a sequence of statements reads in order (the inbox's batches, the one-shot commands of
// inbox/ and relay/).

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

namespace walrelay::pg::coro {

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

/// A query's answer: the rows, or the typed error (error.hpp) when `rows` is empty.
struct Answer {
  std::optional<AsyncConnection::Rows> rows;
  Error error;
  [[nodiscard]] bool ok() const { return rows.has_value(); }
};

/// Runs `sql` with text parameters on `conn` (queued behind its other queries) and resumes the
/// awaiting coroutine with the answer, posted to `conn`'s executor.
/// `types`: the parameters' type OIDs (0 or missing: inferred by the server).
inline boost::asio::awaitable<Answer> query(AsyncConnection& conn,
                                            boost::asio::any_io_executor executor, std::string sql,
                                            Params params = {},
                                            std::vector<unsigned int> types = {}) {
  auto initiate = [&conn, executor](auto handler, std::string text, Params values,
                                    std::vector<unsigned int> oids) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    conn.query_params(std::move(text), std::move(values), std::move(oids),
                      [h, &conn, executor](AsyncConnection::Result result) {
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
inline boost::asio::awaitable<Answer> simple(AsyncConnection& conn,
                                             boost::asio::any_io_executor executor,
                                             std::string sql) {
  auto initiate = [&conn, executor](auto handler, std::string text) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    conn.query(std::move(text), {}, [h, &conn, executor](AsyncConnection::Result result) {
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

}  // namespace walrelay::pg::coro
