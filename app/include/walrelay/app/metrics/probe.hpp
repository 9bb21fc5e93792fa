#pragma once
// `walrelay health`: a container's or orchestrator's probe without curl in the image. One HTTP
// GET to the metrics endpoint (metrics::HttpServer), answered within `timeout`.

#include <chrono>
#include <string>

namespace walrelay::metrics {

/// GETs `path` from `host:port` ("127.0.0.1:9187"). Returns the HTTP status (200 ready), or 0 when
/// there was no answer (refused, timed out, not HTTP); `body` receives the response body.
int probe(const std::string& address, const std::string& path, std::chrono::milliseconds timeout,
          std::string& body);

}  // namespace walrelay::metrics
