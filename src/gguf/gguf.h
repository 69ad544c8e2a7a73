// GGUF (v2/v3) model files: a validated, read-only view over an mmapped file.
//
// GgufFile::Open checks the whole header up front (magic, version, counts,
// every key/value, every tensor info, alignment, data bounds, overlaps) and
// refuses a malformed file with a Status naming the problem; after that every
// accessor is bounds-safe. Tensor data pointers point into the mapping and
// stay valid for the lifetime of the GgufFile.
// Thread-safety: immutable after Open; safe to share between threads.
//
// Status codes from Open/FromBuffer:
//   DATA_LOSS      malformed or truncated file (the message names the key,
//                  tensor or byte offset where it went wrong);
//   UNIMPLEMENTED  well-formed but outside what this build reads: GGUF v1,
//                  big-endian files, versions after 3, tensor type ids that
//                  base/dtype.h does not know;
//   IO_ERROR       open/stat/mmap failed.
// Tensor types that are known but not computable (DTypeTraits::supported ==
// false, e.g. Q5_1) are accepted here so `kvserve inspect` can show them; the
// model loader refuses them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/utf8.h"

namespace kvs::gguf {

// Metadata value types, numbered as the format numbers them.
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};
const char* ValueTypeName(ValueType t);  // "uint32", "string", ...; "?" if unknown

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32

// Reader limits. Real files are far inside them (a 256K-token vocabulary is
// under 1M array items); they exist so a hostile file cannot make the reader
// recurse without bound or turn each byte into a 48-byte Value forever.
inline constexpr int kMaxArrayDepth = 8;                           // array-of-array nesting
inline constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 24;  // all array items, summed
inline constexpr uint32_t kMaxDims = 4;
inline constexpr uint32_t kDefaultAlignment = 32;

// Keys and tensor names must be strict UTF-8 (kvs::IsValidUtf8, base/utf8.h).
using ::kvs::IsValidUtf8;

struct Value;
// An array: element type plus elements (nested arrays allowed).
struct Array {
  ValueType elem_type = ValueType::kUint8;
  std::vector<Value> items;
};

// A metadata value. Invariant (checked by the writer, guaranteed by the
// reader): the variant alternative matches `type`: unsigned types hold
// uint64_t, signed types int64_t (both within the type's range), float32 and
// float64 hold double, then bool, string, Array. String values are the bytes
// as stored: unlike keys they need not be UTF-8 (token pieces may be partial
// sequences).
struct Value {
  ValueType type = ValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  static Value Uint(ValueType t, uint64_t x) { return Value{t, x}; }
  static Value Int(ValueType t, int64_t x) { return Value{t, x}; }
  static Value Float(ValueType t, double x) { return Value{t, x}; }
  static Value Bool(bool x) { return Value{ValueType::kBool, x}; }
  static Value String(std::string x) { return Value{ValueType::kString, std::move(x)}; }
  static Value MakeArray(ValueType elem_type, std::vector<Value> items) {
    return Value{ValueType::kArray, Array{elem_type, std::move(items)}};
  }

  // Typed accessors; nullopt when the value is not of a compatible kind.
  // Integers convert between widths when the value fits.
  std::optional<int64_t> AsInt() const;
  std::optional<uint64_t> AsUint() const;
  std::optional<double> AsFloat() const;  // also accepts integers
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;
  const Array* AsArray() const;
  // For `kvserve inspect`: strings quoted with control bytes and invalid
  // UTF-8 escaped; arrays show at most max_items items, then "... (N items)".
  std::string ToString(size_t max_items = 8) const;
};

// "string", "uint32", or "array[string]" / "array[array]" for arrays.
std::string TypeString(const Value& v);
// Quotes and escapes a string the way Value::ToString shows it.
std::string QuoteString(std::string_view s);

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ne[0] first: dims[0] is the contiguous (row) length
  DType type = DType::kF32;
  uint64_t offset = 0;        // relative to the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t NumElements() const;
  int64_t Rows() const { return dims.empty() ? 1 : NumElements() / dims[0]; }
};

