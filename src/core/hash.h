// SHA-256, for identity hashes (the step cache key) and content digests.
#ifndef STEPS_CORE_HASH_H_
#define STEPS_CORE_HASH_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace steps {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  // Finishes the digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> Digest();
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_len_ = 0;
};

std::string Sha256Hex(std::string_view data);

// xxHash64 of `data` (four lanes of 8-byte multiply rounds, about 8 bytes
// a cycle), for telling whether bytes kept from before changed; not for
// anything an adversary chooses. Equal input and seed give equal hashes,
// in every process.
uint64_t FastHash64(std::string_view data, uint64_t seed = 0);

// `h` with `field` hashed into it (FastHash64 seeded by what came before,
// the field's length included): chained over a record's fields, ("ab","c")
// and ("a","bc") differ.
uint64_t FastHashChain(uint64_t h, std::string_view field);

// Hashes a sequence of named fields unambiguously: each field is framed by
// its name and its length, so ("ab","c") and ("a","bc") differ and a field
// that is absent differs from one that is empty.
class FieldHasher {
 public:
  FieldHasher& Add(std::string_view name, std::string_view value);
  FieldHasher& AddAbsent(std::string_view name);
  std::string HexDigest() { return sha_.HexDigest(); }

 private:
  Sha256 sha_;
};

}  // namespace steps

#endif  // STEPS_CORE_HASH_H_
