#pragma once

// The inbox's names for pg/'s coroutine helpers (walrelay/pg/awaitable.hpp). Internal to inbox/.

#include "walrelay/pg/awaitable.hpp"

namespace walrelay::inbox::detail {

using pg::coro::Answer;
using pg::coro::Params;
using pg::coro::params;
using pg::coro::query;
using pg::coro::simple;

}  // namespace walrelay::inbox::detail
