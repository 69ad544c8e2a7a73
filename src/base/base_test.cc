#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/file_stamp.h"
#include "base/dtype.h"
#include "base/fp16.h"
#include "base/json_depth.h"
#include "base/line_file.h"
#include "base/random_id.h"
#include "base/signal_block.h"
#include "base/status.h"
#include "base/test_util.h"
#include "base/thread_pool.h"

namespace kvs {
namespace {

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("x must be positive, got {}", x);
  return x;
}

Status UseIt(int x, int* out) {
  KVS_ASSIGN_OR_RETURN(*out, ParsePositive(x));
  return Status::Ok();
}

TEST(StatusTest, ErrorsCarryCodeAndMessage) {
  int out = 0;
  EXPECT_TRUE(UseIt(3, &out).ok());
  EXPECT_EQ(out, 3);
  Status s = UseIt(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: x must be positive, got -1");
  EXPECT_EQ(s.WithContext("loading").message(), "loading: x must be positive, got -1");
}

TEST(DTypeTest, KnownIdsAndSizes) {
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 256), 210);
  EXPECT_FALSE(GetDTypeTraits(99).has_value());
  EXPECT_EQ(DTypeFromName("q4_k"), DType::kQ4_K);
}

TEST(Fp16Test, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToF16(f), h) << h;
  }
}

