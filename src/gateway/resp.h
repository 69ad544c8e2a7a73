// RESP2 (the Redis protocol) without I/O: ParseResp reads one value from
// bytes a Redis server sent (untrusted: fuzzed by resp_fuzzer), and
// EncodeRespCommand writes a command. Kept apart from RespClient so the
// fuzzer links only this parser. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::gateway {

struct RespValue {
  enum class Type { kString, kError, kInteger, kNil, kArray } type = Type::kNil;
  std::string str;    // kString, kError (simple or bulk)
  int64_t integer = 0;
  std::vector<RespValue> elems;
};

// Parses one value from the front of buf: 1 when complete (consumed set),
// 0 when more bytes are needed, -1 when buf is not RESP.
int ParseResp(std::string_view buf, size_t* consumed, RespValue* out);
std::string EncodeRespCommand(const std::vector<std::string>& args);

}  // namespace kvs::gateway
