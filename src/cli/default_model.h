// Where kvserve looks for a model when none is given.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvs::cli {

// The bundled model if present, else ../shared's stories260K; "" if neither.
// Looked up relative to the working directory and to the binary's checkout.
inline std::string DefaultModelPath() {
  std::vector<std::filesystem::path> roots = {std::filesystem::current_path()};
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  // build/<dir>/src/cli/kvserve -> checkout root is four levels up.
  if (!ec) roots.push_back(exe.parent_path().parent_path().parent_path().parent_path().parent_path());
  for (const auto& root : roots) {
    for (const char* rel : {"models/kvserve-tiny.gguf", "../shared/models/stories260K.gguf"}) {
      auto p = root / rel;
      if (std::filesystem::exists(p, ec)) return p.lexically_normal().string();
    }
  }
  return "";
}

inline const char* kNoModelMessage =
    "no model given and no default model found: pass -m MODEL.gguf (looked for models/kvserve-tiny.gguf "
    "and ../shared/models/stories260K.gguf)";

}  // namespace kvs::cli
