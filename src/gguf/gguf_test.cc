// GGUF reader/writer: round trips, accessors, real files from ../shared and
// the fuzz seed corpus. Malformed inputs are in gguf_malformed_test.cc.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "gguf/gguf_test_util.h"

namespace kvs::gguf {
namespace {

using testing::Bytes;
using testing::Parse;
using testing::Pattern;
using testing::SameValue;

TEST(Utf8, AcceptsWellFormed) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("blk.0.attn_q.weight"));
  EXPECT_TRUE(IsValidUtf8("\xc2\x80"));              // U+0080
  EXPECT_TRUE(IsValidUtf8("\xdf\xbf"));              // U+07FF
  EXPECT_TRUE(IsValidUtf8("\xe0\xa0\x80"));          // U+0800
  EXPECT_TRUE(IsValidUtf8("\xed\x9f\xbf"));          // U+D7FF, just below the surrogates
  EXPECT_TRUE(IsValidUtf8("\xee\x80\x80"));          // U+E000, just above
  EXPECT_TRUE(IsValidUtf8("\xef\xbf\xbf"));          // U+FFFF
  EXPECT_TRUE(IsValidUtf8("\xf0\x90\x80\x80"));      // U+10000
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));      // U+10FFFF
  EXPECT_TRUE(IsValidUtf8(std::string_view("a\0b", 3)));
}

