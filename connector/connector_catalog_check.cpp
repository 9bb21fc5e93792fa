// The connector's periodic look at the captured tables while streaming: the stream itself says
// nothing about DDL, so a table that stops being fully decodable (UNLOGGED, another kind, its
// replica identity gone) or a `tables` entry that stops matching (a rename) would otherwise go
// unnoticed (shared/cases/CASE-05, CASE-06; issue "Hostile databases" items 1, 2, 6).
#include <spdlog/spdlog.h>

#include "walrelay/catalog/table_inventory.hpp"
#include "walrelay/connector/connector.hpp"

namespace walrelay {

namespace {

std::string table_key(const std::string& schema, const std::string& table) {
  return schema + "." + table;
}

/// Why a captured table's UPDATE/DELETE are not decoded, or empty.
std::string identity_problem(const MatchedTable& t) {
  if (t.replica_identity == 'n') return "REPLICA IDENTITY NOTHING";
  if (t.replica_identity == 'i' && t.replica_identity_key.empty()) {
    return "REPLICA IDENTITY USING INDEX of a dropped index";
  }
  if (t.replica_identity == 'd' && !t.has_primary_key) {
    return "REPLICA IDENTITY DEFAULT without a primary key";
  }
  return {};
}

}  // namespace

void Connector::remember_captured(const std::vector<MatchedTable>& tables,
                                  const std::vector<SkippedRelation>& skipped) {
  captured_.clear();
  for (const auto& t : tables) captured_[table_key(t.schema, t.table)] = identity_problem(t);
  matching_entries_.clear();
  for (const auto& t : tables) matching_entries_.insert(t.entry);
  skipped_.clear();
  for (const auto& r : skipped) skipped_.insert(table_key(r.schema, r.table));
}

void Connector::schedule_catalog_check() {
  if (cfg_.source.catalog_check_interval.count() <= 0) return;
  catalog_check_timer_.expires_after(cfg_.source.catalog_check_interval);
  catalog_check_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_ || !streaming_) return;
    check_catalog();
    schedule_catalog_check();
  });
}

void Connector::check_catalog() {
  if (!catalog_ || catalog_check_running_ || cfg_.tables.empty()) return;
  // One query per tables entry, queued on the catalog's non-blocking connection in entry order:
  // the event loop never waits for them.
  catalog_check_running_ = true;
  auto matcher = std::make_shared<TableMatcher>(cfg_);
  auto failed = std::make_shared<bool>(false);
  for (std::size_t e = 0; e < cfg_.tables.size(); ++e) {
    catalog_->query_async(matcher->query(e),
                          [this, matcher, failed, e](const pg::AsyncConnection::Result& rows) {
                            if (*failed) return;
                            if (!rows) {
                              *failed = true;
                              catalog_check_running_ = false;
                              spdlog::warn("catalog check: cannot look up tables for '{}': {}",
                                           cfg_.tables[e].name, rows.error());
                              return;
                            }
                            matcher->take(e, *rows);
                            if (e + 1 < cfg_.tables.size()) return;
                            catalog_check_running_ = false;
                            if (!stopping_ && streaming_) compare_catalog(*matcher);
                          });
  }
}

void Connector::compare_catalog(const TableMatcher& matcher) {
  const auto& matched = matcher.matched;
  const auto& skipped = matcher.skipped;
  std::set<std::size_t> entries;
  std::map<std::string, std::string> now;
  for (const MatchedTable& t : matched) {
    const std::string key = table_key(t.schema, t.table);
    std::string problem = identity_problem(t);
    entries.insert(t.entry);
    const auto was = captured_.find(key);
    if (was == captured_.end()) {
      spdlog::info("catalog check: {} now matches tables entry '{}'", key,
                   cfg_.tables[t.entry].name);
    } else if (!problem.empty() && was->second != problem) {
      ++catalog_alarms_;
      spdlog::error(
          "catalog check: UPDATE and DELETE of {} are no longer captured ({}): wal2json drops "
          "them without a trace. Set REPLICA IDENTITY DEFAULT (with a primary key) or FULL",
          key, problem);
    } else if (problem.empty() && !was->second.empty()) {
      // The start-up warning (or an earlier alarm) said wal2json drops them: no longer true.
      std::string now_is = t.replica_identity == 'f' ? "FULL" : "DEFAULT with a primary key";
      if (t.replica_identity == 'i') {
        now_is = "USING INDEX on (";
        for (std::size_t i = 0; i < t.replica_identity_key.size(); ++i) {
          now_is += (i == 0 ? "" : ", ") + t.replica_identity_key[i];
        }
        now_is += t.has_primary_key ? ")" : "), which keys its events";
      }
      spdlog::info(
          "catalog check: UPDATE and DELETE of {} are captured again (it had {}; REPLICA "
          "IDENTITY is now {})",
          key, was->second, now_is);
    }
    now[key] = std::move(problem);
  }
  for (const SkippedRelation& r : skipped) {
    const std::string key = table_key(r.schema, r.table);
    if (captured_.contains(key)) {
      ++catalog_alarms_;
      spdlog::error(
          "catalog check: captured table {} is now {}: logical decoding no longer delivers (all "
          "of) its changes",
          key, r.what);
    }
  }
  for (std::size_t e : matching_entries_) {
    if (!entries.contains(e)) {
      ++catalog_alarms_;
      spdlog::warn(
          "catalog check: tables entry '{}' matches no table any more (renamed, moved or "
          "dropped?): nothing new will be captured through it",
          cfg_.tables[e].name);
    }
  }
  captured_ = std::move(now);
  matching_entries_ = std::move(entries);
  skipped_.clear();
  for (const auto& r : skipped) skipped_.insert(table_key(r.schema, r.table));
}

}  // namespace walrelay
