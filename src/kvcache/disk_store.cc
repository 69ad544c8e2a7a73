#include "kvcache/disk_store.h"

#include "kvcache/cache_events.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

namespace kvs::kvcache {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'V', 'S', 'D', 'I', 'S', 'K', '1'};
constexpr size_t kHeaderBytes = 8 + 8 + 16 + 16 + 4 + 4 + 8 + 8;  // 72
constexpr size_t kChecksumOffset = kHeaderBytes - 8;
constexpr const char* kSuffix = ".kvb";
// Limits a header may claim before anything is allocated for it.
constexpr uint32_t kMaxTokens = 1u << 16;
constexpr uint32_t kMaxSalt = 1u << 12;

struct Header {
  uint64_t fingerprint = 0;
  BlockHash hash, parent;
  uint32_t num_tokens = 0, salt_len = 0;
  uint64_t payload_bytes = 0, checksum = 0;
  uint64_t FileBytes() const { return kHeaderBytes + 4ULL * num_tokens + salt_len + payload_bytes; }
};

template <typename T>
void Store(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}
template <typename T>
T Get(const uint8_t* p, size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

bool ParseHeader(const uint8_t* p, Header* h) {
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) return false;
  h->fingerprint = Get<uint64_t>(p, 8);
  h->hash = {Get<uint64_t>(p, 16), Get<uint64_t>(p, 24)};
  h->parent = {Get<uint64_t>(p, 32), Get<uint64_t>(p, 40)};
  h->num_tokens = Get<uint32_t>(p, 48);
  h->salt_len = Get<uint32_t>(p, 52);
  h->payload_bytes = Get<uint64_t>(p, 56);
  h->checksum = Get<uint64_t>(p, 64);
  return h->num_tokens <= kMaxTokens && h->salt_len <= kMaxSalt && h->payload_bytes <= (1ULL << 40);
}

uint64_t Checksum(std::vector<uint8_t>& file) {
  const uint64_t stored = Get<uint64_t>(file.data(), kChecksumOffset);
  Store<uint64_t>(file, kChecksumOffset, 0);
  const uint64_t sum = XXH3_64bits(file.data(), file.size());
  Store<uint64_t>(file, kChecksumOffset, stored);
  return sum;
}

