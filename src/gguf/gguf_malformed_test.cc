// Malformed GGUF files: each is a valid file from GgufWriter with bytes
// patched or cut, and must be refused with the right code and a message that
// says what and where.
#include <limits>

#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"

namespace kvs::gguf {
namespace {

using testing::Bytes;
using testing::FindBytes;
using testing::Parse;
using testing::Patch;
using testing::PatchStr;
using testing::Pattern;
constexpr StatusCode kDataLoss = StatusCode::kDataLoss;
constexpr StatusCode kUnimplemented = StatusCode::kUnimplemented;

// Byte offset of the field right after the string `s` (a key or tensor name).
size_t After(const Bytes& b, std::string_view s) { return FindBytes(b, s) + s.size(); }

TEST(GgufMalformed, TruncationAtEveryOffsetIsRefused) {
  const Bytes full = testing::SmallFile();
  ASSERT_TRUE(Parse(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    const Bytes cut(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    auto r = Parse(cut);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(r.status().code(), kDataLoss) << n << ": " << r.status().ToString();
    const std::string& m = r.status().message();
    const bool says_short = m.find("truncated file") != std::string::npos ||
                            m.find("remain") != std::string::npos ||  // counts/lengths beyond the end
                            m.find("past the end") != std::string::npos;
    EXPECT_TRUE(says_short) << n << ": " << m;
  }
}

TEST(GgufMalformed, BadMagic) {
  Bytes b = testing::SmallFile();
  PatchStr(b, 0, "GGML");
  EXPECT_GGUF_ERROR(b, kDataLoss, "bad magic 47 47 4d 4c at byte offset 0");
}

TEST(GgufMalformed, UnsupportedVersions) {
  Bytes b = testing::SmallFile();
  Patch<uint32_t>(b, 4, 1);
  EXPECT_GGUF_ERROR(b, kUnimplemented, "GGUF version 1 is not supported");
  Patch<uint32_t>(b, 4, 4);
  EXPECT_GGUF_ERROR(b, kUnimplemented, "unsupported GGUF version 4");
  Patch<uint32_t>(b, 4, 0);
  EXPECT_GGUF_ERROR(b, kUnimplemented, "unsupported GGUF version 0");
  Patch<uint32_t>(b, 4, 0x03000000);
  EXPECT_GGUF_ERROR(b, kUnimplemented, "big-endian");
}

TEST(GgufMalformed, AbsurdCountsRefusedBeforeAllocating) {
  Bytes b = testing::SmallFile();
  Patch<uint64_t>(b, 16, uint64_t{1} << 60);
  EXPECT_GGUF_ERROR(b, kDataLoss, "metadata count 1152921504606846976 at byte offset 16");
  b = testing::SmallFile();
  Patch<uint64_t>(b, 8, std::numeric_limits<uint64_t>::max());
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor count 18446744073709551615 at byte offset 8");
  // Each count alone could fit; together they cannot.
  b = testing::SmallFile();
  Patch<uint64_t>(b, 8, (b.size() - 24) / 32);
  Patch<uint64_t>(b, 16, (b.size() - 24) / 13);
  EXPECT_GGUF_ERROR(b, kDataLoss, "are more than the remaining");
}

TEST(GgufMalformed, HugeStringAndArrayLengths) {
  Bytes b = testing::SmallFile();
  // The key's own length field sits right before the key bytes.
  Patch<uint64_t>(b, FindBytes(b, "general.architecture") - 8, uint64_t{1} << 62);
  EXPECT_GGUF_ERROR(b, kDataLoss, "metadata key #0 of 4611686018427387904 bytes at byte offset 24 runs past the end");

  b = testing::SmallFile();
  const size_t str_len = After(b, "general.architecture") + 4;
  Patch<uint64_t>(b, str_len, std::numeric_limits<uint64_t>::max());
  EXPECT_GGUF_ERROR(b, kDataLoss,
                    "metadata key \"general.architecture\": string value of 18446744073709551615 bytes at byte offset");

  b = testing::SmallFile();
  const size_t arr_len = After(b, "tokenizer.ggml.tokens") + 4 + 4;
  Patch<uint64_t>(b, arr_len, uint64_t{1} << 40);
  EXPECT_GGUF_ERROR(b, kDataLoss, "claims 1099511627776 string items");
}

TEST(GgufMalformed, TotalArrayItemLimit) {
  // Enough bytes that the per-array check passes, so the global cap is what refuses.
  GgufWriter w;
  w.Add("big", Value::MakeArray(ValueType::kUint8, {}));
  Bytes b = w.Serialize();
  Patch<uint64_t>(b, After(b, "big") + 8, kMaxMetadataValues + 1);
  b.resize(b.size() + kMaxMetadataValues + 64, 0);
  EXPECT_GGUF_ERROR(b, kDataLoss, "array items in total");
}

TEST(GgufMalformed, UnknownValueTypes) {
  Bytes b = testing::SmallFile();
  Patch<uint32_t>(b, After(b, "llama.block_count"), 13);
  EXPECT_GGUF_ERROR(b, kDataLoss, "metadata key \"llama.block_count\": unknown value type 13 at byte offset");
  b = testing::SmallFile();
  Patch<uint32_t>(b, After(b, "tokenizer.ggml.tokens") + 4, 0xffffffffu);
  EXPECT_GGUF_ERROR(b, kDataLoss, "unknown array element type 4294967295");
}

TEST(GgufMalformed, BoolMustBeZeroOrOne) {
  GgufWriter w;
  w.AddBool("flag", true);
  Bytes b = w.Serialize();
  b[After(b, "flag") + 4] = 2;
  EXPECT_GGUF_ERROR(b, kDataLoss, "metadata key \"flag\": bool value 2 at byte offset");
}

TEST(GgufMalformed, NestingDepthLimit) {
  // The writer refuses to go past the limit, so build the bytes by hand:
  // one key whose value is an array of arrays ... kMaxArrayDepth + 1 deep.
  Bytes b;
  auto put = [&](auto x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    b.insert(b.end(), p, p + sizeof(x));
  };
  auto put32 = [&](uint32_t x) { put(x); };
  auto put64 = [&](uint64_t x) { put(x); };
  put32(0x46554747);
  put32(3);
  put64(0);
  put64(1);
  put64(4);
  b.insert(b.end(), {'d', 'e', 'e', 'p'});
  put32(9);
  for (int d = 0; d < kMaxArrayDepth + 1; ++d) {
    put32(9);
    put64(1);
  }
  put32(0);
  put64(0);
  EXPECT_GGUF_ERROR(b, kDataLoss, "nested deeper than 8 levels");
}

TEST(GgufMalformed, DuplicateKeysAndTensorNames) {
  GgufWriter w;
  w.AddUint32("dup.a", 1);
  w.AddUint32("dup.b", 2);
  w.AddTensor("ta", DType::kF32, {8}, Pattern(32, 1));
  w.AddTensor("tb", DType::kF32, {8}, Pattern(32, 2));
  const Bytes good = w.Serialize();
  ASSERT_TRUE(Parse(good).ok());
  Bytes b = good;
  PatchStr(b, FindBytes(b, "dup.b"), "dup.a");
  EXPECT_GGUF_ERROR(b, kDataLoss, "duplicate metadata key \"dup.a\" at byte offset");
  b = good;
  PatchStr(b, FindBytes(b, "tb"), "ta");
  EXPECT_GGUF_ERROR(b, kDataLoss, "duplicate tensor name \"ta\" at byte offset");
}

TEST(GgufMalformed, NamesMustBeValidUtf8) {
  GgufWriter w;
  w.AddUint32("key.XXXX", 1);
  w.AddTensor("tensorXXXX", DType::kF32, {8}, Pattern(32, 1));
  const Bytes good = w.Serialize();
  const std::string_view bad[] = {
      "\xc0\xaf" "aa",       // overlong
      "\xe0\x80\xaf" "a",    // overlong 3-byte
      "\xed\xa0\x80" "a",    // surrogate U+D800
      "\xf4\x90\x80\x80",    // above U+10FFFF
      "aa\xe2\x82",          // truncated at the end of the name
      "\x80" "aaa",          // stray continuation byte
      "\xfe" "aaa",
  };
  for (std::string_view s : bad) {
    SCOPED_TRACE(QuoteString(s));
    Bytes b = good;
    PatchStr(b, FindBytes(b, "XXXX"), s);
    EXPECT_GGUF_ERROR(b, kDataLoss, "metadata key \"key.");
    EXPECT_GGUF_ERROR(b, kDataLoss, "is not valid UTF-8");
    b = good;
    PatchStr(b, FindBytes(b, "tensorXXXX") + 6, s);
    EXPECT_GGUF_ERROR(b, kDataLoss, "tensor name \"tensor");
    EXPECT_GGUF_ERROR(b, kDataLoss, "is not valid UTF-8");
  }
}

TEST(GgufMalformed, EmptyNames) {
  GgufWriter w;
  w.AddUint32("k", 1);
  Bytes b = w.Serialize();
  // Turn the key "k" into "" followed by a stray byte: the length field says 0.
  Patch<uint64_t>(b, FindBytes(b, "k") - 8, 0);
  EXPECT_GGUF_ERROR(b, kDataLoss, "metadata key #0 at byte offset 24 is empty");
}

TEST(GgufMalformed, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w;
    w.AddUint32("general.alignment", 32);
    w.AddTensor("t", DType::kF32, {8}, Pattern(32, 1));
    Bytes b = w.Serialize();
    Patch<uint32_t>(b, After(b, "general.alignment") + 4, a);
    EXPECT_GGUF_ERROR(b, kDataLoss, "\"general.alignment\" must be a nonzero power of two, got uint32 " +
                                        std::to_string(a));
  }
  GgufWriter w;
  w.AddString("general.alignmenX", "32");  // the writer refuses a string alignment; patch the name
  Bytes b = w.Serialize();
  PatchStr(b, FindBytes(b, "alignmenX"), "alignment");
  EXPECT_GGUF_ERROR(b, kDataLoss, "must be a nonzero power of two, got string \"32\"");
}

// A file with one tensor "weight" of type Q8_0, dims {64, 2}, for patching.
Bytes OneTensor() {
  GgufWriter w;
  w.AddTensor("weight", DType::kQ8_0, {64, 2}, Pattern(136, 1));
  return w.Serialize();
}
constexpr size_t kNDims = 0, kDim0 = 4, kDim1 = 12, kType = 20, kOffset = 24;  // after the name

TEST(GgufMalformed, TensorDims) {
  Bytes b = OneTensor();
  const size_t at = After(b, "weight");
  Patch<uint32_t>(b, at + kNDims, 0);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": 0 dimensions at byte offset");
  Patch<uint32_t>(b, at + kNDims, 5);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": 5 dimensions at byte offset");
  b = OneTensor();
  Patch<uint64_t>(b, at + kDim1, 0);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": dimension 1 is 0 at byte offset");
  b = OneTensor();
  Patch<uint64_t>(b, at + kDim0, std::numeric_limits<uint64_t>::max());
  EXPECT_GGUF_ERROR(b, kDataLoss, "dimension 0 is 18446744073709551615");
  b = OneTensor();
  Patch<uint64_t>(b, at + kDim0, uint64_t{1} << 40);
  Patch<uint64_t>(b, at + kDim1, uint64_t{1} << 40);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": element count overflows at dimension 1");
  b = OneTensor();
  Patch<uint64_t>(b, at + kDim0, 48);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": row length 48 is not a multiple of the Q8_0 block size 32");
}

