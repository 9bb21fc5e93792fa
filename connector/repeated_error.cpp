#include "walrelay/connector/repeated_error.hpp"

#include "walrelay/pg/error.hpp"

namespace walrelay {

bool RepeatedErrorGuard::can_repeat(std::string_view sqlstate) {
  if (sqlstate.size() != 5) return false;  // not a server error (connection lost, ...)
  const std::string_view cls = sqlstate.substr(0, 2);
  return cls != "08" && cls != "57" && cls != "53" && sqlstate != pg::sqlstate::kObjectInUse;
}

int RepeatedErrorGuard::failed(Lsn position, std::string_view sqlstate, std::string_view message) {
  // A transient failure in between (the old walsender still holds the slot: 55006; a lost
  // connection) neither counts nor breaks the series: only progress does.
  if (!can_repeat(sqlstate)) return count_;
  std::string key(sqlstate);
  key.push_back(' ');
  key.append(message.substr(0, message.find('\n')));
  if (count_ > 0 && position == position_ && key == key_) {
    ++count_;
  } else {
    count_ = 1;
  }
  position_ = position;
  key_ = std::move(key);
  return count_;
}

std::string RepeatedErrorGuard::advice(std::string_view sqlstate, Lsn position) {
  std::string out;
  // enlargeStringInfo's "Cannot enlarge string buffer containing … bytes by … more bytes" is
  // program_limit_exceeded (PostgreSQL's src/common/stringinfo.c).
  if (sqlstate == pg::sqlstate::kProgramLimitExceeded) {
    out =
        "Likely cause: one change whose wal2json line would exceed PostgreSQL's 1 GB string "
        "limit (a huge value, or a huge value escaped six-fold, or a large bytea under REPLICA "
        "IDENTITY FULL). ";
  }
  out += "walrelay never skips a change by itself. Ways on: find the transaction at or after " +
         position.to_string() +
         " (pg_waldump, or pg_logical_slot_peek_changes on a copy of the slot: "
         "pg_copy_logical_replication_slot), fix its cause if the server can decode it then, or "
         "move the slot past that transaction with pg_replication_slot_advance, knowing its "
         "changes are then missing from the stream and must be replayed by other means";
  return out;
}

}  // namespace walrelay
