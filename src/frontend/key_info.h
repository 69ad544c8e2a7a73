// KeyInfo: one documented configuration key of a front end, as --help and
// the shipped example files show it (frontend/config_keys.h builds them).
// Thread-safety: a plain value.
#pragma once

#include <string>

namespace kvs::frontend {

struct KeyInfo {
  std::string key;            // "server.port", "pools[].max_context"
  std::string alias;          // "--port" or ""
  std::string type;           // "integer", "number", "boolean", "string", "one of", "list of strings", ...
  std::string allowed;        // "[0, 65535]", "(0, 1]", "f16, bf16, f32, q8_0", ...
  std::string default_value;  // as JSON
  std::string help;
  bool option = true;         // settable as --key on the command line
};

}  // namespace kvs::frontend
