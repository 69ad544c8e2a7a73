#include "api/stop_matcher.h"

#include <random>

#include <gtest/gtest.h>

namespace kvs::api {
namespace {

TEST(StopMatcherTest, NoStopsReleasesEverything) {
  StopMatcher m;
  EXPECT_EQ(m.Push("abc").released, "abc");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, StopSpanningTokensIsNeverEmitted) {
  StopMatcher m({"\n\nUser:"});
  std::string out;
  for (std::string_view piece : {"Hello", " there", ".\n", "\nUs", "er", ": more"}) {
    auto r = m.Push(piece);
    out += r.released;
    if (r.stopped) {
      EXPECT_EQ(r.matched, "\n\nUser:");
      break;
    }
  }
  EXPECT_EQ(out, "Hello there.");
  EXPECT_TRUE(m.stopped());
  EXPECT_TRUE(m.Push("later").released.empty());
}

TEST(StopMatcherTest, HeldTextIsReleasedWhenItStopsLookingLikeAStop) {
  StopMatcher m({"STOP"});
  auto r = m.Push("abcST");
  EXPECT_EQ(r.released, "abc");
  EXPECT_EQ(m.held(), "ST");
  r = m.Push("x");
  EXPECT_EQ(r.released, "STx");
  r = m.Push("ST");
  EXPECT_EQ(r.released, "");
  EXPECT_EQ(m.Flush(), "ST");  // generation ended: the held text was real output
}

TEST(StopMatcherTest, FirstCompletedStopWinsAndLongestAtATie) {
  StopMatcher m({"cd", "bcdx", "b"});
  auto r = m.Push("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.released, "a");
  EXPECT_EQ(r.matched, "b");
  // "ab" is complete before "abc" would be, however the text is split.
  StopMatcher m2({"abc", "ab"});
  r = m2.Push("xabc");
  EXPECT_EQ(r.released, "x");
  EXPECT_EQ(r.matched, "ab");
  // Same end: the longer (earlier-starting) one.
  StopMatcher m3({"c", "bc"});
  r = m3.Push("abc");
  EXPECT_EQ(r.released, "a");
  EXPECT_EQ(r.matched, "bc");
  // A later-starting stop that completes first wins over an earlier-starting one.
  StopMatcher m4({"abcd", "c"});
  r = m4.Push("abcd");
  EXPECT_EQ(r.released, "ab");
  EXPECT_EQ(r.matched, "c");
}

TEST(StopMatcherTest, MultiByteStopStringsAndText) {
  StopMatcher m({"é!"});
  std::string out;
  // "café!" arrives with é split over two pieces (bytes C3 A9).
  for (std::string_view p : {"caf", "\xC3", "\xA9", "!", "tail"}) {
    auto r = m.Push(p);
    out += r.released;
    if (r.stopped) break;
  }
  EXPECT_EQ(out, "caf");
}

// Reference: the output is the text up to the stop that completes first; while
// no stop has completed, what was released is the text minus its longest
// suffix that is a proper prefix of a stop.
TEST(StopMatcherTest, RandomizedAgainstReference) {
  std::mt19937 rng(42);
  const std::string alphabet = "ab\n ";
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<std::string> stops;
    const int nstops = 1 + rng() % 3;
    for (int i = 0; i < nstops; ++i) {
      std::string s;
      const int len = 1 + rng() % 4;
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      stops.push_back(s);
    }
    std::string text;
    const int tlen = rng() % 24;
    for (int k = 0; k < tlen; ++k) text += alphabet[rng() % alphabet.size()];

    // Where the output ends: the stop that completes first (the longest of
    // those completing at the same byte) starts there.
    size_t first = std::string::npos;
    for (size_t end = 1; end <= text.size() && first == std::string::npos; ++end) {
      for (const auto& s : stops) {
        if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) {
          first = std::min(first, end - s.size());
        }
      }
    }

    StopMatcher m(stops);
    std::string out;
    bool stopped = false;
    size_t fed = 0;
    while (fed < text.size() && !stopped) {
      const size_t n = std::min<size_t>(1 + rng() % 4, text.size() - fed);
      auto r = m.Push(std::string_view(text).substr(fed, n));
      fed += n;
      out += r.released;
      stopped = r.stopped;
      if (!stopped) {
        const std::string so_far = text.substr(0, fed);
        size_t keep = 0;
        for (const auto& s : stops) {
          for (size_t len = std::min(s.size() - 1, so_far.size()); len > keep; --len) {
            if (so_far.compare(so_far.size() - len, len, s, 0, len) == 0) {
              keep = len;
              break;
            }
          }
        }
        ASSERT_EQ(out, so_far.substr(0, so_far.size() - keep)) << "iter " << iter;
      }
    }
    if (!stopped) out += m.Flush();
    if (first == std::string::npos) {
      EXPECT_FALSE(stopped) << "iter " << iter;
      EXPECT_EQ(out, text) << "iter " << iter;
    } else {
      EXPECT_TRUE(stopped) << "iter " << iter;
      EXPECT_EQ(out, text.substr(0, first)) << "iter " << iter;
    }
  }
}

}  // namespace
}  // namespace kvs::api
