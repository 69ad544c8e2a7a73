// GGUF (v2/v3) model files: a validated, read-only view over an mmapped file.
//
// GgufFile::Open checks the whole header up front (magic, version, counts,
// every key/value, every tensor info, alignment, data bounds, overlaps) and
// refuses a malformed file with a Status naming the problem; after that every
// accessor is bounds-safe. Tensor data pointers point into the mapping and
// stay valid for the lifetime of the GgufFile.
// Thread-safety: immutable after Open; safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kvs::gguf {

// Metadata value types, numbered as the format numbers them.
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11,
  kFloat64 = 12,
};
const char* ValueTypeName(ValueType t);

struct Value;
// An array: element type plus elements (nested arrays allowed).
struct Array {
  ValueType elem_type = ValueType::kUint8;
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::kUint8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  // Typed accessors; nullopt when the value is not of a compatible kind.
  // Integers convert between widths when the value fits.
  std::optional<int64_t> AsInt() const;
  std::optional<uint64_t> AsUint() const;
  std::optional<double> AsFloat() const;  // also accepts integers
  std::optional<bool> AsBool() const;
  const std::string* AsString() const;
  const Array* AsArray() const;
  std::string ToString(size_t max_items = 8) const;  // for `kvserve inspect`
};

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

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
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
  GgufFile() = default;
  Status Parse();

  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<KeyValue> kvs_;
  std::vector<TensorInfo> tensors_;
};

// Writes GGUF v3 files. Tensors are added with their bytes already in the
// target dtype (see kernels/quant.h to quantize); the writer pads each to the
// alignment.
class GgufWriter {
 public:
  void SetAlignment(uint64_t alignment) { alignment_ = alignment; }
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

  Status WriteFile(const std::string& path) const;
  std::vector<uint8_t> Serialize() const;

 private:
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
