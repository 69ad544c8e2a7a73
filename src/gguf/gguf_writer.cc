// GGUF v3 writer. Layout: header, metadata, tensor infos, zero padding to the
// alignment, then each tensor's bytes padded to the alignment.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "gguf/gguf.h"

namespace kvs::gguf {
namespace {

constexpr uint32_t kVersion = 3;

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

bool InRange(ValueType t, const Value& v) {
  switch (t) {
    case ValueType::kUint8: return std::get<uint64_t>(v.v) <= 0xff;
    case ValueType::kUint16: return std::get<uint64_t>(v.v) <= 0xffff;
    case ValueType::kUint32: return std::get<uint64_t>(v.v) <= 0xffffffffu;
    case ValueType::kInt8: return std::get<int64_t>(v.v) >= -128 && std::get<int64_t>(v.v) <= 127;
    case ValueType::kInt16: return std::get<int64_t>(v.v) >= -32768 && std::get<int64_t>(v.v) <= 32767;
    case ValueType::kInt32:
      return std::get<int64_t>(v.v) >= std::numeric_limits<int32_t>::min() &&
             std::get<int64_t>(v.v) <= std::numeric_limits<int32_t>::max();
    default: return true;
  }
}

// Aborts unless `v` is a Value the reader would give back unchanged:
// alternative matches the type, integers in range, arrays homogeneous and
// nested at most kMaxArrayDepth deep. Returns the number of array items.
uint64_t CheckValue(const Value& v, int enclosing_arrays) {
  switch (v.type) {
    case ValueType::kUint8: case ValueType::kUint16: case ValueType::kUint32: case ValueType::kUint64:
      KVS_CHECK_MSG(std::holds_alternative<uint64_t>(v.v), "{} value must hold uint64_t", ValueTypeName(v.type));
      break;
    case ValueType::kInt8: case ValueType::kInt16: case ValueType::kInt32: case ValueType::kInt64:
      KVS_CHECK_MSG(std::holds_alternative<int64_t>(v.v), "{} value must hold int64_t", ValueTypeName(v.type));
      break;
    case ValueType::kFloat32: case ValueType::kFloat64:
      KVS_CHECK_MSG(std::holds_alternative<double>(v.v), "{} value must hold double", ValueTypeName(v.type));
      break;
    case ValueType::kBool: KVS_CHECK(std::holds_alternative<bool>(v.v)); break;
    case ValueType::kString: KVS_CHECK(std::holds_alternative<std::string>(v.v)); break;
    case ValueType::kArray: {
      KVS_CHECK(std::holds_alternative<Array>(v.v));
      KVS_CHECK_MSG(enclosing_arrays < kMaxArrayDepth, "arrays nested deeper than {}", kMaxArrayDepth);
      const Array& a = std::get<Array>(v.v);
      KVS_CHECK(static_cast<uint32_t>(a.elem_type) <= static_cast<uint32_t>(ValueType::kFloat64));
      uint64_t n = a.items.size();
      for (const Value& item : a.items) {
        KVS_CHECK_MSG(item.type == a.elem_type, "array of {} holds a {}", ValueTypeName(a.elem_type),
                      ValueTypeName(item.type));
        n += CheckValue(item, enclosing_arrays + 1);
      }
      return n;
    }
    default: KVS_CHECK_MSG(false, "unknown value type {}", static_cast<uint32_t>(v.type));
  }
  KVS_CHECK_MSG(InRange(v.type, v), "value out of range for {}", ValueTypeName(v.type));
  return 0;
}

void CheckName(std::string_view name, const char* what) {
  KVS_CHECK_MSG(!name.empty() && IsValidUtf8(name), "{} must be non-empty UTF-8", what);
}

// Appends to a byte vector.
struct VectorSink {
  std::vector<uint8_t>* out;
  void Write(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out->insert(out->end(), b, b + n);
  }
};

// Writes to a FILE, remembering the first error.
struct FileSink {
  std::FILE* f;
  int error = 0;
  void Write(const void* p, size_t n) {
    if (error == 0 && n > 0 && std::fwrite(p, 1, n, f) != n) error = errno ? errno : EIO;
  }
};

// Counts bytes so padding can be computed without seeking.
template <typename Sink>
struct Out {
  Sink& sink;
  uint64_t pos = 0;
  void Bytes(const void* p, size_t n) { sink.Write(p, n); pos += n; }
  template <typename T>
  void Put(T x) { Bytes(&x, sizeof(T)); }
  void Str(std::string_view s) { Put<uint64_t>(s.size()); Bytes(s.data(), s.size()); }
  void Pad(uint64_t alignment) {
    static const uint8_t kZeros[256] = {};
    uint64_t n = AlignUp(pos, alignment) - pos;
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof(kZeros)));
      Bytes(kZeros, k);
      n -= k;
    }
  }
  void Val(const Value& v) {
    switch (v.type) {
      case ValueType::kUint8: Put(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::kInt8: Put(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
      case ValueType::kUint16: Put(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::kInt16: Put(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
      case ValueType::kUint32: Put(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
      case ValueType::kInt32: Put(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
      case ValueType::kUint64: Put(std::get<uint64_t>(v.v)); break;
      case ValueType::kInt64: Put(std::get<int64_t>(v.v)); break;
      case ValueType::kFloat32: Put(static_cast<float>(std::get<double>(v.v))); break;
      case ValueType::kFloat64: Put(std::get<double>(v.v)); break;
      case ValueType::kBool: Put<uint8_t>(std::get<bool>(v.v) ? 1 : 0); break;
      case ValueType::kString: Str(std::get<std::string>(v.v)); break;
      case ValueType::kArray: {
        const Array& a = std::get<Array>(v.v);
        Put(static_cast<uint32_t>(a.elem_type));
        Put<uint64_t>(a.items.size());
        for (const Value& item : a.items) Val(item);
        break;
      }
    }
  }
};

}  // namespace

void GgufWriter::SetAlignment(uint64_t alignment) {
  KVS_CHECK_MSG(std::has_single_bit(alignment) && alignment <= 0xffffffffu,
                "alignment {} is not a power of two that fits uint32", alignment);
  AddUint32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::Add(std::string key, Value value) {
  CheckName(key, "metadata key");
  CheckValue(value, 0);
  if (key == "general.alignment") {
    const bool integer = std::holds_alternative<uint64_t>(value.v) || std::holds_alternative<int64_t>(value.v);
    const std::optional<uint64_t> a = value.AsUint();
    KVS_CHECK_MSG(integer && a && std::has_single_bit(*a), "general.alignment must be a power of two");
    alignment_ = *a;
  }
  for (KeyValue& kv : kvs_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kvs_.push_back(KeyValue{std::move(key), std::move(value)});
}

void GgufWriter::AddString(std::string key, std::string v) { Add(std::move(key), Value::String(std::move(v))); }
void GgufWriter::AddUint32(std::string key, uint32_t v) { Add(std::move(key), Value::Uint(ValueType::kUint32, v)); }
void GgufWriter::AddInt32(std::string key, int32_t v) { Add(std::move(key), Value::Int(ValueType::kInt32, v)); }
void GgufWriter::AddUint64(std::string key, uint64_t v) { Add(std::move(key), Value::Uint(ValueType::kUint64, v)); }
void GgufWriter::AddFloat32(std::string key, float v) { Add(std::move(key), Value::Float(ValueType::kFloat32, v)); }
void GgufWriter::AddBool(std::string key, bool v) { Add(std::move(key), Value::Bool(v)); }

void GgufWriter::AddStringArray(std::string key, const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const std::string& s : v) items.push_back(Value::String(s));
  Add(std::move(key), Value::MakeArray(ValueType::kString, std::move(items)));
}

void GgufWriter::AddFloat32Array(std::string key, const std::vector<float>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (float x : v) items.push_back(Value::Float(ValueType::kFloat32, x));
  Add(std::move(key), Value::MakeArray(ValueType::kFloat32, std::move(items)));
}

void GgufWriter::AddInt32Array(std::string key, const std::vector<int32_t>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (int32_t x : v) items.push_back(Value::Int(ValueType::kInt32, x));
  Add(std::move(key), Value::MakeArray(ValueType::kInt32, std::move(items)));
}

void GgufWriter::AddTensor(std::string name, DType type, std::vector<int64_t> dims, std::vector<uint8_t> data) {
  CheckName(name, "tensor name");
  for (const PendingTensor& t : tensors_) KVS_CHECK_MSG(t.name != name, "duplicate tensor {}", name);
  KVS_CHECK_MSG(!dims.empty() && dims.size() <= kMaxDims, "tensor {} has {} dims", name, dims.size());
  const DTypeTraits& tr = Traits(type);
  int64_t elements = 1;
  for (int64_t d : dims) {
    KVS_CHECK_MSG(d >= 1, "tensor {} has a dimension {}", name, d);
    KVS_CHECK(!__builtin_mul_overflow(elements, d, &elements));
  }
  KVS_CHECK_MSG(dims[0] % tr.block_size == 0, "tensor {}: row {} not a multiple of block {}", name, dims[0],
                tr.block_size);
  const int64_t rows = elements / dims[0];
  int64_t want = 0;
  KVS_CHECK(!__builtin_mul_overflow(RowBytes(type, dims[0]), rows, &want));
  KVS_CHECK_MSG(static_cast<int64_t>(data.size()) == want, "tensor {}: {} bytes given, {} expected", name,
                data.size(), want);
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(dims), std::move(data)});
}

template <typename Sink>
void GgufWriter::Emit(Sink& sink) const {
  uint64_t items = 0;
  for (const KeyValue& kv : kvs_) items += CheckValue(kv.value, 0);
  KVS_CHECK_MSG(items <= kMaxMetadataValues, "{} array items exceed the reader's limit", items);
  Out<Sink> out{sink};
  out.template Put<uint32_t>(kMagic);
  out.template Put<uint32_t>(kVersion);
  out.template Put<uint64_t>(tensors_.size());
  out.template Put<uint64_t>(kvs_.size());
  for (const KeyValue& kv : kvs_) {
    out.Str(kv.key);
    out.template Put<uint32_t>(static_cast<uint32_t>(kv.value.type));
    out.Val(kv.value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    out.Str(t.name);
    out.template Put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) out.template Put<uint64_t>(static_cast<uint64_t>(d));
    out.template Put<uint32_t>(static_cast<uint32_t>(t.type));
    out.template Put<uint64_t>(offset);
    offset += AlignUp(t.data.size(), alignment_);
  }
  out.Pad(alignment_);
  for (const PendingTensor& t : tensors_) {
    out.Bytes(t.data.data(), t.data.size());
    out.Pad(alignment_);
  }
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> bytes;
  VectorSink sink{&bytes};
  Emit(sink);
  return bytes;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return IoError("cannot create {}: {}", tmp, std::strerror(errno));
  FileSink sink{f};
  Emit(sink);
  if (sink.error == 0 && std::fflush(f) != 0) sink.error = errno;
  if (std::fclose(f) != 0 && sink.error == 0) sink.error = errno;
  if (sink.error != 0) {
    std::remove(tmp.c_str());
    return IoError("cannot write {}: {}", tmp, std::strerror(sink.error));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return IoError("cannot rename {} to {}: {}", tmp, path, std::strerror(err));
  }
  return Status::Ok();
}

}  // namespace kvs::gguf