TEST(GgufMalformed, TensorByteSizeOverflow) {
  Bytes b = OneTensor();
  const size_t at = After(b, "weight");
  // 31 * 2^58 elements fit int64, but their Q8_0 bytes (34 per 32) do not.
  Patch<uint64_t>(b, at + kDim0, uint64_t{1} << 58);
  Patch<uint64_t>(b, at + kDim1, 31);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": data size overflows");
}

TEST(GgufMalformed, TensorTypes) {
  Bytes b = OneTensor();
  const size_t at = After(b, "weight");
  Patch<uint32_t>(b, at + kType, 16);  // IQ2_XXS: a real ggml type this build does not know
  EXPECT_GGUF_ERROR(b, kUnimplemented, "tensor \"weight\": unknown tensor type id 16 at byte offset");
  Patch<uint32_t>(b, at + kType, 1000);
  EXPECT_GGUF_ERROR(b, kUnimplemented, "unknown tensor type id 1000");
  // Known but not computable: the reader accepts it (Q5_1, 32-element blocks of 24 bytes).
  GgufWriter w;
  w.AddTensor("q51", DType::kQ5_1, {256}, Pattern(8 * 24, 1));
  const Bytes bytes = w.Serialize();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->tensors()[0].type, DType::kQ5_1);
  EXPECT_FALSE(Traits(DType::kQ5_1).supported);
}

