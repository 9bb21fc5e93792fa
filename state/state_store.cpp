#include "walrelay/state/state_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace walrelay {

namespace fs = std::filesystem;

StateStore::StateStore(std::string dir, std::string slot)
    : dir_(std::move(dir)), path_(dir_ + "/" + slot + ".state") {}

std::string StateStore::default_dir() {
  if (const char* d = std::getenv("WALRELAY_STATE_DIR"); d != nullptr && *d != '\0') return d;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/walrelay";
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    return std::string(h) + "/.local/state/walrelay";
  }
  return "walrelay-state";
}

std::expected<std::optional<SlotRecord>, std::string> StateStore::load() const {
  auto loaded = load_record();
  if (loaded) return loaded;
  return std::unexpected(
      loaded.error() +
      ". walrelay does not start without a readable slot record (it would not notice a slot "
      "lost or moved since): restore the file, or remove it to trust the slot's own position "
      "(`walrelay slot status` shows it)");
}

std::expected<std::optional<SlotRecord>, std::string> StateStore::load_record() const {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return std::optional<SlotRecord>{};
    return std::unexpected("cannot read " + path_ + ": " + std::strerror(errno));
  }
  SlotRecord r;
  bool have_lsn = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) return std::unexpected(path_ + ": malformed line '" + line + "'");
    const std::string key = line.substr(0, eq);
    const std::string value = line.substr(eq + 1);
    if (key == "system_id") {
      r.system_id = value;
    } else if (key == "timeline") {
      char* end = nullptr;
      r.timeline = static_cast<std::uint32_t>(std::strtoul(value.c_str(), &end, 10));
      if (end == value.c_str() || *end != '\0') {
        return std::unexpected(path_ + ": malformed timeline '" + value + "'");
      }
    } else if (key == "database") {
      r.database = value;
    } else if (key == "slot") {
      r.slot = value;
    } else if (key == "reset_used") {
      r.reset_used = value == "true";
    } else if (key == "incremental_queue") {
      r.incremental_kept = value == "kept";
    } else if (key == "confirmed_lsn") {
      auto lsn = Lsn::parse(value);
      if (!lsn) return std::unexpected(path_ + ": malformed confirmed_lsn '" + value + "'");
      r.confirmed = *lsn;
      have_lsn = true;
    }
  }
  if (r.system_id.empty() || r.timeline == 0 || !have_lsn) {
    return std::unexpected(path_ + ": incomplete record (system_id, timeline and confirmed_lsn " +
                           "are required)");
  }
  if (r.system_id.find_first_not_of("0123456789") != std::string::npos) {
    return std::unexpected(path_ + ": malformed system_id '" + r.system_id + "'");
  }
  return std::optional<SlotRecord>{r};
}

std::expected<void, std::string> StateStore::save(const SlotRecord& r) const {
  std::ostringstream body;
  body << "# walrelay slot record: do not edit while walrelay runs\n"
       << "system_id=" << r.system_id << "\n"
       << "timeline=" << r.timeline << "\n"
       << "database=" << r.database << "\n"
       << "slot=" << r.slot << "\n"
       << "confirmed_lsn=" << r.confirmed.to_string() << "\n"
       << "reset_used=" << (r.reset_used ? "true" : "false") << "\n";
  if (r.incremental_kept) body << "incremental_queue=kept\n";
  return write_file_durably(dir_, path_, body.str());
}

std::expected<void, std::string> write_file_durably(const std::string& dir, const std::string& path,
                                                    const std::string& text) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return std::unexpected("cannot create " + dir + ": " + ec.message());
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::unexpected("cannot write " + tmp + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok) return std::unexpected("cannot write " + tmp + ": " + std::strerror(saved_errno));
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return std::unexpected("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

std::expected<std::vector<std::string>, std::string> remove_slot_files(const std::string& dir,
                                                                       const std::string& slot) {
  std::vector<std::string> removed;
  for (const char* suffix : {".state", ".snapshot", ".incremental"}) {
    for (const std::string& path :
         {dir + "/" + slot + suffix, dir + "/" + slot + suffix + ".tmp"}) {
      std::error_code ec;
      if (fs::remove(path, ec)) {
        removed.push_back(path);
      } else if (ec) {
        return std::unexpected("cannot remove " + path + ": " + ec.message());
      }
    }
  }
  if (!removed.empty()) {
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  return removed;
}

std::optional<Lsn> timeline_switchpoint(const std::string& history, std::uint32_t timeline) {
  std::istringstream in(history);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::uint32_t tli = 0;
    std::string lsn;
    if (!(fields >> tli >> lsn)) continue;
    if (tli == timeline) return Lsn::parse(lsn);
  }
  return std::nullopt;
}

}  // namespace walrelay