// Reads exactly n bytes at offset 0 of fd (short: the file is truncated).
bool ReadAll(int fd, uint8_t* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<DiskKvStore>> DiskKvStore::Open(const DiskStoreConfig& config) {
  if (config.path.empty()) return InvalidArgument("kv_cache.disk.path is empty");
  if (config.max_bytes <= 0) return InvalidArgument("kv_cache.disk.max_bytes must be > 0 (got {})", config.max_bytes);
  std::error_code ec;
  fs::create_directories(config.path, ec);
  if (ec || !fs::is_directory(config.path)) {
    return IoError("kv_cache.disk.path {}: cannot create the directory ({})", config.path,
                   ec ? ec.message() : "not a directory");
  }
  if (::access(config.path.c_str(), W_OK) != 0) {
    return IoError("kv_cache.disk.path {}: not writable ({})", config.path, std::strerror(errno));
  }
  // A file size limit (ulimit -f) must make a block write fail (EFBIG,
  // counted), not end the process, which SIGXFSZ does by default.
  std::signal(SIGXFSZ, SIG_IGN);
  std::unique_ptr<DiskKvStore> s(new DiskKvStore(config));
  KVS_RETURN_IF_ERROR(s->Scan());
  s->writer_ = std::thread([p = s.get()] { p->WriterLoop(); });
  s->reader_ = std::thread([p = s.get()] { p->ReaderLoop(); });
  return s;
}

DiskKvStore::~DiskKvStore() {
  {
    std::unique_lock lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  read_cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (writer_.joinable()) writer_.join();
}

std::string DiskKvStore::FileFor(const BlockHash& h) const {
  return config_.path + "/" + BlockHashHex(h) + kSuffix;
}

Status DiskKvStore::Scan() {
  struct Found {
    BlockHash hash;
    int64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (fs::directory_iterator it(config_.path, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    const std::string name = p.filename().string();
    if (name.ends_with(".tmp")) {  // a write a crash cut short
      fs::remove(p, ec);
      continue;
    }
    if (!name.ends_with(kSuffix) || !it->is_regular_file()) continue;
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    uint8_t raw[kHeaderBytes];
    Header h;
    BlockHash named;
    const bool ok_name = ParseBlockHashHex(name.substr(0, name.size() - std::strlen(kSuffix)), &named);
    const bool ok_header = fd >= 0 && ReadAll(fd, raw, sizeof raw) && ParseHeader(raw, &h);
    struct stat st {};
    const bool ok_stat = fd >= 0 && ::fstat(fd, &st) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok_name || !ok_header || !ok_stat || h.fingerprint != config_.fingerprint) {
      ++stats_.dropped_foreign;
      fs::remove(p, ec);
      continue;
    }
    if (!(h.hash == named) || static_cast<uint64_t>(st.st_size) != h.FileBytes()) {
      ++stats_.dropped_corrupt;
      fs::remove(p, ec);
      continue;
    }
    found.push_back({named, static_cast<int64_t>(st.st_size), it->last_write_time(ec)});
  }
  if (ec) return IoError("kv_cache.disk.path {}: cannot list it ({})", config_.path, ec.message());
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::unique_lock lock(mu_);
  for (const Found& f : found) {
    lru_.push_back(f.hash);
    index_[f.hash] = Entry{f.bytes, std::prev(lru_.end())};
    bytes_ += f.bytes;
  }
  EvictLocked();  // a smaller max_bytes than the last run's
  return Status::Ok();
}

bool DiskKvStore::Contains(const BlockHash& h) const {
  std::unique_lock lock(mu_);
  return index_.count(h) != 0;
}

bool DiskKvStore::Put(DiskBlockMeta meta, std::vector<uint8_t> payload) {
  {
    std::unique_lock lock(mu_);
    if (index_.count(meta.hash) != 0 || queued_.count(meta.hash) != 0) return false;
    const int64_t n = static_cast<int64_t>(payload.size());
    if (stats_.pending_bytes + n > config_.max_pending_bytes) {
      ++stats_.queue_full;
      return false;
    }
    stats_.pending_bytes += n;
    queued_.insert(meta.hash);
    queue_.push_back(Pending{std::move(meta), std::move(payload)});
  }
  work_cv_.notify_one();
  return true;
}

StatusOr<int64_t> DiskKvStore::WriteFile(const Pending& p) const {
  const DiskBlockMeta& m = p.meta;
  std::vector<uint8_t> file(kHeaderBytes + 4 * m.tokens.size() + m.salt.size() + p.payload.size());
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  Store<uint64_t>(file, 8, config_.fingerprint);
  Store<uint64_t>(file, 16, m.hash.lo);
  Store<uint64_t>(file, 24, m.hash.hi);
  Store<uint64_t>(file, 32, m.parent.lo);
  Store<uint64_t>(file, 40, m.parent.hi);
  Store<uint32_t>(file, 48, static_cast<uint32_t>(m.tokens.size()));
  Store<uint32_t>(file, 52, static_cast<uint32_t>(m.salt.size()));
  Store<uint64_t>(file, 56, p.payload.size());
  size_t at = kHeaderBytes;
  std::memcpy(file.data() + at, m.tokens.data(), 4 * m.tokens.size());
  at += 4 * m.tokens.size();
  std::memcpy(file.data() + at, m.salt.data(), m.salt.size());
  at += m.salt.size();
  if (!p.payload.empty()) std::memcpy(file.data() + at, p.payload.data(), p.payload.size());
  Store<uint64_t>(file, kChecksumOffset, Checksum(file));

  const std::string final_name = FileFor(m.hash);
  const std::string tmp = final_name + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("{}: {}", tmp, std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (done < file.size()) {
    const ssize_t w = ::write(fd, file.data() + done, file.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), final_name.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return IoError("{}: {}", final_name, std::strerror(err));
  }
  return static_cast<int64_t>(file.size());
}

void DiskKvStore::WriterLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_, and everything written
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    const StatusOr<int64_t> written = WriteFile(p);
    lock.lock();
    writing_ = false;
    queued_.erase(p.meta.hash);
    stats_.pending_bytes -= static_cast<int64_t>(p.payload.size());
    if (!written.ok()) {
      ++stats_.write_errors;
    } else {
      lru_.push_back(p.meta.hash);
      index_[p.meta.hash] = Entry{*written, std::prev(lru_.end())};
      if (listener_) listener_(p.meta.hash, true);
      bytes_ += *written;
      ++stats_.written_blocks;
      stats_.written_bytes += *written;
      EvictLocked();
    }
    if (queue_.empty()) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

void DiskKvStore::Flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return (queue_.empty() && !writing_) || stop_; });
}

void DiskKvStore::DropLocked(BlockHash h) {  // by value: callers pass lru_.front()
  const auto it = index_.find(h);
  if (it == index_.end()) return;
  std::error_code ec;
  fs::remove(FileFor(h), ec);
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  index_.erase(it);
  if (listener_) listener_(h, false);
}

void DiskKvStore::SetIndexListener(IndexListener listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
  if (!listener_) return;
  for (const BlockHash& h : lru_) listener_(h, true);
}

void DiskKvStore::EvictLocked() {
  while (bytes_ > config_.max_bytes && !lru_.empty()) {
    DropLocked(lru_.front());
    ++stats_.evicted_blocks;
  }
}

namespace {
bool SameBlock(const DiskBlockMeta& a, const DiskBlockMeta& b) {
  return a.hash == b.hash && a.parent == b.parent && a.tokens == b.tokens && a.salt == b.salt;
}
}  // namespace

StatusOr<std::vector<uint8_t>> DiskKvStore::Get(const DiskBlockMeta& expect, int64_t payload_bytes) {
  {
    std::unique_lock lock(mu_);
    read_done_cv_.wait(lock, [&] { return reading_ != expect.hash; });
    const auto it = ahead_.find(expect.hash);
    if (it != ahead_.end()) {
      ReadAhead a = std::move(it->second);
      const bool read = !a.payload.empty();
      if (!read) std::erase(reads_, expect.hash);  // queued only: read it here, now
      ForgetAheadLocked(it);
      if (read && SameBlock(a.meta, expect) && a.payload_bytes == payload_bytes) {
        ++stats_.prefetch_hits;
        return std::move(a.payload);
      }
      if (read) ++stats_.prefetch_unused;
    }
  }
  return ReadChecked(expect, payload_bytes);
}

void DiskKvStore::ForgetAheadLocked(std::unordered_map<BlockHash, ReadAhead, BlockHashHasher>::iterator it) {
  ahead_bytes_ -= it->second.payload_bytes;
  ahead_order_.erase(it->second.order);
  ahead_.erase(it);
}

void DiskKvStore::Prefetch(std::vector<DiskBlockMeta> metas, int64_t payload_bytes) {
  {
    std::unique_lock lock(mu_);
    for (DiskBlockMeta& m : metas) {
      if (ahead_.count(m.hash) || !index_.count(m.hash)) continue;
      if (ahead_bytes_ + payload_bytes > config_.max_prefetch_bytes) {
        // Make room from the oldest entries already read (never one queued:
        // it is about to be read for a request queued earlier).
        auto old = ahead_order_.begin();
        while (ahead_bytes_ + payload_bytes > config_.max_prefetch_bytes && old != ahead_order_.end()) {
          const auto it = ahead_.find(*old++);
          if (it->second.payload.empty()) continue;
          ++stats_.prefetch_unused;
          ForgetAheadLocked(it);
        }
        if (ahead_bytes_ + payload_bytes > config_.max_prefetch_bytes) break;
      }
      const BlockHash h = m.hash;
      ahead_order_.push_back(h);
      ahead_.emplace(h, ReadAhead{std::move(m), payload_bytes, {}, std::prev(ahead_order_.end())});
      ahead_bytes_ += payload_bytes;
      reads_.push_back(h);
    }
  }
  read_cv_.notify_one();
}

void DiskKvStore::ReaderLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    read_cv_.wait(lock, [this] { return stop_ || !reads_.empty(); });
    if (stop_) break;  // what is still queued is only an optimization
    const BlockHash h = reads_.front();
    reads_.pop_front();
    const auto it = ahead_.find(h);
    if (it == ahead_.end()) continue;
    const DiskBlockMeta meta = it->second.meta;
    const int64_t bytes = it->second.payload_bytes;
    reading_ = h;
    lock.unlock();
    StatusOr<std::vector<uint8_t>> payload = ReadChecked(meta, bytes);
    lock.lock();
    reading_.reset();
    read_done_cv_.notify_all();
    // The entry is still there (a Get of this block waits for the read;
    // Prefetch makes room only from entries read already). A block that
    // failed its checks was dropped from the index by ReadChecked.
    const auto again = ahead_.find(h);
    if (again == ahead_.end()) continue;
    if (!payload.ok() || payload->empty()) {
      ForgetAheadLocked(again);
      continue;
    }
    again->second.payload = std::move(*payload);
    ++stats_.prefetched_blocks;
  }
}

