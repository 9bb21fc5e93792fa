#include "walrelay/commands/tail_command.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <optional>

#include "walrelay/catalog/catalog.hpp"
#include "walrelay/catalog/source_encoding.hpp"
#include "walrelay/core/json.hpp"
#include "walrelay/decoder/plugin_options.hpp"
#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"
#include "walrelay/router/event_router.hpp"

namespace walrelay {

namespace {

void print_record(std::ostream& out, const Record& r) {
  std::string line = "{\"topic\":";
  json::append_string(line, r.topic);
  line += ",\"key\":";
  if (r.key) {
    json::append_string(line, *r.key);
  } else {
    line += "null";
  }
  line += ",\"headers\":{";
  bool first = true;
  for (const auto& h : r.headers) {
    if (!first) line.push_back(',');
    first = false;
    json::append_string(line, h.name);
    line.push_back(':');
    json::append_string(line, h.value);
  }
  line += "},\"value\":";
  if (r.value) {
    json::append_string(line, *r.value);
  } else {
    line += "null";
  }
  line += "}\n";
  out << line << std::flush;
}

ExitCode tail(const config::Config& cfg, bool from_slot, std::size_t max, std::ostream& out,
              bool numeric_strings) {
  boost::asio::io_context io;
  pg::ReplicationStream stream(io.get_executor(), cfg.source.conninfo, "walrelay-tail-" + cfg.name);
  auto sys = stream.connect();
  if (!sys) {
    spdlog::error("tail: {}", sys.error());
    return ExitCode::kRuntimeError;
  }
  auto shown = stream.query("SHOW server_encoding");
  auto transcoder =
      transcoder_for_database(shown && !shown->empty() ? (*shown)[0][0].value_or("UTF8") : "UTF8",
                              cfg.source.allow_sql_ascii);
  if (!transcoder) {
    spdlog::error("tail: {}", transcoder.error());
    return ExitCode::kConfigError;
  }
  std::string slot = cfg.source.slot;
  if (from_slot) {
    auto found = stream.find_slot(slot);
    if (!found || !*found) {
      spdlog::error("tail --from-slot: slot {} {}", slot,
                    found ? "does not exist" : "cannot be looked up: " + found.error());
      return ExitCode::kRuntimeError;
    }
    if ((*found)->active) {
      spdlog::error(
          "tail --from-slot: slot {} is active (pid {}): tail reads it only while no "
          "walrelay streams it",
          slot, (*found)->active_pid.value_or(0));
      return ExitCode::kRuntimeError;
    }
  }
  // The temporary slot's consistent point: logged once START_REPLICATION succeeded (a wal2json
  // before 2.6 refuses an option there, and tail starts again on a new connection and slot).
  std::optional<Lsn> temporary_from;
  if (!from_slot) {
    slot = "walrelay_tail_" + std::to_string(::getpid());
    auto created = stream.create_slot(slot, "wal2json", "nothing", /*temporary=*/true);
    if (!created) {
      spdlog::error("tail: cannot create a temporary slot: {}", created.error());
      return ExitCode::kRuntimeError;
    }
    temporary_from = created->first;
  }
  router::TypeRegistry types;
  Catalog catalog(io.get_executor(), cfg.source.conninfo, "walrelay-tail-catalog-" + cfg.name,
                  types);
  if (auto connected = catalog.connect(); !connected) {
    spdlog::error("tail: catalog: {}", connected.error());
    return ExitCode::kRuntimeError;
  }
  router::EventRouter router(router::RouterSettings{cfg.name, cfg.topics.prefix, sys->dbname,
                                                    WALRELAY_VERSION, cfg.events},
                             cfg, &catalog, types);
  std::vector<std::string> prefixes;
  for (const auto& m : cfg.messages) prefixes.push_back(m.prefix);
  auto options = decoder::wal2json_options(std::nullopt, prefixes);
  decoder::Wal2JsonDecoder decoder;
  std::size_t printed = 0;
  ExitCode result = ExitCode::kOk;
  Lsn received;
  bool in_txn = false;
  // Once `max` records are printed, io.stop() ends the loop, but messages already received are
  // still handed over: nothing more is printed.
  const auto enough = [&] { return max > 0 && printed >= max; };
  const auto emit = [&](std::span<const Record> records) {
    for (const Record& r : records) {
      if (enough()) return;
      print_record(out, r);
      if (++printed; enough()) {
        io.stop();
        return;
      }
    }
  };
  pg::ReplicationStream::Handlers handlers{
      [&](const pg::XLogData& x) {
        if (enough()) return;
        if (x.data_start > received) received = x.data_start;
        auto utf8 = transcoder->to_utf8(x.data);
        auto decoded = utf8 ? decoder.decode(*utf8) : decoder.decode(std::string_view("not UTF-8"));
        if (!decoded) {
          std::string line = "{\"error\":";
          json::append_string(line,
                              "LSN " + x.data_start.to_string() + ": " + decoded.error().reason);
          out << line << "}\n" << std::flush;
          result = ExitCode::kMappingFailed;
          return;
        }
        const decoder::Change& c = **decoded;
        if (c.action == decoder::Action::kBegin) {
          in_txn = true;
          router.begin(
              c.xid, c.lsn,
              router::parse_commit_timestamp(c.timestamp).value_or(std::chrono::microseconds{0}));
          return;
        }
        if (c.action == decoder::Action::kCommit) {
          in_txn = false;
          emit(router.commit(c.next_lsn));
          return;
        }
        auto routed = router.route(c);
        if (!routed) {
          std::string line = "{\"error\":";
          json::append_string(line, routed.error().reason);
          out << line << "}\n" << std::flush;
          result = ExitCode::kMappingFailed;
          return;
        }
        emit(*routed);
      },
      [&](const pg::Keepalive& k) {
        // Never confirms anything: flush 0/0 leaves the slot where it is.
        if (k.reply_requested) stream.send_status(received, Lsn{}, Lsn{}, false);
      },
      [&](pg::StreamEnd, const std::string& reason) {
        spdlog::error("tail: the stream ended: {}", reason);
        result = ExitCode::kRuntimeError;
        io.stop();
      }};
  if (numeric_strings) options.emplace_back("numeric-data-types-as-string", "1");
  auto started = stream.start(slot, Lsn{}, options, std::move(handlers));
  if (!started) {
    stream.close();
    if (numeric_strings && stream.failure().is(pg::sqlstate::kInvalidParameterValue)) {
      return tail(cfg, from_slot, max, out, false);  // wal2json before 2.6
    }
    spdlog::error("tail: START_REPLICATION failed: {}", started.error());
    return ExitCode::kRuntimeError;
  }
  if (temporary_from) {
    spdlog::info("tail: temporary slot {} from {}: new changes only", slot,
                 temporary_from->to_string());
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { io.stop(); });
  io.run();
  (void)in_txn;
  stream.close();
  return result;
}

}  // namespace

ExitCode run_tail(const config::Config& cfg, bool from_slot, std::size_t max, std::ostream& out) {
  return tail(cfg, from_slot, max, out, true);
}

}  // namespace walrelay
