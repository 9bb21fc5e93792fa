#include "walrelay/app/metrics/http_server.hpp"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

namespace walrelay::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

/// One accepted connection: read one request (bounded in size and time), answer, close.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Handler& handler, const Limits& limits,
          std::shared_ptr<std::size_t> open)
      : stream_(std::move(socket)), handler_(handler), open_(std::move(open)) {
    ++*open_;
    parser_.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser_.body_limit(0);  // health and metrics requests have no body
    stream_.expires_after(limits.request_timeout);
  }
  ~Session() { --*open_; }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void run() {
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec == http::error::header_limit) return reply(431, "request header fields too large\n");
    if (ec) return close();  // timeout, garbage, client gone: nothing to answer
    const auto& req = parser_.get();
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return reply(405, "only GET\n");
    }
    Response r = handler_(std::string(req.target()));
    response_.result(r.status);
    response_.set(http::field::content_type, r.content_type);
    response_.body() = req.method() == http::verb::head ? std::string() : std::move(r.body);
    write();
  }

  void reply(unsigned status, std::string body) {
    response_.result(status);
    response_.set(http::field::content_type, "text/plain; charset=utf-8");
    response_.body() = std::move(body);
    write();
  }

  void write() {
    response_.version(11);
    response_.keep_alive(false);
    response_.set(http::field::server, "walrelay");
    response_.prepare_payload();
    http::async_write(
        stream_, response_,
        [self = shared_from_this()](beast::error_code, std::size_t) { self->close(); });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{4096};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  const Handler& handler_;
  std::shared_ptr<std::size_t> open_;
};

}  // namespace

HttpServer::HttpServer(asio::any_io_executor executor, Handler handler, Limits limits)
    : executor_(std::move(executor)),
      handler_(std::move(handler)),
      limits_(limits),
      accept_retry_(executor_) {}

HttpServer::~HttpServer() {
  stop();
}

std::expected<unsigned short, std::string> HttpServer::start(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return std::unexpected("expected host:port, got " + listen);
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned short port = 0;
  const std::string port_text = listen.substr(colon + 1);
  auto [ptr, perr] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (perr != std::errc() || ptr != port_text.data() + port_text.size()) {
    return std::unexpected("invalid port in " + listen);
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return std::unexpected("invalid address " + host + ": " + ec.message());
  acceptor_ = std::make_unique<tcp::acceptor>(executor_);
  const tcp::endpoint endpoint(address, port);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.reset();
    return std::unexpected("cannot listen on " + listen + ": " + ec.message());
  }
  *stopped_ = false;
  const unsigned short bound = acceptor_->local_endpoint().port();
  accept();
  return bound;
}

void HttpServer::accept() {
  acceptor_->async_accept(
      executor_, [this, stopped = stopped_](boost::system::error_code ec, tcp::socket socket) {
        if (*stopped) return;
        if (!ec) {
          if (*open_ >= limits_.max_connections) {
            boost::system::error_code ignored;
            socket.close(ignored);  // over the bound: the data path comes first
          } else {
            std::make_shared<Session>(std::move(socket), handler_, limits_, open_)->run();
          }
        }
        if (!acceptor_ || !acceptor_->is_open()) return;
        if (ec && ec != asio::error::operation_aborted) {
          accept_retry_.expires_after(std::chrono::milliseconds(100));
          accept_retry_.async_wait([this, stopped](boost::system::error_code e) {
            if (*stopped || e || !acceptor_ || !acceptor_->is_open()) return;
            accept();
          });
          return;
        }
        accept();
      });
}

void HttpServer::stop() {
  *stopped_ = true;
  accept_retry_.cancel();
  if (acceptor_) {
    boost::system::error_code ignored;
    acceptor_->close(ignored);
  }
}

Response route_health(const std::string& target,
                      const std::function<std::string()>& not_ready_reason,
                      const std::function<std::string()>& metrics_text) {
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/live") return {200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/ready") {
    const std::string why = not_ready_reason();
    if (why.empty()) return {200, "text/plain; charset=utf-8", "ready\n"};
    return {503, "text/plain; charset=utf-8", "not ready: " + why + "\n"};
  }
  if (path == "/metrics") {
    return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_text()};
  }
  return {404, "text/plain; charset=utf-8", "not found: /metrics, /live, /ready\n"};
}

}  // namespace walrelay::metrics
