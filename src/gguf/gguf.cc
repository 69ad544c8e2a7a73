// GGUF reader: validates the whole header before anything is handed out.
//
// Every read goes through Cursor, which checks the remaining length first, so
// no byte outside [base, base + size) is ever touched. Counts read from the
// file are compared with what the remaining bytes could encode before any
// container grows, and containers grow as bytes are actually consumed, so a
// file cannot make the reader allocate much more than its own size.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <numeric>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"

namespace kvs::gguf {

static_assert(std::endian::native == std::endian::little,
              "the reader copies little-endian fields straight into host integers");

namespace {

constexpr uint32_t kLastValueType = static_cast<uint32_t>(ValueType::kFloat64);
// Smallest encodings, used to bound counts: a KV is key length (8), value
// type (4) and at least one value byte; a tensor info is name length (8),
// n_dims (4), one dim (8), type (4), offset (8).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// Containers reserve at most this many entries up front; beyond it they grow
// only as entries are actually parsed.
constexpr uint64_t kMaxReserve = 4096;

uint64_t MinEncodedSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8: case ValueType::kInt8: case ValueType::kBool: return 1;
    case ValueType::kUint16: case ValueType::kInt16: return 2;
    case ValueType::kUint32: case ValueType::kInt32: case ValueType::kFloat32: return 4;
    case ValueType::kUint64: case ValueType::kInt64: case ValueType::kFloat64: return 8;
    case ValueType::kString: return 8;     // length, no bytes
    case ValueType::kArray: return 4 + 8;  // element type, length, no items
  }
  return 1;
}

