#include "core/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace steps {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(
      Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  std::string data(300, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  Sha256 sha;
  for (size_t i = 0; i < data.size(); i += 13)
    sha.Update(std::string_view(data).substr(i, 13));
  EXPECT_EQ(sha.HexDigest(), Sha256Hex(data));
}

TEST(FieldHasherTest, FramingPreventsAmbiguity) {
  auto h = [](std::string a, std::string b) {
    return FieldHasher().Add("x", a).Add("y", b).HexDigest();
  };
  EXPECT_NE(h("ab", "c"), h("a", "bc"));
  EXPECT_EQ(h("ab", "c"), h("ab", "c"));
  EXPECT_NE(FieldHasher().Add("x", "").HexDigest(),
            FieldHasher().AddAbsent("x").HexDigest());
}

// FastHash64 is xxHash64: its published values, over every tail length
// the lanes leave (0-3 bytes, 4-7, 8 and more, a lane of 32 and more).
TEST(FastHash64Test, IsXxHash64) {
  EXPECT_EQ(FastHash64(""), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(FastHash64("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(FastHash64("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(FastHash64("steps", 7), 0x8960905DF49796CEULL);
  EXPECT_EQ(FastHash64("0123456789abcdef0123456789abcdef0123456789"),
            0xA76190C3ACF08A1CULL);
  std::string bytes;
  for (int i = 0; i < 3; ++i) {
    for (int c = 0; c < 256; ++c) bytes.push_back(static_cast<char>(c));
  }
  bytes += "xyz12";
  EXPECT_EQ(FastHash64(bytes, 42), 0x8E4005C4BEADD1A1ULL);
}

TEST(FastHash64Test, EveryByteAndTheSeedCount) {
  const std::string base(100, 'q');
  const uint64_t h = FastHash64(base);
  for (size_t i = 0; i < base.size(); ++i) {
    std::string changed = base;
    changed[i] = 'r';
    EXPECT_NE(FastHash64(changed), h) << "byte " << i;
  }
  EXPECT_NE(FastHash64(base, 1), h);
  EXPECT_NE(FastHash64(base.substr(1)), h);
}

}  // namespace
}  // namespace steps
