// libFuzzer target: GgufFile::FromBuffer on arbitrary bytes must either
// refuse with a message or give a file whose every accessor is in bounds and
// which survives a writer -> reader round trip unchanged.
#include <cmath>
#include <cstring>

#include "gguf/gguf.h"

namespace {

using kvs::gguf::Array;
using kvs::gguf::GgufFile;
using kvs::gguf::GgufWriter;
using kvs::gguf::Value;

bool Same(const Value& a, const Value& b) {
  if (a.type != b.type || a.v.index() != b.v.index()) return false;
  if (const auto* x = std::get_if<double>(&a.v)) {
    const double y = std::get<double>(b.v);
    if (std::isnan(*x) || std::isnan(y)) return std::isnan(*x) && std::isnan(y);
    return std::memcmp(x, &y, sizeof y) == 0;
  }
  if (const auto* x = std::get_if<Array>(&a.v)) {
    const Array& y = std::get<Array>(b.v);
    if (x->elem_type != y.elem_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i) {
      if (!Same(x->items[i], y.items[i])) return false;
    }
    return true;
  }
  if (const auto* x = std::get_if<uint64_t>(&a.v)) return *x == std::get<uint64_t>(b.v);
  if (const auto* x = std::get_if<int64_t>(&a.v)) return *x == std::get<int64_t>(b.v);
  if (const auto* x = std::get_if<bool>(&a.v)) return *x == std::get<bool>(b.v);
  return std::get<std::string>(a.v) == std::get<std::string>(b.v);
}

void Exercise(const GgufFile& f, const uint8_t* base, size_t size) {
  KVS_CHECK(f.data_offset() <= size);
  for (const auto& kv : f.metadata()) {
    KVS_CHECK(f.Find(kv.key) == &kv.value);
    (void)kv.value.ToString(4);
    (void)f.GetInt(kv.key);
    (void)f.GetFloat(kv.key);
    (void)f.GetStringOr(kv.key, "");
  }
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    KVS_CHECK(f.FindTensor(t.name) == &t);
    KVS_CHECK(t.nbytes > 0 && t.data >= base + f.data_offset());
    KVS_CHECK(t.nbytes <= static_cast<uint64_t>(base + size - t.data));
    KVS_CHECK(t.NumElements() >= 1 && t.Rows() >= 1);
    sink = sink + t.data[0] + t.data[t.nbytes - 1];  // ASan checks both ends
  }
}

void RoundTrip(const GgufFile& f) {
  // A huge alignment is legal without tensors but would make the writer pad
  // gigabytes; not interesting.
  if (f.alignment() > 65536) return;
  GgufWriter w;
  for (const auto& kv : f.metadata()) w.Add(kv.key, kv.value);
  for (const auto& t : f.tensors()) {
    w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  const std::vector<uint8_t> bytes = w.Serialize();
  auto again = GgufFile::FromBuffer(bytes.data(), bytes.size());
  KVS_CHECK_MSG(again.ok(), "writer output refused: {}", again.status().ToString());
  const GgufFile& g = **again;
  KVS_CHECK(g.alignment() == f.alignment());
  KVS_CHECK(g.metadata().size() == f.metadata().size());
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    KVS_CHECK(g.metadata()[i].key == f.metadata()[i].key);
    KVS_CHECK(Same(g.metadata()[i].value, f.metadata()[i].value));
  }
  KVS_CHECK(g.tensors().size() == f.tensors().size());
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& a = f.tensors()[i];
    const auto& b = g.tensors()[i];
    KVS_CHECK(a.name == b.name && a.type == b.type && a.dims == b.dims && a.nbytes == b.nbytes);
    KVS_CHECK(std::memcmp(a.data, b.data, a.nbytes) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = GgufFile::FromBuffer(data, size);
  if (!r.ok()) {
    KVS_CHECK(!r.status().message().empty());
    return 0;
  }
  Exercise(**r, data, size);
  RoundTrip(**r);
  return 0;
}