TEST(Utf8, RefusesMalformed) {
  EXPECT_FALSE(IsValidUtf8("\x80"));                 // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));             // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xc1\xbf"));             // overlong
  EXPECT_FALSE(IsValidUtf8("\xe0\x9f\xbf"));         // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xf0\x8f\xbf\xbf"));     // overlong 4-byte
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));         // U+D800 surrogate
  EXPECT_FALSE(IsValidUtf8("\xed\xbf\xbf"));         // U+DFFF surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));     // U+110000
  EXPECT_FALSE(IsValidUtf8("\xf5\x80\x80\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("a\xe2\x82"));            // truncated at the end
  EXPECT_FALSE(IsValidUtf8("\xe2\x82z"));            // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xf0\x9f\x98"));         // truncated 4-byte
}

// Every scalar type at its extremes, strings, and arrays nested to the limit.
std::vector<KeyValue> AllValues() {
  std::vector<KeyValue> kv;
  auto add = [&](std::string k, Value v) { kv.push_back(KeyValue{std::move(k), std::move(v)}); };
  auto strings = [](std::vector<std::string> v) {
    std::vector<Value> items;
    for (auto& s : v) items.push_back(Value::String(std::move(s)));
    return Value::MakeArray(ValueType::kString, std::move(items));
  };
  add("u8", Value::Uint(ValueType::kUint8, 255));
  add("i8", Value::Int(ValueType::kInt8, -128));
  add("u16", Value::Uint(ValueType::kUint16, 65535));
  add("i16", Value::Int(ValueType::kInt16, -32768));
  add("u32", Value::Uint(ValueType::kUint32, 0xffffffffu));
  add("i32", Value::Int(ValueType::kInt32, std::numeric_limits<int32_t>::min()));
  add("u64", Value::Uint(ValueType::kUint64, std::numeric_limits<uint64_t>::max()));
  add("i64", Value::Int(ValueType::kInt64, std::numeric_limits<int64_t>::min()));
  add("f32", Value::Float(ValueType::kFloat32, -0.0));
  add("f32.inf", Value::Float(ValueType::kFloat32, std::numeric_limits<double>::infinity()));
  add("f32.nan", Value::Float(ValueType::kFloat32, std::numeric_limits<double>::quiet_NaN()));
  add("f64", Value::Float(ValueType::kFloat64, 0.1));
  add("bool.t", Value::Bool(true));
  add("bool.f", Value::Bool(false));
  add("str", Value::String("h\xc3\xa9llo \"w\"\n"));
  add("str.empty", Value::String(""));
  add("str.binary", Value::String(std::string("\0\xff\xfe", 3)));
  add("arr.str", strings({"<s>", "", "\xe2\x96\x81the"}));
  add("arr.f32", Value::MakeArray(ValueType::kFloat32, {Value::Float(ValueType::kFloat32, 1.5),
                                                         Value::Float(ValueType::kFloat32, -2.25)}));
  add("arr.i32", Value::MakeArray(ValueType::kInt32, {}));
  add("arr.u64", Value::MakeArray(ValueType::kUint64, {Value::Uint(ValueType::kUint64, 1)}));
  add("arr.bool", Value::MakeArray(ValueType::kBool, {Value::Bool(true), Value::Bool(false)}));
  add("arr.empty_arrays", Value::MakeArray(ValueType::kArray, {Value::MakeArray(ValueType::kUint8, {}),
                                                               Value::MakeArray(ValueType::kString, {})}));
  // merges-style: array of arrays of strings, ragged.
  add("arr.nested", Value::MakeArray(ValueType::kArray, {strings({"a", "b"}), strings({"c"})}));
  Value deep = Value::Int(ValueType::kInt16, 7);
  for (int d = 0; d < kMaxArrayDepth; ++d) {
    const ValueType t = deep.type;
    deep = Value::MakeArray(t, {std::move(deep)});
  }
  add("arr.deepest", std::move(deep));
  return kv;
}

GgufWriter AllValuesWriter() {
  GgufWriter w;
  for (KeyValue& kv : AllValues()) w.Add(std::move(kv.key), std::move(kv.value));
  return w;
}

TEST(GgufRoundTrip, EveryValueType) {
  GgufWriter w = AllValuesWriter();
  const Bytes b = w.Serialize();
  auto f = Parse(b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(b, AllValuesWriter().Serialize());  // deterministic
  const std::vector<KeyValue> want = AllValues();
  const auto& md = (*f)->metadata();
  ASSERT_EQ(md.size(), want.size());
  for (size_t i = 0; i < md.size(); ++i) {  // same order, same values
    SCOPED_TRACE(want[i].key);
    EXPECT_EQ(md[i].key, want[i].key);
    EXPECT_TRUE(SameValue(md[i].value, want[i].value));
    EXPECT_EQ((*f)->Find(want[i].key), &md[i].value);
  }
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_TRUE((*f)->tensors().empty());

  EXPECT_EQ(*(*f)->Find("u8")->AsUint(), 255u);
  EXPECT_EQ(*(*f)->Find("i8")->AsInt(), -128);
  EXPECT_EQ(*(*f)->Find("u16")->AsUint(), 65535u);
  EXPECT_EQ(*(*f)->Find("i16")->AsInt(), -32768);
  EXPECT_EQ(*(*f)->Find("u32")->AsUint(), 0xffffffffu);
  EXPECT_EQ(*(*f)->Find("i32")->AsInt(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*(*f)->Find("u64")->AsUint(), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE((*f)->Find("u64")->AsInt().has_value());
  EXPECT_EQ(*(*f)->Find("i64")->AsInt(), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(std::signbit(*(*f)->Find("f32")->AsFloat()));
  EXPECT_TRUE(std::isinf(*(*f)->Find("f32.inf")->AsFloat()));
  EXPECT_TRUE(std::isnan(*(*f)->Find("f32.nan")->AsFloat()));
  EXPECT_EQ(*(*f)->Find("f64")->AsFloat(), 0.1);
  EXPECT_EQ(*(*f)->Find("bool.t")->AsBool(), true);
  EXPECT_EQ(*(*f)->Find("bool.f")->AsBool(), false);
  EXPECT_EQ(*(*f)->Find("str")->AsString(), "h\xc3\xa9llo \"w\"\n");
  EXPECT_EQ(*(*f)->Find("str.binary")->AsString(), std::string("\0\xff\xfe", 3));
  const Array* nested = (*f)->Find("arr.nested")->AsArray();
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->items.size(), 2u);
  EXPECT_EQ(nested->elem_type, ValueType::kArray);
  EXPECT_EQ(*nested->items[1].AsArray()->items[0].AsString(), "c");

  const Value* deep = (*f)->Find("arr.deepest");
  int depth = 0;
  while (const Array* a = deep->AsArray()) {
    ++depth;
    ASSERT_EQ(a->items.size(), 1u);
    deep = &a->items[0];
  }
  EXPECT_EQ(depth, kMaxArrayDepth);
  EXPECT_EQ(*deep->AsInt(), 7);
}

TEST(GgufRoundTrip, ExplicitValuesMatch) {
  // Independent of the reader: compare against Values built here.
  GgufWriter w;
  const Value v = Value::MakeArray(
      ValueType::kArray, {Value::MakeArray(ValueType::kFloat64, {Value::Float(ValueType::kFloat64, -1e300)}),
                          Value::MakeArray(ValueType::kFloat64, {})});
  w.Add("k", v);
  const Bytes bytes = w.Serialize();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(SameValue(*(*f)->Find("k"), v));
  EXPECT_FALSE(SameValue(*(*f)->Find("k"), Value::MakeArray(ValueType::kArray, {})));
}

TEST(GgufRoundTrip, EveryTensorDType) {
  GgufWriter w;
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = GetDTypeTraits(id);
    if (!tr) continue;
    ids.push_back(id);
    const auto t = static_cast<DType>(id);
    const std::vector<int64_t> dims = {tr->block_size * 2, 3};
    w.AddTensor(std::string("t.") + tr->name, t, dims,
                Pattern(static_cast<size_t>(RowBytes(t, dims[0]) * 3), id));
  }
  ASSERT_EQ(ids.size(), 22u);  // every id in base/dtype.cc's table
  w.AddTensor("t.4d", DType::kF16, {2, 3, 4, 5}, Pattern(2 * 3 * 4 * 5 * 2, 99));
  const Bytes b = w.Serialize();
  auto f = Parse(b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufFile& g = **f;
  ASSERT_EQ(g.tensors().size(), ids.size() + 1);
  EXPECT_EQ(g.data_offset() % 32, 0u);
  for (size_t i = 0; i < ids.size(); ++i) {
    const TensorInfo& t = g.tensors()[i];
    const auto tr = *GetDTypeTraits(ids[i]);
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, std::string("t.") + tr.name);
    EXPECT_EQ(static_cast<uint32_t>(t.type), ids[i]);
    EXPECT_EQ(t.dims, (std::vector<int64_t>{tr.block_size * 2, 3}));
    EXPECT_EQ(t.NumElements(), tr.block_size * 6);
    EXPECT_EQ(t.Rows(), 3);
    EXPECT_EQ(t.nbytes, static_cast<uint64_t>(tr.type_size * 6));
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.data, b.data() + g.data_offset() + t.offset);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), Pattern(t.nbytes, ids[i]));
    EXPECT_EQ(g.FindTensor(t.name), &t);
  }
  const TensorInfo* t4 = g.FindTensor("t.4d");
  ASSERT_NE(t4, nullptr);
  EXPECT_EQ(t4->dims, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(t4->Rows(), 60);
  EXPECT_EQ(g.FindTensor("nope"), nullptr);
}

TEST(GgufRoundTrip, AlignmentKeyControlsLayout) {
  for (uint64_t a : {1u, 8u, 64u, 4096u}) {
    GgufWriter w;
    w.SetAlignment(a);
    w.AddTensor("a", DType::kF32, {3}, Pattern(12, 1));
    w.AddTensor("b", DType::kQ8_0, {32}, Pattern(34, 2));
    const Bytes b = w.Serialize();
    auto f = Parse(b);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ((*f)->alignment(), a);
    EXPECT_EQ(*(*f)->Find("general.alignment")->AsUint(), a);
    EXPECT_EQ((*f)->data_offset() % a, 0u);
    for (const TensorInfo& t : (*f)->tensors()) EXPECT_EQ(t.offset % a, 0u) << t.name;
    EXPECT_EQ(std::vector<uint8_t>((*f)->tensors()[1].data, (*f)->tensors()[1].data + 34), Pattern(34, 2));
  }
}

TEST(GgufRoundTrip, AddReplacesExistingKeyInPlace) {
  GgufWriter w;
  w.AddUint32("a", 1);
  w.AddString("b", "x");
  w.AddString("a", "now a string");
  const Bytes bytes = w.Serialize();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->metadata()[0].key, "a");
  EXPECT_EQ(*(*f)->GetString("a"), "now a string");
}

