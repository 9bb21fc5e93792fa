#include "walrelay/app/metrics/probe.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace walrelay::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

int probe(const std::string& address, const std::string& path, std::chrono::milliseconds timeout,
          std::string& body) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  asio::io_context io;
  beast::tcp_stream stream(io);
  int status = 0;
  beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, path, 11};
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "walrelay-health");
  http::response<http::string_body> res;
  asio::ip::tcp::resolver resolver(io);
  stream.expires_after(timeout);
  resolver.async_resolve(host, address.substr(colon + 1), [&](beast::error_code ec, auto results) {
    if (ec) return;
    stream.async_connect(results, [&](beast::error_code cec, auto) {
      if (cec) return;
      http::async_write(stream, req, [&](beast::error_code wec, std::size_t) {
        if (wec) return;
        http::async_read(stream, buffer, res, [&](beast::error_code rec, std::size_t) {
          if (!rec) {
            status = static_cast<int>(res.result_int());
            body = res.body();
          }
        });
      });
    });
  });
  io.run_for(timeout + std::chrono::milliseconds(100));
  return status;
}

}  // namespace walrelay::metrics