// Bounds-checked little-endian reads over [base, base + size).
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) {
      return DataLoss("truncated file: {} at byte offset {} needs {} bytes, {} remain", what, pos_,
                      sizeof(T), remaining());
    }
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  // A GGUF string: uint64 length, then bytes. The view points into the file.
  Status ReadString(std::string_view* out, std::string_view what) {
    uint64_t len = 0;
    KVS_RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return DataLoss("{} of {} bytes at byte offset {} runs past the end ({} bytes remain)", what, len, pos_ - 8,
                      remaining());
    }
    *out = std::string_view(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace

// Fills a GgufFile from its bytes; a friend so the fields stay private.
class Parser {
 public:
  explicit Parser(GgufFile* f) : f_(*f), c_(f->base_, f->size_) {}

  Status Run() {
    uint64_t n_tensors = 0, n_kv = 0;
    KVS_RETURN_IF_ERROR(ReadHeader(&n_tensors, &n_kv));
    KVS_RETURN_IF_ERROR(ReadMetadata(n_kv));
    KVS_RETURN_IF_ERROR(ApplyAlignment());
    KVS_RETURN_IF_ERROR(ReadTensorInfos(n_tensors));
    return PlaceTensors();
  }

 private:
  Status ReadHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    uint32_t magic = 0;
    KVS_RETURN_IF_ERROR(c_.Read(&magic, "magic"));
    if (magic != kMagic) {
      return DataLoss("bad magic {:02x} {:02x} {:02x} {:02x} at byte offset 0 (expected \"GGUF\"): not a GGUF file",
                      magic & 0xff, (magic >> 8) & 0xff, (magic >> 16) & 0xff, magic >> 24);
    }
    uint32_t version = 0;
    KVS_RETURN_IF_ERROR(c_.Read(&version, "version"));
    if (version == 1) {
      return Unimplemented("GGUF version 1 is not supported (only versions 2 and 3); "
                           "re-convert the model with a current converter");
    }
    if (version != 2 && version != 3) {
      // A big-endian file shows its small version number in the high bytes.
      if (const uint32_t swapped = __builtin_bswap32(version); swapped >= 1 && swapped <= 3) {
        return Unimplemented("big-endian GGUF file (version field {:#010x}) is not supported", version);
      }
      return Unimplemented("unsupported GGUF version {} (supported: 2, 3)", version);
    }
    f_.version_ = version;
    KVS_RETURN_IF_ERROR(c_.Read(n_tensors, "tensor count"));
    KVS_RETURN_IF_ERROR(c_.Read(n_kv, "metadata count"));
    const uint64_t rem = c_.remaining();
    constexpr const char* kHint = "(truncated or corrupt file)";
    if (*n_kv > rem / kMinKvBytes) {
      return DataLoss("metadata count {} at byte offset 16 is more than the remaining {} bytes could hold {}",
                      *n_kv, rem, kHint);
    }
    if (*n_tensors > rem / kMinTensorInfoBytes) {
      return DataLoss("tensor count {} at byte offset 8 is more than the remaining {} bytes could hold {}",
                      *n_tensors, rem, kHint);
    }
    if (*n_kv * kMinKvBytes + *n_tensors * kMinTensorInfoBytes > rem) {  // no overflow: each term <= rem
      return DataLoss("metadata count {} and tensor count {} are more than the remaining {} bytes could hold {}",
                      *n_kv, *n_tensors, rem, kHint);
    }
    return Status::Ok();
  }

  // Reads a name (metadata key or tensor name) and checks it is non-empty,
  // valid UTF-8 and not already in `index`.
  Status ReadName(const char* what, uint64_t i, std::unordered_map<std::string_view, size_t>& index,
                  std::string_view* name) {
    const uint64_t at = c_.pos();
    KVS_RETURN_IF_ERROR(c_.ReadString(name, fmt::format("{} #{}", what, i)));
    if (name->empty()) return DataLoss("{} #{} at byte offset {} is empty", what, i, at);
    if (!IsValidUtf8(*name)) {
      return DataLoss("{} {} at byte offset {} is not valid UTF-8", what, QuoteString(*name), at);
    }
    if (!index.emplace(*name, static_cast<size_t>(i)).second) {
      return DataLoss("duplicate {} {} at byte offset {}", what, QuoteString(*name), at);
    }
    return Status::Ok();
  }

  Status ReadValueType(uint32_t* t, const char* what) {
    KVS_RETURN_IF_ERROR(c_.Read(t, what));
    if (*t > kLastValueType) return DataLoss("unknown {} {} at byte offset {}", what, *t, c_.pos() - 4);
    return Status::Ok();
  }

  Status ReadMetadata(uint64_t n_kv) {
    f_.kvs_.reserve(std::min(n_kv, kMaxReserve));
    for (uint64_t i = 0; i < n_kv; ++i) {
      std::string_view key;
      KVS_RETURN_IF_ERROR(ReadName("metadata key", i, f_.kv_index_, &key));
      const std::string ctx = fmt::format("metadata key {}", QuoteString(key));
      uint32_t type = 0;
      KVS_RETURN_IF_ERROR(ReadValueType(&type, "value type").WithContext(ctx));
      KeyValue kv;
      kv.key = std::string(key);
      KVS_RETURN_IF_ERROR(ReadValue(static_cast<ValueType>(type), 0, &kv.value).WithContext(ctx));
      f_.kvs_.push_back(std::move(kv));
    }
    return Status::Ok();
  }

  template <typename Wire, typename Stored>
  Status ReadScalar(Value* out, const char* what) {
    Wire x{};
    KVS_RETURN_IF_ERROR(c_.Read(&x, what));
    out->v = static_cast<Stored>(x);
    return Status::Ok();
  }

  // `depth` counts the arrays that enclose this value.
  Status ReadValue(ValueType t, int depth, Value* out) {
    out->type = t;
    switch (t) {
      case ValueType::kUint8: return ReadScalar<uint8_t, uint64_t>(out, "uint8 value");
      case ValueType::kInt8: return ReadScalar<int8_t, int64_t>(out, "int8 value");
      case ValueType::kUint16: return ReadScalar<uint16_t, uint64_t>(out, "uint16 value");
      case ValueType::kInt16: return ReadScalar<int16_t, int64_t>(out, "int16 value");
      case ValueType::kUint32: return ReadScalar<uint32_t, uint64_t>(out, "uint32 value");
      case ValueType::kInt32: return ReadScalar<int32_t, int64_t>(out, "int32 value");
      case ValueType::kUint64: return ReadScalar<uint64_t, uint64_t>(out, "uint64 value");
      case ValueType::kInt64: return ReadScalar<int64_t, int64_t>(out, "int64 value");
      case ValueType::kFloat32: return ReadScalar<float, double>(out, "float32 value");
      case ValueType::kFloat64: return ReadScalar<double, double>(out, "float64 value");
      case ValueType::kBool: {
        uint8_t b = 0;
        KVS_RETURN_IF_ERROR(c_.Read(&b, "bool value"));
        if (b > 1) return DataLoss("bool value {} at byte offset {} is neither 0 nor 1", b, c_.pos() - 1);
        out->v.emplace<bool>(b == 1);
        return Status::Ok();
      }
      case ValueType::kString: {
        std::string_view s;
        KVS_RETURN_IF_ERROR(c_.ReadString(&s, "string value"));
        out->v = std::string(s);
        return Status::Ok();
      }
      case ValueType::kArray: return ReadArray(depth + 1, out);
    }
    return DataLoss("unknown value type {} before byte offset {}", static_cast<uint32_t>(t), c_.pos());
  }

  Status ReadArray(int depth, Value* out) {
    const uint64_t at = c_.pos();
    if (depth > kMaxArrayDepth) {
      return DataLoss("array at byte offset {} is nested deeper than {} levels", at, kMaxArrayDepth);
    }
    uint32_t et = 0;
    KVS_RETURN_IF_ERROR(ReadValueType(&et, "array element type"));
    const auto elem = static_cast<ValueType>(et);
    uint64_t count = 0;
    KVS_RETURN_IF_ERROR(c_.Read(&count, "array length"));
    const uint64_t min = MinEncodedSize(elem);
    if (count > c_.remaining() / min) {
      return DataLoss("array at byte offset {} claims {} {} items ({}+ bytes each) but only {} bytes remain", at,
                      count, ValueTypeName(elem), min, c_.remaining());
    }
    if (count > kMaxMetadataValues - total_items_) {
      return DataLoss("array at byte offset {} brings the metadata past {} array items in total", at,
                      kMaxMetadataValues);
    }
    total_items_ += count;
    Array arr;
    arr.elem_type = elem;
    arr.items.reserve(std::min(count, kMaxReserve));
    for (uint64_t i = 0; i < count; ++i) {
      arr.items.emplace_back();
      KVS_RETURN_IF_ERROR(ReadValue(elem, depth, &arr.items.back()));
    }
    out->v = std::move(arr);
    return Status::Ok();
  }

  Status ApplyAlignment() {
    auto it = f_.kv_index_.find("general.alignment");
    if (it == f_.kv_index_.end()) {
      f_.alignment_ = kDefaultAlignment;
      return Status::Ok();
    }
    const Value& v = f_.kvs_[it->second].value;
    const bool integer = std::holds_alternative<uint64_t>(v.v) || std::holds_alternative<int64_t>(v.v);
    const std::optional<uint64_t> a = v.AsUint();
    if (!integer || !a || !std::has_single_bit(*a)) {
      return DataLoss("metadata key \"general.alignment\" must be a nonzero power of two, got {} {}",
                      TypeString(v), v.ToString(2));
    }
    f_.alignment_ = *a;
    return Status::Ok();
  }

  Status ReadTensorInfos(uint64_t n) {
    f_.tensors_.reserve(std::min(n, kMaxReserve));
    for (uint64_t i = 0; i < n; ++i) {
      std::string_view name;
      KVS_RETURN_IF_ERROR(ReadName("tensor name", i, f_.tensor_index_, &name));
      TensorInfo t;
      t.name = std::string(name);
      KVS_RETURN_IF_ERROR(ReadTensorInfo(&t).WithContext(fmt::format("tensor {}", QuoteString(name))));
      f_.tensors_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  Status ReadTensorInfo(TensorInfo* t) {
    uint32_t n_dims = 0;
    KVS_RETURN_IF_ERROR(c_.Read(&n_dims, "dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return DataLoss("{} dimensions at byte offset {} (must be 1..{})", n_dims, c_.pos() - 4, kMaxDims);
    }
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      KVS_RETURN_IF_ERROR(c_.Read(&dim, "dimension"));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLoss("dimension {} is {} at byte offset {} (must be at least 1)", d, dim, c_.pos() - 8);
      }
      if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim), &elements)) {
        return DataLoss("element count overflows at dimension {} (byte offset {})", d, c_.pos() - 8);
      }
      t->dims.push_back(static_cast<int64_t>(dim));
    }
    uint32_t type_id = 0;
    KVS_RETURN_IF_ERROR(c_.Read(&type_id, "tensor type"));
    const std::optional<DTypeTraits> tr = GetDTypeTraits(type_id);
    if (!tr) return Unimplemented("unknown tensor type id {} at byte offset {}", type_id, c_.pos() - 4);
    t->type = static_cast<DType>(type_id);
    KVS_RETURN_IF_ERROR(c_.Read(&t->offset, "tensor data offset"));
    if (t->dims[0] % tr->block_size != 0) {
      return DataLoss("row length {} is not a multiple of the {} block size {}", t->dims[0], tr->name,
                      tr->block_size);
    }
    int64_t row_bytes = 0, nbytes = 0;
    if (__builtin_mul_overflow(t->dims[0] / tr->block_size, tr->type_size, &row_bytes) ||
        __builtin_mul_overflow(row_bytes, elements / t->dims[0], &nbytes)) {
      return DataLoss("data size overflows ({} elements of {})", elements, tr->name);
    }
    t->nbytes = static_cast<uint64_t>(nbytes);
    return Status::Ok();
  }

  Status PlaceTensors() {
    const uint64_t end = c_.pos();
    const uint64_t a = f_.alignment_;
    if (end > std::numeric_limits<uint64_t>::max() - (a - 1)) {
      return DataLoss("data section start overflows (header ends at byte offset {}, alignment {})", end, a);
    }
    const uint64_t data = (end + a - 1) & ~(a - 1);
    if (f_.tensors_.empty()) {
      // Writers may omit the padding when there is no data to align.
      f_.data_offset_ = std::min(data, f_.size_);
      return Status::Ok();
    }
    if (data > f_.size_) {
      return DataLoss("truncated file: tensor data should start at byte offset {} but the file has {} bytes",
                      data, f_.size_);
    }
    f_.data_offset_ = data;
    const uint64_t room = f_.size_ - data;
    for (TensorInfo& t : f_.tensors_) {
      if (t.offset % a != 0) {
        return DataLoss("tensor {}: data offset {} is not a multiple of the alignment {}", QuoteString(t.name),
                        t.offset, a);
      }
      if (t.offset > room || t.nbytes > room - t.offset) {
        return DataLoss("tensor {}: data at byte offset {} + {} (+{} bytes) runs past the end of the file ({} bytes)",
                        QuoteString(t.name), data, t.offset, t.nbytes, f_.size_);
      }
      t.data = f_.base_ + data + t.offset;
    }
    std::vector<size_t> order(f_.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return f_.tensors_[x].offset < f_.tensors_[y].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& p = f_.tensors_[order[k - 1]];
      const TensorInfo& q = f_.tensors_[order[k]];
      if (p.offset + p.nbytes > q.offset) {  // both within the file: no overflow
        return DataLoss("tensors {} (data offset {}, {} bytes) and {} (data offset {}) overlap",
                        QuoteString(p.name), p.offset, p.nbytes, QuoteString(q.name), q.offset);
      }
    }
    return Status::Ok();
  }

  GgufFile& f_;
  Cursor c_;
  uint64_t total_items_ = 0;
};