TEST(GgufRoundTrip, WriteFileThenOpen) {
  const auto dir = kvs::testing::TempDir("gguf_write");
  const std::string path = (dir / "m.gguf").string();
  GgufWriter w = AllValuesWriter();
  w.AddTensor("w", DType::kQ4_0, {64, 2}, Pattern(72, 5));
  ASSERT_TRUE(w.WriteFile(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(std::vector<uint8_t>((*f)->bytes().begin(), (*f)->bytes().end()), w.Serialize());
  const TensorInfo* t = (*f)->FindTensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->nbytes), Pattern(72, 5));
  EXPECT_EQ(w.WriteFile((dir / "no_such_dir" / "x.gguf").string()).code(), StatusCode::kIo);
  std::filesystem::remove_all(dir);
}

TEST(GgufOpen, ReportsIoAndEmptyFiles) {
  auto missing = GgufFile::Open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIo);
  EXPECT_NE(missing.status().message().find("/nonexistent/model.gguf"), std::string::npos);

  const auto dir = kvs::testing::TempDir("gguf_open");
  auto as_dir = GgufFile::Open(dir.string());
  ASSERT_FALSE(as_dir.ok());
  EXPECT_EQ(as_dir.status().code(), StatusCode::kIo);

  const std::string empty = (dir / "empty.gguf").string();
  std::ofstream(empty).close();
  auto e = GgufFile::Open(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(e.status().message().find("empty.gguf: truncated file: magic"), std::string::npos)
      << e.status().ToString();
  std::filesystem::remove_all(dir);
}

