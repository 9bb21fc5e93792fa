#pragma once

// The bounded-memory comparison of two sides (the source's rows and a topic's records), each a
// multiset of (event id, payload digest): every entry goes to bucket hash(id) mod B, and each side
// keeps per bucket only a count and a sum of entry hashes (16 bytes). Two buckets with the same
// entries have the same count and sum; a bucket that differs is read again in full ("expanded"),
// only those, in rounds whose entries fit a configured bound. This is the shape of a Merkle-style
// anti-entropy summary with one level (Apache Cassandra's repair compares hash trees of ranges the
// same way), chosen because Kafka cannot be read by key: each side is read as a stream, twice.
//
// Memory: 2 x B x 16 bytes for the sums, plus at most `max_entries` expanded entries at a time
// (one bucket larger than the bound is still expanded alone: spilling sorted runs to disk is not
// implemented).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace walrelay::reconcile {

/// A 64-bit hash of an event id (FNV-1a over the bytes, then the splitmix64 finaliser so that
/// the low bits, which pick the bucket, depend on every byte). Deterministic across runs and
/// machines.
std::uint64_t id_hash(std::string_view id);

/// The hash of one entry: its id's hash combined with the first 16 hex digits of its digest
/// (lower-case hex SHA-256, or "" for a tombstone). Equal entries hash equal; an id with another
/// digest hashes differently (but for a 2^-64 accident).
std::uint64_t entry_hash(std::string_view id, std::string_view digest);

/// One side's summary: per bucket, how many entries and the sum (mod 2^64) of their entry_hash.
/// Plain value; one owner.
class BucketSums {
 public:
  /// `buckets` > 0 (reconcile.buckets).
  explicit BucketSums(std::size_t buckets);

  /// The bucket of `id`: id_hash(id) mod buckets().
  [[nodiscard]] std::uint32_t bucket_of(std::string_view id) const;
  /// Adds one entry (a record's or a row's id and digest).
  void add(std::string_view id, std::string_view digest);

  [[nodiscard]] std::size_t buckets() const { return count_.size(); }
  [[nodiscard]] std::uint64_t count(std::uint32_t bucket) const { return count_[bucket]; }
  [[nodiscard]] std::uint64_t sum(std::uint32_t bucket) const { return sum_[bucket]; }
  /// Entries added, over every bucket.
  [[nodiscard]] std::uint64_t total() const { return total_; }

 private:
  std::vector<std::uint64_t> count_;
  std::vector<std::uint64_t> sum_;
  std::uint64_t total_ = 0;
};

/// The buckets whose count or sum differs between `a` and `b` (same number of buckets), in
/// increasing order.
std::vector<std::uint32_t> differing_buckets(const BucketSums& a, const BucketSums& b);

/// Groups `buckets` (differing_buckets' result) into rounds, in order, each holding buckets whose
/// entries on both sides (a.count + b.count) add up to at most `max_entries`; a bucket larger than
/// `max_entries` alone is a round of its own (the bound is then exceeded by that bucket).
std::vector<std::vector<std::uint32_t>> plan_rounds(const std::vector<std::uint32_t>& buckets,
                                                    const BucketSums& a, const BucketSums& b,
                                                    std::size_t max_entries);

/// Which buckets a round expands: a bit per bucket, tested for every entry read again.
class BucketSet {
 public:
  BucketSet(std::size_t buckets, const std::vector<std::uint32_t>& members);
  [[nodiscard]] bool contains(std::uint32_t bucket) const { return bits_[bucket]; }

 private:
  std::vector<bool> bits_;
};

}  // namespace walrelay::reconcile
