// `kvserve inspect FILE`: a GGUF file's header, metadata and tensor table,
// as text or (--json) as one JSON object. Exit 0, or 1 with the reason on
// stderr when the file cannot be read or is malformed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "gguf/gguf.h"

namespace kvs::cli {
namespace {

using gguf::Array;
using gguf::GgufFile;
using gguf::TensorInfo;
using gguf::Value;
using Json = nlohmann::ordered_json;  // keeps the file's key order

struct InspectArgs {
  std::string path;
  bool json = false;
  size_t max_items = 8;     // array items shown; 0 shows all
  size_t max_string = 200;  // text mode only: string bytes shown; 0 shows all
};

size_t Limit(size_t n) { return n == 0 ? SIZE_MAX : n; }

std::string DimsString(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", t.dims[i]);
  return s + "]";
}

// Text form of a value: long strings (chat templates) are cut at a UTF-8
// boundary so each key stays on one line.
std::string ShowValue(const Value& v, const InspectArgs& a) {
  const std::string* s = v.AsString();
  if (!s || s->size() <= Limit(a.max_string)) return v.ToString(Limit(a.max_items));
  size_t cut = a.max_string;
  while (cut > 0 && (static_cast<unsigned char>((*s)[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", gguf::QuoteString(std::string_view(*s).substr(0, cut)), s->size());
}

Json ValueToJson(const Value& v, size_t max_items) {
  switch (v.v.index()) {
    case 0: return std::get<uint64_t>(v.v);
    case 1: return std::get<int64_t>(v.v);
    case 2: {
      // NaN and infinities print as null. A float32 goes through its shortest
      // decimal form so 1e-05f prints as 1e-05, not 9.999999747378752e-06.
      const double d = std::get<double>(v.v);
      if (v.type != gguf::ValueType::kFloat32 || !std::isfinite(d)) return d;
      return std::strtod(fmt::format("{}", static_cast<float>(d)).c_str(), nullptr);
    }
    case 3: return std::get<bool>(v.v);
    case 4: return std::get<std::string>(v.v);
    default: {
      const Array& arr = std::get<Array>(v.v);
      Json out = Json::array();
      for (size_t i = 0; i < std::min(max_items, arr.items.size()); ++i) {
        out.push_back(ValueToJson(arr.items[i], max_items));
      }
      return out;
    }
  }
}

void PrintText(const GgufFile& f, const InspectArgs& a) {
  uint64_t tensor_bytes = 0;
  int64_t params = 0;
  for (const TensorInfo& t : f.tensors()) {
    tensor_bytes += t.nbytes;
    params += t.NumElements();
  }
  fmt::print("file:        {}\n", a.path);
  fmt::print("version:     {}\n", f.version());
  fmt::print("alignment:   {}\n", f.alignment());
  fmt::print("size:        {} bytes (tensor data from byte {})\n", f.file_size(), f.data_offset());
  fmt::print("metadata:    {} keys\n", f.metadata().size());
  // "array[string][512]": element type, then count.
  std::vector<std::string> types;
  size_t key_w = 0, type_w = 0;
  for (const auto& kv : f.metadata()) {
    types.push_back(gguf::TypeString(kv.value));
    if (const Array* arr = kv.value.AsArray()) types.back() += fmt::format("[{}]", arr->items.size());
    key_w = std::max(key_w, kv.key.size());
    type_w = std::max(type_w, types.back().size());
  }
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    const auto& kv = f.metadata()[i];
    fmt::print("  {:<{}}  {:<{}}  {}\n", kv.key, key_w, types[i], type_w, ShowValue(kv.value, a));
  }
  fmt::print("tensors:     {} ({} parameters, {} bytes)\n", f.tensors().size(), params, tensor_bytes);
  if (f.tensors().empty()) return;
  size_t name_w = 4, dims_w = 4;
  for (const TensorInfo& t : f.tensors()) {
    name_w = std::max(name_w, t.name.size());
    dims_w = std::max(dims_w, DimsString(t).size());
  }
  fmt::print("  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", "name", name_w, "type", "dims", dims_w, "offset", "bytes");
  for (const TensorInfo& t : f.tensors()) {
    fmt::print("  {:<{}}  {:<5}  {:<{}}  {:>12}  {:>12}\n", t.name, name_w, DTypeName(t.type), DimsString(t), dims_w,
               t.offset, t.nbytes);
  }
}

void PrintJson(const GgufFile& f, const InspectArgs& a) {
  Json out;
  out["file"] = a.path;
  out["version"] = f.version();
  out["alignment"] = f.alignment();
  out["file_size"] = f.file_size();
  out["data_offset"] = f.data_offset();
  Json md = Json::object();
  for (const auto& kv : f.metadata()) {
    Json entry;
    entry["type"] = gguf::TypeString(kv.value);
    entry["value"] = ValueToJson(kv.value, Limit(a.max_items));
    if (const Array* arr = kv.value.AsArray()) {
      entry["count"] = arr->items.size();
      entry["truncated"] = arr->items.size() > Limit(a.max_items);
    }
    md[kv.key] = std::move(entry);
  }
  out["metadata"] = std::move(md);
  Json tensors = Json::array();
  for (const TensorInfo& t : f.tensors()) {
    tensors.push_back(Json{{"name", t.name}, {"type", DTypeName(t.type)}, {"dims", t.dims},
                           {"offset", t.offset}, {"nbytes", t.nbytes}});
  }
  out["tensors"] = std::move(tensors);
  // Metadata strings need not be UTF-8 (token pieces); replace bad bytes
  // rather than throw.
  fmt::print("{}\n", out.dump(2, ' ', false, Json::error_handler_t::replace));
}

int RunInspect(const InspectArgs& a) {
  auto f = GgufFile::Open(a.path);
  if (!f.ok()) {
    std::fprintf(stderr, "kvserve inspect: %s\n", f.status().ToString().c_str());
    return 1;
  }
  if (a.json) {
    PrintJson(**f, a);
  } else {
    PrintText(**f, a);
  }
  return 0;
}

const Registrar kRegister_inspect(Command{
    "inspect", "Show a GGUF file's header, metadata and tensors",
    [](CLI::App* sub) -> std::function<int()> {
      auto a = std::make_shared<InspectArgs>();
      sub->add_option("file", a->path, "GGUF file")->required();
      sub->add_flag("--json", a->json, "print one JSON object");
      sub->add_option("--max-items", a->max_items, "array items shown (default 8, 0 = all)");
      sub->add_option("--max-string", a->max_string, "string bytes shown in text mode (default 200, 0 = all)");
      return [a] { return RunInspect(*a); };
    }});

}  // namespace
}  // namespace kvs::cli