TEST(GgufAccessors, TypedGetters) {
  GgufWriter w;
  w.AddString("s", "v");
  w.AddUint32("u", 7);
  w.AddUint64("big", std::numeric_limits<uint64_t>::max());
  w.AddInt32("neg", -3);
  w.AddFloat32("f", 0.5f);
  w.AddBool("b", true);
  w.AddInt32Array("a", {1, 2});
  const Bytes bytes = w.Serialize();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok());
  const GgufFile& f = **r;
  EXPECT_EQ(*f.GetString("s"), "v");
  EXPECT_EQ(*f.GetInt("u"), 7);
  EXPECT_EQ(*f.GetInt("neg"), -3);
  EXPECT_EQ(*f.GetFloat("f"), 0.5);
  EXPECT_EQ(*f.GetFloat("u"), 7.0);  // integers widen to float
  EXPECT_EQ(*f.GetBool("b"), true);
  EXPECT_EQ((*f.GetArray("a"))->items.size(), 2u);

  EXPECT_EQ(f.GetString("missing").status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.GetString("missing").status().message().find("\"missing\""), std::string::npos);
  EXPECT_EQ(f.GetInt("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.GetInt("s").status().message().find("\"s\" is string"), std::string::npos);
  EXPECT_EQ(f.GetString("u").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetBool("u").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetFloat("s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetArray("u").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.GetInt("big").status().code(), StatusCode::kOutOfRange);

  EXPECT_EQ(*f.GetIntOr("missing", 42), 42);
  EXPECT_EQ(*f.GetIntOr("u", 42), 7);
  EXPECT_EQ(f.GetIntOr("s", 42).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*f.GetFloatOr("missing", 1.5), 1.5);
  EXPECT_EQ(*f.GetBoolOr("missing", true), true);
  EXPECT_EQ(f.GetBoolOr("u", true).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*f.GetStringOr("missing", "d"), "d");
  EXPECT_EQ(*f.GetStringOr("s", "d"), "v");
}

TEST(GgufAccessors, ToStringAbbreviatesAndEscapes) {
  std::vector<int32_t> many(100);
  for (int i = 0; i < 100; ++i) many[static_cast<size_t>(i)] = i;
  GgufWriter w;
  w.AddInt32Array("many", many);
  w.AddFloat32("f", 0.1f);
  w.AddString("s", std::string("a\"b\\\n\x01\xc3\xa9\xff", 9));
  const Bytes bytes = w.Serialize();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->Find("many")->ToString(3), "[0, 1, 2, ... (100 items)]");
  EXPECT_EQ((*f)->Find("many")->ToString(0), "[... (100 items)]");
  EXPECT_EQ(TypeString(*(*f)->Find("many")), "array[int32]");
  EXPECT_EQ((*f)->Find("f")->ToString(), "0.1");
  EXPECT_EQ((*f)->Find("s")->ToString(), "\"a\\\"b\\\\\\n\\x01\xc3\xa9\\xff\"");
  EXPECT_EQ(Value::Bool(false).ToString(), "false");
  EXPECT_EQ(Value::MakeArray(ValueType::kArray, {Value::MakeArray(ValueType::kUint8, {})}).ToString(), "[[]]");
  EXPECT_EQ(std::string(ValueTypeName(static_cast<ValueType>(99))), "?");
}

TEST(GgufCompat, AcceptsVersion2) {
  Bytes b = testing::SmallFile();
  testing::Patch<uint32_t>(b, 4, 2);
  auto f = Parse(b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufCompat, MetadataOnlyFileMayOmitPadding) {
  GgufWriter w;
  w.AddString("general.architecture", "x");  // header ends unaligned
  Bytes b = w.Serialize();
  auto padded = Parse(b);
  ASSERT_TRUE(padded.ok());
  const uint64_t header_end = 24 + 8 + 20 + 4 + 8 + 1;
  ASSERT_GT(b.size(), header_end);
  b.resize(header_end);
  auto f = Parse(b);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->data_offset(), b.size());
}