TEST(GgufMalformed, TensorOffsets) {
  Bytes b = OneTensor();
  const size_t at = After(b, "weight");
  Patch<uint64_t>(b, at + kOffset, 8);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": data offset 8 is not a multiple of the alignment 32");
  Patch<uint64_t>(b, at + kOffset, 32);
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor \"weight\": data at byte offset");
  EXPECT_GGUF_ERROR(b, kDataLoss, "runs past the end of the file");
  Patch<uint64_t>(b, at + kOffset, std::numeric_limits<uint64_t>::max() - 31);
  EXPECT_GGUF_ERROR(b, kDataLoss, "runs past the end of the file");
  // Data cut off: the last tensor's bytes are missing.
  b = OneTensor();
  b.resize(b.size() - 30);
  EXPECT_GGUF_ERROR(b, kDataLoss, "runs past the end of the file");
  // Header claims its data starts past the end.
  GgufWriter w;
  w.AddString("s", std::string(40, 'x'));
  w.AddTensor("the_tensor", DType::kF32, {8}, Pattern(32, 1));
  b = w.Serialize();
  const size_t header_end = After(b, "the_tensor") + 4 + 8 + 4 + 8;
  ASSERT_NE(header_end % 32, 0u);
  b.resize(header_end);  // padding and data gone
  EXPECT_GGUF_ERROR(b, kDataLoss, "tensor data should start at byte offset");
}

TEST(GgufMalformed, OverlappingTensors) {
  GgufWriter w;
  w.AddTensor("first", DType::kF32, {16}, Pattern(64, 1));
  w.AddTensor("second", DType::kF32, {8}, Pattern(32, 2));
  Bytes b = w.Serialize();
  ASSERT_TRUE(Parse(b).ok());
  Patch<uint64_t>(b, After(b, "second") + 4 + 8 + 4, 32);  // inside "first" [0, 64)
  EXPECT_GGUF_ERROR(b, kDataLoss,
                    "tensors \"first\" (data offset 0, 64 bytes) and \"second\" (data offset 32) overlap");
  Patch<uint64_t>(b, After(b, "second") + 4 + 8 + 4, 0);  // same start
  EXPECT_GGUF_ERROR(b, kDataLoss, "overlap");
  Patch<uint64_t>(b, After(b, "second") + 4 + 8 + 4, 64);  // adjacent is fine
  EXPECT_TRUE(Parse(b).ok());
}

}  // namespace
}  // namespace kvs::gguf
