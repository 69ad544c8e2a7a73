// Unit tests on small in-memory vocabularies whose expected tokenizations
// are worked out by hand, plus stories260K (the model the engine runs).
#include <algorithm>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gguf/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace kvs::tok {
namespace tokenizer_test {

using Ids = std::vector<int32_t>;
const std::string kM(kSpaceMarker);  // "▁"

std::unique_ptr<Tokenizer> Build(const GgufVocab& v) {
  auto spec = SpecFromGgufVocab(v);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  KVS_CHECK(spec.ok());
  auto t = Tokenizer::FromSpec(std::move(spec).value());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  KVS_CHECK(t.ok());
  return std::move(t).value();
}

// SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens (ids 3..258),
// then the pieces a test adds.
struct Spm {
  GgufVocab v;
  Spm() {
    v.model = "llama";
    Add("<unk>", 0, 2);
    Add("<s>", 0, 3);
    Add("</s>", 0, 3);
    for (int b = 0; b < 256; ++b) Add(ByteTokenText(static_cast<uint8_t>(b)), 0, 6);
  }
  int32_t Add(const std::string& piece, float score, int32_t type = 1) {
    v.tokens.push_back(piece);
    v.scores.push_back(score);
    v.token_types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  }
  static int32_t Byte(uint8_t b) { return 3 + b; }
};

// Byte-level BPE vocabulary: the 256 byte characters (id = byte), then the
// merged tokens in merge order.
struct Bpe {
  GgufVocab v;
  Bpe() {
    v.model = "gpt2";
    v.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) {
      std::string s;
      AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), &s);
      v.tokens.push_back(s);
      v.token_types.push_back(1);
    }
  }
  // Adds merge "a b" and the token a+b; returns its id.
  int32_t Merge(const std::string& a, const std::string& b) {
    v.merges.push_back(a + " " + b);
    v.tokens.push_back(a + b);
    v.token_types.push_back(1);
    return static_cast<int32_t>(v.tokens.size() - 1);
  }
  int32_t Special(const std::string& text, int32_t type) {
    v.tokens.push_back(text);
    v.token_types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  }
};

TEST(SentencePiece, MergesHighestScoreFirst) {
  Spm f;
  f.Add(kM, -10);
  for (const char* c : {"h", "e", "l", "o"}) f.Add(c, -20);
  f.Add(kM + "h", -5);
  f.Add("he", -1);
  f.Add("ll", -2);
  f.Add("lo", -4);
  f.Add("hell", -3);
  const int32_t hello = f.Add("hello", -0.5f);
  const int32_t whole = f.Add(kM + "hello", -0.1f);
  const int32_t m = 259;
  auto t = Build(f.v);
  // Pops he(-1), ll(-2), hell(-3), hello(-0.5), ▁hello(-0.1). "▁h"(-5) would
  // win if merges went left to right.
  EXPECT_EQ(t->Encode("hello", false, false), Ids({whole}));
  // No space prefix is lost after a control token: the fragment gets its own.
  EXPECT_EQ(t->Encode("<s>hello", false, true), Ids({1, whole}));
  // add_space_prefix=false: no "▁" in front.
  f.v.add_space_prefix = false;
  auto t2 = Build(f.v);
  EXPECT_EQ(t2->Encode("hello", false, false), Ids({hello}));
  EXPECT_EQ(t2->Encode(" hello", false, false), Ids({whole}));
  EXPECT_EQ(t->Encode(" hello", false, false), Ids({m, whole}));  // "▁▁hello"
}

TEST(SentencePiece, EqualScoresMergeLeftmostFirst) {
  Spm f;
  const int32_t m = f.Add(kM, -10);
  const int32_t a = f.Add("a", -20);
  const int32_t aa = f.Add("aa", -1);
  auto t = Build(f.v);
  // "▁aaa": (a,a) at positions 1 and 2 tie; the left pair merges first.
  EXPECT_EQ(t->Encode("aaa", false, false), Ids({m, aa, a}));
  EXPECT_EQ(t->Encode("aaaa", false, false), Ids({m, aa, aa}));
}

TEST(SentencePiece, PiecesSpanningSpacesStillMerge) {
  // "a▁" has U+2581 after another character, so the encoder must not cut the
  // text before each "▁" (its speed-up) and "a▁b" can form.
  Spm f;
  const int32_t m = f.Add(kM, -10);
  f.Add("a", -20);
  f.Add("b", -20);
  f.Add("a" + kM, -1);
  const int32_t a_b = f.Add("a" + kM + "b", -0.5f);
  auto t = Build(f.v);
  EXPECT_EQ(t->Encode("a b", false, false), Ids({m, a_b}));
}