TEST(GgufCompat, TrailingBytesAfterDataAreIgnored) {
  Bytes b = testing::SmallFile();
  b.resize(b.size() + 100, 0xab);
  EXPECT_TRUE(Parse(b).ok());
}

// Tiny valid files for the fuzzer's seed corpus (src/gguf/fuzz_seeds).
std::vector<std::pair<std::string, Bytes>> FuzzSeeds() {
  std::vector<std::pair<std::string, Bytes>> seeds;
  seeds.emplace_back("small.gguf", testing::SmallFile());
  seeds.emplace_back("all_values.gguf", AllValuesWriter().Serialize());
  GgufWriter dtypes;
  for (uint32_t id = 0; id < 64; ++id) {
    if (const auto tr = GetDTypeTraits(id)) {
      dtypes.AddTensor(tr->name, static_cast<DType>(id), {tr->block_size},
                       Pattern(static_cast<size_t>(tr->type_size), id));
    }
  }
  seeds.emplace_back("all_dtypes.gguf", dtypes.Serialize());
  GgufWriter aligned;
  aligned.SetAlignment(8);
  aligned.AddString("general.architecture", "llama");
  aligned.AddTensor("x", DType::kF16, {3, 2}, Pattern(12, 3));
  Bytes v2 = aligned.Serialize();
  v2[4] = 2;
  seeds.emplace_back("aligned8_v2.gguf", v2);
  GgufWriter meta;
  meta.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xe2\x96\x81"});
  meta.AddFloat32Array("tokenizer.ggml.scores", {0, 0, 0, -1});
  Bytes unpadded = meta.Serialize();
  unpadded.resize(unpadded.size() - 1);  // padding cut short: allowed without tensors
  seeds.emplace_back("metadata_only.gguf", unpadded);
  return seeds;
}

// With KVSERVE_WRITE_FUZZ_SEEDS=1 this regenerates the seed files; otherwise
// it checks the committed ones still match the generator and still parse.
TEST(GgufFuzzSeeds, MatchGenerator) {
  const std::filesystem::path dir = std::filesystem::path(kvs::testing::SourceDir()) / "src/gguf/fuzz_seeds";
  const bool write = std::getenv("KVSERVE_WRITE_FUZZ_SEEDS") != nullptr;
  if (write) std::filesystem::create_directories(dir);
  for (const auto& [name, bytes] : FuzzSeeds()) {
    SCOPED_TRACE(name);
    EXPECT_LT(bytes.size(), 4096u);
    auto f = Parse(bytes);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    const auto path = dir / name;
    if (write) {
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
      continue;
    }
    if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is absent";
    std::ifstream in(path, std::ios::binary);
    const Bytes on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(on_disk, bytes) << "regenerate with KVSERVE_WRITE_FUZZ_SEEDS=1";
  }
}

TEST(GgufShared, Stories260K) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto r = GgufFile::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& f = **r;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(*f.GetString("general.architecture"), "llama");
  EXPECT_EQ(*f.GetInt("llama.block_count"), 5);
  EXPECT_EQ(*f.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(*f.GetInt("llama.feed_forward_length"), 172);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count"), 8);
  EXPECT_EQ(*f.GetInt("llama.attention.head_count_kv"), 4);
  EXPECT_EQ((*f.GetArray("tokenizer.ggml.tokens"))->items.size(), 512u);
  const TensorInfo* emb = f.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{64, 512}));
  // 5 layers x 9 tensors + token_embd, output_norm, output.
  EXPECT_EQ(f.tensors().size(), 48u);
  const TensorInfo* wq = f.FindTensor("blk.4.attn_q.weight");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->dims, (std::vector<int64_t>{64, 64}));
  uint64_t end = 0;
  for (const TensorInfo& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.nbytes);
  EXPECT_LE(end, f.file_size());
}

TEST(GgufShared, VocabFilesLoad) {
  KVS_REQUIRE_SHARED(dir, "vocab");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    auto r = GgufFile::Open(e.path().string());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE((*r)->GetString("tokenizer.ggml.model").ok());
    auto tokens = (*r)->GetArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok());
    EXPECT_GT((*tokens)->items.size(), 1000u);
    EXPECT_EQ((*tokens)->elem_type, ValueType::kString);
    ++n;
  }
  EXPECT_EQ(n, 5);
}

}  // namespace
}  // namespace kvs::gguf