StatusOr<std::vector<uint8_t>> DiskKvStore::ReadChecked(const DiskBlockMeta& expect, int64_t payload_bytes) {
  int64_t file_bytes = 0;
  {
    std::unique_lock lock(mu_);
    const auto it = index_.find(expect.hash);
    if (it == index_.end()) return NotFound("block {} is not on disk", BlockHashHex(expect.hash));
    file_bytes = it->second.bytes;
  }
  // Read outside the lock: the writer never rewrites an indexed file (a
  // hash is written once), and an eviction meanwhile only unlinks it.
  const std::string name = FileFor(expect.hash);
  std::vector<uint8_t> file(static_cast<size_t>(file_bytes));
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {  // evicted meanwhile, or deleted by someone else
    std::unique_lock lock(mu_);
    DropLocked(expect.hash);
    return NotFound("block {} is not on disk", BlockHashHex(expect.hash));
  }
  struct stat st {};
  bool ok = fd >= 0 && ::fstat(fd, &st) == 0 && st.st_size == file_bytes && ReadAll(fd, file.data(), file.size());
  if (fd >= 0) ::close(fd);
  Header h;
  ok = ok && ParseHeader(file.data(), &h) && h.FileBytes() == file.size() && h.fingerprint == config_.fingerprint &&
       h.hash == expect.hash && h.checksum == Checksum(file);
  const std::string why = ok ? "" : "failed its checksum or is truncated";
  // What the file says must be what the caller expects: the same parent,
  // tokens, salt and KV size (a hash is only an index).
  ok = ok && h.parent == expect.parent && h.num_tokens == expect.tokens.size() && h.salt_len == expect.salt.size() &&
       h.payload_bytes == static_cast<uint64_t>(payload_bytes) &&
       std::memcmp(file.data() + kHeaderBytes, expect.tokens.data(), 4 * expect.tokens.size()) == 0 &&
       std::memcmp(file.data() + kHeaderBytes + 4 * expect.tokens.size(), expect.salt.data(), expect.salt.size()) == 0;
  std::unique_lock lock(mu_);
  if (!ok) {
    ++stats_.dropped_corrupt;
    DropLocked(expect.hash);
    return DataLoss("block {} on disk {}", BlockHashHex(expect.hash), why.empty() ? "does not hold this prefix" : why);
  }
  const auto it = index_.find(expect.hash);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  ++stats_.read_blocks;
  stats_.read_bytes += static_cast<int64_t>(file.size());
  lock.unlock();
  ::utimensat(AT_FDCWD, name.c_str(), nullptr, 0);  // recency for the next restart's order
  // The payload in place: no second buffer for a block that can be MiBs.
  const size_t at = kHeaderBytes + 4 * expect.tokens.size() + expect.salt.size();
  file.erase(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(at));
  return file;
}

DiskStoreStats DiskKvStore::stats() const {
  std::unique_lock lock(mu_);
  DiskStoreStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  s.bytes = bytes_;
  return s;
}

}  // namespace kvs::kvcache
