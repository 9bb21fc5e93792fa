#pragma once
// The metrics and health endpoint (`metrics.listen`): Boost.Beast on the connector's own
// io_context (no second event loop), so a handler sees the connector's state without locks.
// A slow or hostile client cannot stall the data path: every connection has a deadline for its
// request, headers are bounded, the number of open connections is bounded (more are accepted
// and closed at once), and one request per connection is answered (Connection: close).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <expected>
#include <functional>
#include <memory>
#include <string>

namespace walrelay::metrics {

/// One response: status code (200, 503, 404, ...), content type and body.
struct Response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

/// Routes a request target (path and query, e.g. "/metrics") to a response. Called on the
/// io_context's thread.
using Handler = std::function<Response(const std::string& target)>;

/// The routes every system serves on `metrics.listen`, for its Handler: `/live` → 200 "ok";
/// `/ready` → 200 "ready", or 503 "not ready: <reason>" when `not_ready_reason()` returns a
/// non-empty reason; `/metrics` → 200 with `metrics_text()` (Prometheus text format 0.0.4);
/// anything else → 404 naming the three. The query string of `target` is ignored.
Response route_health(const std::string& target,
                      const std::function<std::string()>& not_ready_reason,
                      const std::function<std::string()>& metrics_text);

struct Limits {
  std::size_t max_connections = 32;                 ///< open at once; more are closed at once
  std::size_t max_header_bytes = 8 * 1024;          ///< request line + headers; larger: 431/close
  std::chrono::milliseconds request_timeout{5000};  ///< whole request, from accept
};

class HttpServer {
 public:
  HttpServer(boost::asio::any_io_executor executor, Handler handler, Limits limits = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Listens on `host:port` ("127.0.0.1:9187", "[::1]:9187", port 0 = any free port). Returns the
  /// bound port. Error: the address cannot be parsed or bound (the message names it).
  std::expected<unsigned short, std::string> start(const std::string& listen);

  /// Stops accepting and closes every open connection.
  void stop();

  /// Connections open now (for tests and the metrics themselves).
  [[nodiscard]] std::size_t open_connections() const { return *open_; }

 private:
  void accept();

  boost::asio::any_io_executor executor_;
  Handler handler_;
  Limits limits_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  /// After a failed accept (e.g. EMFILE: no descriptor left) the next one waits a little instead
  /// of spinning the event loop; the pending connection stays in the listen backlog.
  boost::asio::steady_timer accept_retry_;
  std::shared_ptr<std::size_t> open_ = std::make_shared<std::size_t>(0);
  std::shared_ptr<bool> stopped_ = std::make_shared<bool>(false);
};

}  // namespace walrelay::metrics
