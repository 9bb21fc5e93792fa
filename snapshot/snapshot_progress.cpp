#include "walrelay/snapshot/snapshot_progress.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "walrelay/state/state_store.hpp"

namespace walrelay::snapshot {

SnapshotProgressStore::SnapshotProgressStore(std::string dir, const std::string& slot,
                                             const std::string& suffix)
    : dir_(std::move(dir)), path_(dir_ + "/" + slot + suffix) {}

std::expected<std::optional<SnapshotProgress>, std::string> SnapshotProgressStore::load() const {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return std::optional<SnapshotProgress>{};
    return std::unexpected("cannot read " + path_ + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const YAML::Node root = YAML::Load(text.str());
    // An empty or cut file, or one of another shape, is no progress: never "no tables left".
    if (!root.IsMap()) return std::unexpected(path_ + ": malformed snapshot progress: not a map");
    if (!root["tables"] || !root["tables"].IsSequence()) {
      return std::unexpected(path_ + ": malformed snapshot progress: no tables list");
    }
    SnapshotProgress p;
    p.slot = root["slot"].as<std::string>();
    auto lsn = Lsn::parse(root["lsn"].as<std::string>());
    if (!lsn) return std::unexpected(path_ + ": malformed lsn");
    p.lsn = *lsn;
    p.xid = root["xid"].as<std::uint64_t>();
    p.resumed = root["resumed"].as<bool>(false);
    for (const auto& t : root["tables"]) {
      TableProgress tp;
      tp.schema = t["schema"].as<std::string>();
      tp.table = t["table"].as<std::string>();
      tp.done = t["done"].as<bool>();
      tp.rows = t["rows"].as<std::uint64_t>();
      tp.chunks = t["chunks"].as<std::uint64_t>();
      if (const auto k = t["last_key"]; k && k.IsSequence()) {
        KeyText key;
        for (const auto& v : k) {
          if (v.IsNull()) {
            key.emplace_back(std::nullopt);
          } else {
            key.emplace_back(v.as<std::string>());
          }
        }
        tp.last_key = std::move(key);
      }
      p.tables.push_back(std::move(tp));
    }
    return std::optional<SnapshotProgress>{std::move(p)};
  } catch (const std::exception& e) {
    return std::unexpected(path_ + ": malformed snapshot progress: " + e.what());
  }
}

std::expected<void, std::string> SnapshotProgressStore::save(const SnapshotProgress& p) const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "slot" << YAML::Value << YAML::DoubleQuoted << p.slot;
  out << YAML::Key << "lsn" << YAML::Value << p.lsn.to_string();
  out << YAML::Key << "xid" << YAML::Value << p.xid;
  out << YAML::Key << "resumed" << YAML::Value << p.resumed;
  out << YAML::Key << "tables" << YAML::Value << YAML::BeginSeq;
  for (const auto& t : p.tables) {
    out << YAML::BeginMap;
    out << YAML::Key << "schema" << YAML::Value << YAML::DoubleQuoted << t.schema;
    out << YAML::Key << "table" << YAML::Value << YAML::DoubleQuoted << t.table;
    out << YAML::Key << "done" << YAML::Value << t.done;
    out << YAML::Key << "rows" << YAML::Value << t.rows;
    out << YAML::Key << "chunks" << YAML::Value << t.chunks;
    if (t.last_key) {
      out << YAML::Key << "last_key" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& v : *t.last_key) {
        if (v) {
          out << YAML::DoubleQuoted << *v;
        } else {
          out << YAML::Null;
        }
      }
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  std::string text = "# walrelay snapshot progress: do not edit while walrelay runs\n";
  text += out.c_str();
  text.push_back('\n');
  return write_file_durably(dir_, path_, text);
}

SnapshotProgress reconcile_progress(const std::optional<SnapshotProgress>& local,
                                    const SnapshotProgress& kafka,
                                    std::vector<std::string>* changed) {
  SnapshotProgress out = local.value_or(SnapshotProgress{});
  if (!local) {
    out.slot = kafka.slot;
    out.lsn = kafka.lsn;
    out.xid = kafka.xid;
  }
  if (out.lsn.is_zero()) out.lsn = kafka.lsn;
  if (out.xid == 0) out.xid = kafka.xid;
  out.resumed = out.resumed || kafka.resumed;
  for (const auto& k : kafka.tables) {
    auto it = std::find_if(out.tables.begin(), out.tables.end(), [&](const TableProgress& t) {
      return t.schema == k.schema && t.table == k.table;
    });
    if (it == out.tables.end()) {
      out.tables.push_back(k);
    } else if (*it == k) {
      continue;
    } else {
      *it = k;
    }
    if (changed != nullptr) changed->push_back(k.schema + "." + k.table);
  }
  return out;
}

}  // namespace walrelay::snapshot