TEST(SentencePiece, ByteFallbackAndDecode) {
  Spm f;
  const int32_t m = f.Add(kM, -10);
  const int32_t h = f.Add("h", -20);
  auto t = Build(f.v);
  // é has no piece: its UTF-8 bytes C3 A9 become byte tokens.
  EXPECT_EQ(t->Encode("hé", false, false), Ids({m, h, Spm::Byte(0xC3), Spm::Byte(0xA9)}));
  // Malformed UTF-8 is encoded byte by byte too.
  EXPECT_EQ(t->Encode("h\xFF", false, false), Ids({m, h, Spm::Byte(0xFF)}));
  EXPECT_EQ(t->Decode(t->Encode("h\xFF", false, false), true), "h\xFF");
  EXPECT_EQ(t->Encode("hé", true, false).front(), 1);
  EXPECT_EQ(t->Decode(t->Encode("hé h", true, false), true), "hé h");
  // The BOS is shown when not skipped; the space prefix is still removed.
  EXPECT_EQ(t->Decode(t->Encode("h", true, false), false), "<s>h");
  EXPECT_EQ(t->TokenPiece(Spm::Byte('A')), "A");
  EXPECT_EQ(t->TokenPiece(m), " ");
  EXPECT_EQ(t->TokenPiece(1), "<s>");
  EXPECT_EQ(t->TokenPiece(-1), "");
  EXPECT_EQ(t->TokenPiece(1 << 30), "");
  EXPECT_EQ(t->Decode(Ids({-5, 1 << 30}), false), "");
  EXPECT_TRUE(t->IsEndOfGeneration(2));
  EXPECT_FALSE(t->IsEndOfGeneration(1));
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_TRUE(t->add_bos());
}

TEST(SentencePiece, ControlTokensNeedParseSpecial) {
  Spm f;
  f.Add(kM, -10);
  for (const char* c : {"<", "s", ">", "/"}) f.Add(c, -20);
  f.Add("<s", -1);  // "<s" and "s>" exist, so "<s>" could be merged if allowed
  f.Add("s>", -2);
  auto t = Build(f.v);
  const Ids as_text = t->Encode("<s></s>", false, false);
  for (int32_t id : as_text) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  EXPECT_EQ(t->Decode(as_text, true), "<s></s>");
  const Ids parsed = t->Encode("<s></s>", false, true);
  EXPECT_EQ(parsed, Ids({1, 2}));
}

TEST(ByteLevelBpe, MergesLowestRankFirst) {
  Bpe f;
  const int32_t he = f.Merge("h", "e");          // rank 0
  const int32_t g_t = f.Merge("Ġ", "t");         // rank 1
  const int32_t g_the = f.Merge("Ġt", "he");     // rank 2
  const int32_t aa = f.Merge("a", "a");          // rank 3
  auto t = Build(f.v);
  EXPECT_EQ(t->Encode(" the", false, false), Ids({g_the}));
  EXPECT_EQ(t->Encode("the", false, false), Ids({'t', he}));
  EXPECT_EQ(t->Encode("aaa", false, false), Ids({aa, 'a'}));  // leftmost pair first
  EXPECT_EQ(t->Encode(" t", false, false), Ids({g_t}));
  // The GPT-2 regex keeps "'s" apart and leaves a space before words.
  EXPECT_EQ(t->Encode("he's", false, false), Ids({he, '\'', 's'}));
  EXPECT_EQ(t->Decode(t->Encode(" the he's", false, false), true), " the he's");
  EXPECT_EQ(t->TokenPiece(g_the), " the");
  EXPECT_EQ(t->TokenText(g_the), "Ġthe");
  EXPECT_FALSE(t->add_bos());
}

TEST(ByteLevelBpe, AnyBytesRoundTrip) {
  Bpe f;
  f.Merge("Ġ", "t");
  auto t = Build(f.v);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    const Ids ids = t->Encode(s, false, false);
    ASSERT_EQ(t->Decode(ids, true), s) << "case " << i;
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < t->vocab_size());
  }
}