Status GgufFile::Parse() { return Parser(this).Run(); }

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(const uint8_t* data, size_t size) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = size ? data : nullptr;
  f->size_ = size;
  KVS_RETURN_IF_ERROR(f->Parse());
  return f;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("cannot stat {}: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("{} is not a regular file", path);
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {  // mmap refuses length 0; Parse reports the empty file
    void* p = ::mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError("cannot mmap {} ({} bytes): {}", path, f->size_, std::strerror(err));
    }
    f->base_ = static_cast<const uint8_t*>(p);
    f->mapped_ = true;
  }
  ::close(fd);  // the mapping keeps the file referenced
  KVS_RETURN_IF_ERROR(f->Parse().WithContext(path));
  return f;
}

GgufFile::~GgufFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const Value* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status Absent(std::string_view key) { return NotFound("metadata key {} not found", QuoteString(key)); }

Status WrongType(std::string_view key, const Value& v, const char* want) {
  return InvalidArgument("metadata key {} is {}, expected {}", QuoteString(key), TypeString(v), want);
}

}  // namespace

StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Absent(key);
  if (const std::string* s = v->AsString()) return *s;
  return WrongType(key, *v, "string");
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Absent(key);
  if (std::optional<int64_t> i = v->AsInt()) return *i;
  if (v->AsUint()) return OutOfRange("metadata key {} value {} does not fit int64", QuoteString(key), v->ToString());
  return WrongType(key, *v, "an integer");
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Absent(key);
  if (std::optional<double> d = v->AsFloat()) return *d;
  return WrongType(key, *v, "a number");
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Absent(key);
  if (std::optional<bool> b = v->AsBool()) return *b;
  return WrongType(key, *v, "bool");
}

StatusOr<const Array*> GgufFile::GetArray(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Absent(key);
  if (const Array* a = v->AsArray()) return a;
  return WrongType(key, *v, "an array");
}

StatusOr<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t def) const {
  return Find(key) ? GetInt(key) : StatusOr<int64_t>(def);
}

StatusOr<double> GgufFile::GetFloatOr(std::string_view key, double def) const {
  return Find(key) ? GetFloat(key) : StatusOr<double>(def);
}

StatusOr<bool> GgufFile::GetBoolOr(std::string_view key, bool def) const {
  return Find(key) ? GetBool(key) : StatusOr<bool>(def);
}

StatusOr<std::string> GgufFile::GetStringOr(std::string_view key, std::string def) const {
  return Find(key) ? GetString(key) : StatusOr<std::string>(std::move(def));
}

}  // namespace kvs::gguf