TEST(Fp16Test, RoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(F32ToF16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(F32ToF16(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(F32ToF16(5.96046448e-08f), 0x0001);     // smallest subnormal
  EXPECT_EQ(F32ToF16(2.98023224e-08f), 0x0000);     // tie at half of it -> even (0)
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
}

TEST(JsonDepthTest, CountsBracketsOutsideStrings) {
  EXPECT_EQ(kvs::JsonNestingDepth("", 10), 0u);
  EXPECT_EQ(kvs::JsonNestingDepth(R"({"a":[1,{"b":[]}]})", 10), 4u);
  // Brackets inside strings (escaped quotes too) do not count.
  EXPECT_EQ(kvs::JsonNestingDepth(R"(["[[\"[[", "\\", [1]])", 10), 2u);
  // A closer with nothing open does not lower the count of later openers.
  EXPECT_EQ(kvs::JsonNestingDepth("]]][[[", 10), 3u);
  // Counting stops just past stop_after.
  EXPECT_EQ(kvs::JsonNestingDepth(std::string(1000, '['), 5), 6u);
}

TEST(JsonDepthTest, CountsObjectMembersPerLevelOutsideStrings) {
  const kvs::JsonMembers none = kvs::CountJsonObjectMembers("[1, 2, [3]]");
  EXPECT_EQ(none.largest, 0u);
  EXPECT_EQ(none.total, 0u);
  // Two objects of 3 and 2 members; the colons in strings (escaped quotes
  // too) and the nested object's do not count toward the outer one.
  const kvs::JsonMembers m =
      kvs::CountJsonObjectMembers(R"({"a:b":1, "c\\":":2", "d":{"e":"::","f":[{}]}, "g":[1]})");
  EXPECT_EQ(m.largest, 4u);
  EXPECT_EQ(m.total, 6u);
  const kvs::JsonMembers n = kvs::CountJsonObjectMembers(R"([{"a\":":1,"b":2},{"c":3}])");
  EXPECT_EQ(n.largest, 2u);
  EXPECT_EQ(n.total, 3u);
}

TEST(JsonDepthTest, CountsArrayElementsPerLevelOutsideStrings) {
  const kvs::JsonElements none = kvs::CountJsonArrayElements(R"({"a": 1, "b": {}, "c": []})");
  EXPECT_EQ(none.largest, 0u);
  EXPECT_EQ(none.total, 0u);
  // [1, 2, [3, 4, 5], {"x": [6]}]: 4 + 3 + 1; commas in strings and objects do not count.
  const kvs::JsonElements e = kvs::CountJsonArrayElements(R"([1, "a,b,\",", [3, 4, 5], {"x": [6], "y": 7}])");
  EXPECT_EQ(e.largest, 4u);
  EXPECT_EQ(e.total, 8u);
  std::string big = "[0";
  for (int i = 0; i < 99999; ++i) big += ",0";
  big += "]";
  EXPECT_EQ(kvs::CountJsonArrayElements(big).largest, 100000u);
  std::string strings = "[\"a\"";
  for (int i = 0; i < 999; ++i) strings += ",\"a\"";
  EXPECT_EQ(kvs::CountJsonArrayElements(strings + "]").largest, 1000u);
  EXPECT_EQ(kvs::CountJsonArrayElements("[1,2,3").largest, 3u);  // unterminated: still counted
}

TEST(RandomIdTest, HexDigitsOfTheAskedLengthThatDiffer) {
  const std::string a = kvs::RandomHex(24), b = kvs::RandomHex(24);
  EXPECT_EQ(a.size(), 24u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);  // 96 random bits: equal only by a (negligible) accident
  EXPECT_EQ(kvs::RandomHex(0), "");
}

TEST(LineFileTest, SkipsBlankAndCommentLinesAndStripsCarriageReturns) {
  const std::filesystem::path dir = kvs::testing::TempDir("line_file");
  const std::string path = (dir / "lines.txt").string();
  std::ofstream(path) << "first\r\n\n  # a comment\n \t\n  {\"x\": 1}\r\nlast";
  std::vector<std::string> lines;
  std::vector<int> numbers;
  std::vector<size_t> firsts;
  kvs::Status st = kvs::ForEachContentLine(path, [&](const std::string& line, size_t first, int line_no) {
    lines.push_back(line);
    firsts.push_back(first);
    numbers.push_back(line_no);
    return kvs::Status::Ok();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(lines, (std::vector<std::string>{"first", "  {\"x\": 1}", "last"}));
  EXPECT_EQ(firsts, (std::vector<size_t>{0, 2, 0}));
  EXPECT_EQ(numbers, (std::vector<int>{1, 5, 6}));
  // The callback's first error stops the walk and is returned as it is.
  int calls = 0;
  st = kvs::ForEachContentLine(path, [&](const std::string&, size_t, int line_no) {
    ++calls;
    return kvs::InvalidArgument("bad line {}", line_no);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(st.message(), "bad line 1");
  st = kvs::ForEachContentLine((dir / "absent.txt").string(), [](const std::string&, size_t, int) {
    return kvs::Status::Ok();
  });
  EXPECT_EQ(st.code(), kvs::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("cannot read"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(ThreadPoolTest, RunsEveryThreadAndCoversRanges) {
  for (int n : {1, 2, 3, 4}) {
    ThreadPool pool(n);
    for (int iter = 0; iter < 200; ++iter) {
      std::vector<int> hits(1000, 0);
      pool.ParallelFor(1000, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int h : hits) ASSERT_EQ(h, 1);
    }
    std::atomic<int> calls{0};
    pool.Run([&](int, int nth) { EXPECT_EQ(nth, n); calls++; });
    EXPECT_EQ(calls.load(), n);
  }
}

bool Blocked(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

// A signal raised while blocked stays pending (the default action would
// end this process); Release and destruction unblock, once.
// Whether `sig` was pending for this thread; takes it (it must be blocked).
bool TakePending(int sig) {
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, sig) != 1) return false;
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  const timespec zero{0, 0};
  return sigtimedwait(&one, nullptr, &zero) == sig;
}

TEST(SignalBlockTest, HoldsSignalsPendingUntilReleased) {
  ASSERT_FALSE(Blocked(SIGUSR1));
  {
    SignalBlock block({SIGUSR1, SIGUSR2});
    EXPECT_TRUE(Blocked(SIGUSR1));
    EXPECT_TRUE(Blocked(SIGUSR2));
    ASSERT_EQ(raise(SIGUSR1), 0);
    // Take it while still blocked, so releasing delivers nothing.
    EXPECT_TRUE(TakePending(SIGUSR1));
    block.Release();
    EXPECT_FALSE(Blocked(SIGUSR1));
    EXPECT_FALSE(Blocked(SIGUSR2));
    block.Release();  // a second release changes nothing
    EXPECT_FALSE(Blocked(SIGUSR1));
  }
  {
    SignalBlock block({SIGUSR2});
    EXPECT_TRUE(Blocked(SIGUSR2));
  }
  EXPECT_FALSE(Blocked(SIGUSR2));
}

// KeepBlocked: a signal pending when the block goes away stays pending (a
// process that exits then keeps its own exit status).
TEST(SignalBlockTest, KeepBlockedOutlivesTheBlock) {
  ASSERT_FALSE(Blocked(SIGUSR2));
  {
    SignalBlock block({SIGUSR2});
    block.KeepBlocked();
    ASSERT_EQ(raise(SIGUSR2), 0);
    block.Release();
  }
  EXPECT_TRUE(Blocked(SIGUSR2));
  EXPECT_TRUE(TakePending(SIGUSR2));
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, SIGUSR2);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  EXPECT_FALSE(Blocked(SIGUSR2));
}

}  // namespace
}  // namespace kvs

namespace kvs {
namespace {

TEST(FileWatchTest, ReportsAChangeOnceItHeldStillForAPoll) {
  const FileStamp a{1, 10}, b{2, 0}, c{3, 20};
  FileWatch w(a);
  EXPECT_FALSE(w.Poll(a));             // unchanged
  EXPECT_FALSE(w.Poll(b));             // changed: maybe still being written
  EXPECT_FALSE(w.Poll(c));             // changed again since the last poll
  EXPECT_TRUE(w.Poll(c));              // held still: load it
  EXPECT_FALSE(w.Poll(c));             // once per change
  EXPECT_FALSE(w.Poll(std::nullopt));  // gone: what was loaded stays
  EXPECT_FALSE(w.Poll(c));
  EXPECT_FALSE(w.Poll(a));
  EXPECT_TRUE(w.Poll(a));              // back to an earlier content is a change too
  FileWatch none(std::nullopt);        // not there at start
  EXPECT_FALSE(none.Poll(a));
  EXPECT_TRUE(none.Poll(a));
}

}  // namespace
}  // namespace kvs
