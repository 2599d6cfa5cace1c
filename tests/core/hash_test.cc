#include "core/hash.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace steps