TEST(SpecialTokens, UserDefinedAlwaysControlOnlyWhenAsked) {
  Bpe f;
  f.Merge("Ġ", "t");
  const int32_t ctl = f.Special("<|im_end|>", 3);
  const int32_t user = f.Special("<tool>", 4);
  const int32_t longer = f.Special("<tool>!", 4);
  auto t = Build(f.v);
  const Ids plain = t->Encode("a<tool>b<|im_end|>", false, false);
  EXPECT_NE(std::find(plain.begin(), plain.end(), user), plain.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), ctl), plain.end());
  EXPECT_EQ(t->Encode("a<tool>b<|im_end|>", false, true), Ids({'a', user, 'b', ctl}));
  // Leftmost-longest.
  EXPECT_EQ(t->Encode("<tool>!x", false, false), Ids({longer, 'x'}));
  // <|im_end|> is a turn end, so it is end-of-generation and control.
  EXPECT_TRUE(t->IsEndOfGeneration(ctl));
  EXPECT_EQ(t->eot_id(), ctl);
  EXPECT_EQ(t->Decode(Ids({'a', ctl}), true), "a");
  EXPECT_EQ(t->Decode(Ids({'a', ctl}), false), "a<|im_end|>");
}

// EncodeWithPlainRanges: control tokens only where their whole text lies
// outside the plain ranges; user-defined tokens everywhere, as always.
TEST(SpecialTokens, PlainRangesNeverYieldControlTokens) {
  Bpe f;
  f.Merge("Ġ", "t");  // a BPE vocabulary needs at least one merge
  const int32_t ctl = f.Special("<|im_end|>", 3);
  const int32_t user = f.Special("<tool>", 4);
  auto t = Build(f.v);
  const std::string text = "<|im_end|>a<|im_end|><tool>b<|im_end|>";
  //                        0         10 11        21    27 28
  const TextRange middle[] = {{10, 28}};
  const Ids ids = t->EncodeWithPlainRanges(text, false, middle);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ctl), 2) << "the first and last, outside the range";
  EXPECT_EQ(ids.front(), ctl);
  EXPECT_EQ(ids.back(), ctl);
  EXPECT_NE(std::find(ids.begin(), ids.end(), user), ids.end()) << "user-defined tokens are plain vocabulary";
  EXPECT_EQ(t->Decode(ids, false), text);
  // A range that covers only part of a marker's text disables that marker.
  const TextRange tail[] = {{5, 6}};
  const Ids cut = t->EncodeWithPlainRanges("<|im_end|>", false, tail);
  EXPECT_EQ(std::count(cut.begin(), cut.end(), ctl), 0);
  const TextRange before[] = {{0, 1}};
  EXPECT_EQ(t->EncodeWithPlainRanges("x<|im_end|>", false, before), Ids({'x', ctl}));
  // No ranges: parse_special; one range over everything: plain.
  EXPECT_EQ(t->EncodeWithPlainRanges(text, false, {}), t->Encode(text, false, true));
  const TextRange all[] = {{0, text.size()}};
  EXPECT_EQ(t->EncodeWithPlainRanges(text, false, all), t->Encode(text, false, false));
}

TEST(SpecialTokens, LstripRstripSwallowWhitespace) {
  Bpe f;
  f.Merge("Ġ", "t");
  const int32_t tok = f.Special("<x>", 3);
  auto spec = SpecFromGgufVocab(f.v);
  ASSERT_TRUE(spec.ok());
  spec->lstrip.assign(spec->tokens.size(), 0);
  spec->rstrip.assign(spec->tokens.size(), 0);
  spec->lstrip[tok] = 1;
  spec->rstrip[tok] = 1;
  auto t = Tokenizer::FromSpec(std::move(spec).value());
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Encode("a \t<x>\n b", false, true), Ids({'a', tok, 'b'}));
}

TEST(SpecialTokens, Phi3RstripRuleFromGeneralName) {
  Spm f;
  f.Add(kM, -10);
  f.Add("a", -20);
  const int32_t user = f.Add("<|user|>", 0, 3);
  f.v.general_name = "Phi3";
  auto t = Build(f.v);
  // rstrip: the newline after <|user|> is swallowed (as in Phi-3's HF files).
  EXPECT_EQ(t->Encode("<|user|>\na", false, true), t->Encode("<|user|>a", false, true));
  EXPECT_EQ(t->Encode("<|user|>a", false, true).front(), user);
}

