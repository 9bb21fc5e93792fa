#include "walrelay/reconcile/buckets.hpp"

namespace walrelay::reconcile {

namespace {

// splitmix64's finaliser (Steele, Lea, Flood: "Fast splittable pseudorandom number generators",
// OOPSLA 2014): a bijection that spreads every input bit over the output.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 0;
}

}  // namespace

std::uint64_t id_hash(std::string_view id) {
  // FNV-1a 64 (offset basis and prime from the FNV reference, isthe.com/chongo/tech/comp/fnv).
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : id) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return mix(h);
}

std::uint64_t entry_hash(std::string_view id, std::string_view digest) {
  std::uint64_t d = 0;
  for (std::size_t i = 0; i < 16 && i < digest.size(); ++i) {
    d = (d << 4) | static_cast<std::uint64_t>(hex_digit(digest[i]));
  }
  // A tombstone ("") and a digest of zeros must not collide: mark the length in.
  return mix(id_hash(id) ^ mix(d + digest.size()));
}

BucketSums::BucketSums(std::size_t buckets)
    : count_(buckets == 0 ? 1 : buckets, 0), sum_(buckets == 0 ? 1 : buckets, 0) {}

std::uint32_t BucketSums::bucket_of(std::string_view id) const {
  return static_cast<std::uint32_t>(id_hash(id) % count_.size());
}

void BucketSums::add(std::string_view id, std::string_view digest) {
  const std::uint32_t b = bucket_of(id);
  ++count_[b];
  sum_[b] += entry_hash(id, digest);
  ++total_;
}

std::vector<std::uint32_t> differing_buckets(const BucketSums& a, const BucketSums& b) {
  std::vector<std::uint32_t> out;
  const std::size_t n = a.buckets() < b.buckets() ? a.buckets() : b.buckets();
  for (std::uint32_t i = 0; i < n; ++i) {
    if (a.count(i) != b.count(i) || a.sum(i) != b.sum(i)) out.push_back(i);
  }
  return out;
}

std::vector<std::vector<std::uint32_t>> plan_rounds(const std::vector<std::uint32_t>& buckets,
                                                    const BucketSums& a, const BucketSums& b,
                                                    std::size_t max_entries) {
  std::vector<std::vector<std::uint32_t>> rounds;
  std::uint64_t in_round = 0;
  for (const std::uint32_t bucket : buckets) {
    const std::uint64_t entries = a.count(bucket) + b.count(bucket);
    if (rounds.empty() || (in_round + entries > max_entries && !rounds.back().empty())) {
      rounds.emplace_back();
      in_round = 0;
    }
    rounds.back().push_back(bucket);
    in_round += entries;
  }
  return rounds;
}

BucketSet::BucketSet(std::size_t buckets, const std::vector<std::uint32_t>& members)
    : bits_(buckets, false) {
  for (const std::uint32_t m : members) {
    if (m < bits_.size()) bits_[m] = true;
  }
}

}  // namespace walrelay::reconcile
