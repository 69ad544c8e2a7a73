// libFuzzer target: ParseResp on arbitrary bytes (what a Redis server, or
// anything at its address, may send) must return complete / need-more /
// not-RESP without reading out of bounds; a complete value consumed a prefix,
// and any prefix of a complete value asks for more or is refused.
#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "gateway/redis_limiter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view buf(reinterpret_cast<const char*>(data), size);
  kvs::gateway::RespValue v;
  size_t used = 0;
  const int r = kvs::gateway::ParseResp(buf, &used, &v);
  if (r == 1) {
    KVS_CHECK(used > 0 && used <= size);
    for (size_t cut = 0; cut < used; cut += 1 + used / 16) {
      kvs::gateway::RespValue w;
      size_t u = 0;
      KVS_CHECK(kvs::gateway::ParseResp(buf.substr(0, cut), &u, &w) != 1);
    }
  }
  return 0;
}