class GgufFile {
 public:
  // Maps and validates a file.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Validates an in-memory buffer that the caller keeps alive (fuzzing, tests).
  static StatusOr<std::unique_ptr<GgufFile>> FromBuffer(const uint8_t* data, size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;  // owns the mapping
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  // From "general.alignment" (any integer type; the spec says uint32), else 32.
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  // File offset where tensor data starts (TensorInfo::offset is relative to
  // it); file_size() for a file without tensors whose padding was omitted.
  uint64_t data_offset() const { return data_offset_; }
  // The whole file (mapping or caller buffer).
  std::span<const uint8_t> bytes() const { return {base_, static_cast<size_t>(size_)}; }
  // True when bytes() is this object's read-only private file mapping (Open),
  // whose clean pages may be dropped and are read back from the file.
  bool mapped() const { return mapped_; }
  const std::vector<KeyValue>& metadata() const { return kvs_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* Find(std::string_view key) const;
  const TensorInfo* FindTensor(std::string_view name) const;

  // Typed lookups: NotFound when absent, InvalidArgument (naming the key) when
  // of the wrong type.
  StatusOr<std::string> GetString(std::string_view key) const;
  StatusOr<int64_t> GetInt(std::string_view key) const;
  StatusOr<double> GetFloat(std::string_view key) const;
  StatusOr<bool> GetBool(std::string_view key) const;
  StatusOr<const Array*> GetArray(std::string_view key) const;
  // With a default when absent (still an error when present with a wrong type).
  StatusOr<int64_t> GetIntOr(std::string_view key, int64_t def) const;
  StatusOr<double> GetFloatOr(std::string_view key, double def) const;
  StatusOr<bool> GetBoolOr(std::string_view key, bool def) const;
  StatusOr<std::string> GetStringOr(std::string_view key, std::string def) const;

 private:
  friend class Parser;  // gguf.cc: fills the fields below
  GgufFile() = default;
  Status Parse();

  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kvs_;
  std::vector<TensorInfo> tensors_;
  // Views into the file bytes (stable for the object's lifetime) -> index.
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Writes GGUF v3 files. Tensors are added with their bytes already in the
// target dtype (see kernels/quant.h to quantize); the writer pads each to the
// alignment. Metadata and tensors are written in the order added.
// Misuse (a Value whose variant does not match its type, an invalid key or
// tensor name, a duplicate tensor, data of the wrong size, a bad alignment)
// is a program bug and aborts via KVS_CHECK, so every file it writes is one
// GgufFile accepts.
// Thread-safety: none; one thread builds and writes.
class GgufWriter {
 public:
  // A nonzero power of two that fits uint32; also stored as the uint32
  // "general.alignment" key so readers see it.
  void SetAlignment(uint64_t alignment);
  // Adding a key that exists replaces its value in place. Adding
  // "general.alignment" (any integer type) sets the alignment too.
  void Add(std::string key, Value value);
  // Convenience setters.
  void AddString(std::string key, std::string v);
  void AddUint32(std::string key, uint32_t v);
  void AddInt32(std::string key, int32_t v);
  void AddUint64(std::string key, uint64_t v);
  void AddFloat32(std::string key, float v);
  void AddBool(std::string key, bool v);
  void AddStringArray(std::string key, const std::vector<std::string>& v);
  void AddFloat32Array(std::string key, const std::vector<float>& v);
  void AddInt32Array(std::string key, const std::vector<int32_t>& v);

  // dims[0] is the row length; data must hold RowBytes(type, dims[0]) * rows.
  void AddTensor(std::string name, DType type, std::vector<int64_t> dims, std::vector<uint8_t> data);

  // Writes to path + ".tmp" and renames, so a crash never leaves a torn file.
  Status WriteFile(const std::string& path) const;
  std::vector<uint8_t> Serialize() const;

 private:
  template <typename Sink>
  void Emit(Sink& sink) const;

  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  uint64_t alignment_ = 32;
  std::vector<KeyValue> kvs_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace kvs::gguf
