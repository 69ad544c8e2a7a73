// libFuzzer target: SseParser (the gateway and `kvserve bench` read other
// servers' event streams with it) on arbitrary bytes. Feeding the stream in
// one piece or split at arbitrary points gives the same events, and no
// event holds bytes that were not in the input.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "http/sse_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvs::http::SseMessage;
  using kvs::http::SseParser;
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 17;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  SseParser whole;
  std::vector<SseMessage> a = whole.Feed(bytes);
  SseParser pieces;
  std::vector<SseMessage> b;
  for (size_t i = 0; i < bytes.size(); i += step) {
    for (auto& m : pieces.Feed(bytes.substr(i, step))) b.push_back(std::move(m));
  }
  if (a.size() != b.size()) std::abort();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].event != b[i].event || a[i].data != b[i].data || a[i].id != b[i].id) std::abort();
    if (a[i].data.size() > bytes.size()) std::abort();
  }
  return 0;
}