TEST(IncrementalDecoder, HoldsPartialCharactersAndMatchesDecode) {
  Spm f;
  f.Add(kM, -10);
  f.Add("h", -20);
  auto t = Build(f.v);
  const std::string text = "h 😀 hé日本 h";
  const Ids ids = t->Encode(text, true, false);
  for (bool skip : {true, false}) {
    IncrementalDecoder dec(*t, skip, /*at_sequence_start=*/true);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = dec.Add(id);
      EXPECT_EQ(SanitizeUtf8(piece), piece) << "emitted a partial character";
      streamed += piece;
    }
    streamed += dec.Flush();
    EXPECT_EQ(streamed, t->Decode(ids, skip));
  }
  // A continuation (not at the sequence start) keeps its leading space.
  IncrementalDecoder cont(*t, true, /*at_sequence_start=*/false);
  EXPECT_EQ(cont.Add(t->Encode("h", false, false)[0]), " ");
}

TEST(IncrementalDecoder, BrokenBytesBecomeReplacementCharacters) {
  Spm f;
  auto t = Build(f.v);
  IncrementalDecoder dec(*t, true, false);
  EXPECT_EQ(dec.Add(Spm::Byte(0xE6)), "");  // first of three
  EXPECT_EQ(dec.Add(Spm::Byte(0x97)), "");
  EXPECT_EQ(dec.Add(Spm::Byte('A')), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(dec.Add(Spm::Byte(0xF0)), "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.Add(Spm::Byte(0xFF)), "\xEF\xBF\xBD");  // can never start a character
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  Bpe f;
  f.Merge("Ġ", "t");
  f.Merge("h", "e");
  f.Merge("Ġt", "he");
  auto t = Build(f.v);
  const std::string text = "the cat said: the end, then 42 cats. 日本語 😀\n\n  done";
  const Ids want = t->Encode(text, false, false);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (t->Encode(text, false, false) != want) ++bad;
        if (t->Decode(want, true) != text) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Tokenizer, RejectsBadSpecs) {
  Spm f;
  f.v.bos_id = 5000;  // out of range: ignored with a warning, default kept
  auto t = Build(f.v);
  EXPECT_EQ(t->bos_id(), 1);
  TokenizerSpec s;
  EXPECT_FALSE(Tokenizer::FromSpec(s).ok());  // empty vocabulary
  s.tokens = {"a", "b"};
  s.eos_id = 7;
  EXPECT_EQ(Tokenizer::FromSpec(s).status().code(), StatusCode::kInvalidArgument);
  s.eos_id = -1;
  s.scores = {1.0f};
  EXPECT_EQ(Tokenizer::FromSpec(s).status().code(), StatusCode::kInvalidArgument);
  GgufVocab v;
  v.model = "bert";
  v.tokens = {"a"};
  EXPECT_EQ(SpecFromGgufVocab(v).status().code(), StatusCode::kUnimplemented);
  v.model = "gpt2";
  EXPECT_EQ(SpecFromGgufVocab(v).status().code(), StatusCode::kInvalidArgument);  // no merges
}

TEST(Tokenizer, UnknownPreTokenizerFallsBackToGpt2) {
  Bpe a;
  a.Merge("Ġ", "t");
  Bpe b = a;
  b.v.pre = "some-future-model";
  auto ta = Build(a.v);
  auto tb = Build(b.v);
  const std::string text = "It's 2024 and we're at 3.14 'til then!!  \n";
  EXPECT_EQ(ta->Encode(text, false, false), tb->Encode(text, false, false));
}

TEST(Stories260K, EncodesAndDecodes) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto t = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  EXPECT_EQ(tok.vocab_size(), 512);
  EXPECT_EQ(tok.model(), ModelKind::kSentencePiece);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.unk_id(), 0);
  EXPECT_EQ(tok.pad_id(), -1);  // stored as 0xFFFFFFFF
  EXPECT_TRUE(tok.add_bos());
  EXPECT_TRUE(tok.IsEndOfGeneration(2));
  EXPECT_EQ(tok.Encode("Once upon a time", true, false), Ids({1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.TokenText(403), kM + "Once");
  const std::string story = "Once upon a time, there was a little girl named Lily. She loved to play outside!\n"
                            "\"Wow,\" she said. Ünïcødé and 日本 and 😀 fall back to bytes.";
  const Ids ids = tok.Encode(story, true, false);
  EXPECT_EQ(tok.Decode(ids, true), story);
  IncrementalDecoder dec(tok, true, true);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.Add(id);
  streamed += dec.Flush();
  EXPECT_EQ(streamed, story);
}

}  // namespace tokenizer_test
}  // namespace kvs::tok
