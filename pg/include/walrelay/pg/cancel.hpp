#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>

namespace walrelay::pg {

/// A request to cancel the command a connection is running, usable from any thread while that
/// connection is busy on another: libpq's PQgetCancel / PQcancel (PostgreSQL docs, libpq
/// "Canceling Queries in Progress", libpq-cancel.html: PQcancel is thread-safe and works on its
/// own PGcancel object, not on the busy connection).
///
/// Made on the connection's own thread (`ReplicationStream::cancel_handle`) before the command
/// starts; `cancel` may then be called from the event loop while a blocking call runs elsewhere.
/// A cancelled command fails with SQLSTATE 57014 (query_canceled).
class CancelHandle {
 public:
  CancelHandle() = default;
  /// Takes the cancel object of `conn` (nullptr or a connection without one: cancel() is a no-op).
  explicit CancelHandle(PGconn* conn)
      : cancel_(conn != nullptr ? PQgetCancel(conn) : nullptr, Free{}) {}

  /// Asks the server to cancel the connection's current command. Returns false, with libpq's
  /// reason in `error`, when the request could not be sent; true does not mean anything was
  /// running (the server ignores a request for an idle connection).
  bool cancel(std::string* error = nullptr) const {
    if (!cancel_) return false;
    char buf[256] = {};
    const bool sent = PQcancel(cancel_.get(), buf, sizeof(buf)) == 1;
    if (!sent && error != nullptr) *error = buf;
    return sent;
  }

 private:
  struct Free {
    void operator()(PGcancel* c) const { PQfreeCancel(c); }
  };
  std::shared_ptr<PGcancel> cancel_{nullptr, Free{}};
};

}  // namespace walrelay::pg
