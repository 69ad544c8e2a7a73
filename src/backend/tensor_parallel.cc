#include "backend/tensor_parallel.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include <spdlog/spdlog.h>

#include "base/sha256.h"

namespace kvs::backend {
namespace {

enum class Op : uint8_t { kSetup = 1, kForward, kRelease, kReleaseWindow, kEnd, kShutdown, kBlockBytes, kLoadBlock };

// Point-to-point tag of a block's KV bytes sent to rank 0 (the model's tags are small).
constexpr int kBlockTag = 16;

// Little-endian as the hosts are: every rank runs the same build on x86-64.
class Writer {
 public:
  explicit Writer(Op op) { Put<uint8_t>(static_cast<uint8_t>(op)); }
  template <typename T>
  void Put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
  }
  void PutInts(std::span<const int32_t> v) {
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    const size_t at = b_.size();
    b_.resize(at + v.size_bytes());
    if (!v.empty()) std::memcpy(b_.data() + at, v.data(), v.size_bytes());
  }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    b_.insert(b_.end(), s.begin(), s.end());
  }
  void PutBytes(std::span<const uint8_t> v) {
    Put<uint64_t>(v.size());
    b_.insert(b_.end(), v.begin(), v.end());
  }
  std::vector<uint8_t>& bytes() { return b_; }

 private:
  std::vector<uint8_t> b_;
};

// Reads what Writer wrote; a short message is a bug on rank 0 (same build), so CHECK-style abort.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : b_(b) {}
  template <typename T>
  T Get() {
    T v;
    Need(sizeof(T));
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  void GetInts(std::vector<int32_t>& out) {
    const uint32_t n = Get<uint32_t>();
    Need(n * sizeof(int32_t));
    out.resize(n);
    if (n > 0) std::memcpy(out.data(), b_.data() + at_, n * sizeof(int32_t));
    at_ += n * sizeof(int32_t);
  }
  // A view into the message (valid while it lives).
  std::span<const uint8_t> GetBytes() {
    const auto n = static_cast<size_t>(Get<uint64_t>());
    Need(n);
    const std::span<const uint8_t> v(b_.data() + at_, n);
    at_ += n;
    return v;
  }
  std::string GetString() {
    const uint32_t n = Get<uint32_t>();
    Need(n);
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }

 private:
  void Need(size_t n) {
    if (at_ + n > b_.size()) {
      spdlog::critical("tensor parallel: a message from rank 0 is shorter than its contents");
      std::abort();
    }
  }
  const std::vector<uint8_t>& b_;
  size_t at_ = 0;
};

void Send(Collective& group, Writer& w) { group.Broadcast(w.bytes(), 0); }

std::vector<uint8_t> EncodeSetup(const TensorParallelSetup& s) {
  Writer w(Op::kSetup);
  w.Put<int32_t>(s.tensor_parallel);
  w.Put<int32_t>(s.pipeline_parallel);
  w.PutString(s.model_sha256);
  w.PutString(s.model_dtype);
  w.Put<int64_t>(s.context);
  w.Put<int32_t>(s.runner.block_size);
  w.Put<int32_t>(s.runner.num_blocks);
  w.Put<int32_t>(s.runner.num_window_blocks);
  w.Put<uint32_t>(static_cast<uint32_t>(s.runner.kv_dtype));
  w.Put<int64_t>(s.runner.max_batch_tokens);
  return std::move(w.bytes());
}

TensorParallelSetup DecodeSetup(Reader& r) {
  TensorParallelSetup s;
  s.tensor_parallel = r.Get<int32_t>();
  s.pipeline_parallel = r.Get<int32_t>();
  s.model_sha256 = r.GetString();
  s.model_dtype = r.GetString();
  s.context = r.Get<int64_t>();
  s.runner.block_size = r.Get<int32_t>();
  s.runner.num_blocks = r.Get<int32_t>();
  s.runner.num_window_blocks = r.Get<int32_t>();
  s.runner.kv_dtype = static_cast<DType>(r.Get<uint32_t>());
  s.runner.max_batch_tokens = r.Get<int64_t>();
  return s;
}

// What this rank did since its last report, as the board's deltas.
class RankMeter {
 public:
  // world: where reports go; stage: whose all-reduces are the model's.
  RankMeter(Collective& world, Collective* stage) : group_(world), stage_(stage) {}
  void SetStage(Collective* stage) {
    stage_ = stage;
    reported_ar_seconds_ = stage_ != nullptr ? stage_->allreduce_seconds() : 0;
    reported_ar_bytes_ = stage_ != nullptr ? stage_->allreduce_bytes() : 0;
  }
  void AddForward(double seconds) {
    forward_seconds_ += seconds;
    ++steps_;
  }
  // Every rank calls it at the same step: one all-reduce of [ranks, 4].
  void Report(ParallelStatsBoard* board) {
    constexpr int kF = ParallelStatsBoard::kFields;
    std::vector<float> v(kF * static_cast<size_t>(group_.size()), 0.0f);
    float* mine = v.data() + kF * group_.rank();
    mine[0] = static_cast<float>(forward_seconds_);
    const double ar_seconds = stage_ != nullptr ? stage_->allreduce_seconds() : 0;
    const int64_t ar_bytes = stage_ != nullptr ? stage_->allreduce_bytes() : 0;
    mine[1] = static_cast<float>(ar_seconds - reported_ar_seconds_);
    mine[2] = static_cast<float>(ar_bytes - reported_ar_bytes_);
    reported_ar_seconds_ = ar_seconds;
    reported_ar_bytes_ = ar_bytes;
    mine[3] = static_cast<float>(steps_);
    mine[4] = static_cast<float>(group_.wait_seconds() - reported_wait_seconds_);
    reported_wait_seconds_ = group_.wait_seconds();
    forward_seconds_ = 0;
    steps_ = 0;
    group_.AllReduceSum(v);
    if (board != nullptr) board->Add(v);
  }

 private:
  Collective& group_;
  Collective* stage_;
  double forward_seconds_ = 0;
  int64_t steps_ = 0;
  double reported_ar_seconds_ = 0;
  int64_t reported_ar_bytes_ = 0;
  double reported_wait_seconds_ = 0;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Every rank says whether it is ready (0) or not (1); the number not ready.
int CountNotReady(Collective& group, bool ready) {
  float flag = ready ? 0.0f : 1.0f;
  group.AllReduceSum({&flag, 1});
  return static_cast<int>(flag + 0.5f);
}

// Collective, after every rank has its shard: each rank's bytes of one KV
// block (CpuRunner::BlockBytes; 0: it cannot export blocks), by rank. A
// block of the disk tier is every rank's bytes in rank order. Sent as two
// floats each (exact below 2^44 bytes).
std::vector<int64_t> ShareBlockBytes(Collective& group, int64_t mine) {
  const auto n = static_cast<size_t>(group.size()), me = static_cast<size_t>(group.rank());
  std::vector<float> v(2 * n, 0.0f);
  v[2 * me] = static_cast<float>(mine >> 20);
  v[2 * me + 1] = static_cast<float>(mine & ((1 << 20) - 1));
  group.AllReduceSum(v);
  std::vector<int64_t> out(n);
  for (size_t r = 0; r < n; ++r) {
    out[r] = (static_cast<int64_t>(v[2 * r] + 0.5f) << 20) + static_cast<int64_t>(v[2 * r + 1] + 0.5f);
  }
  return out;
}

// Where rank r's part of a whole block starts.
size_t BlockOffset(const std::vector<int64_t>& sizes, int r) {
  int64_t at = 0;
  for (int i = 0; i < r; ++i) at += sizes[static_cast<size_t>(i)];
  return static_cast<size_t>(at);
}

size_t FloatsFor(int64_t bytes) { return static_cast<size_t>((bytes + 3) / 4); }

// The sequence ranges [first, last) of a step's micro-batches: one without
// pipeline stages; else up to one per stage, with about the same number of
// tokens each and at least kMinMicroBatchTokens. Why the floor: a decode
// step reads every weight of a stage once per micro-batch, so splitting a
// step of single tokens multiplies its memory traffic (M-Q8_0, 2 stages, 4
// streams: 0.45x one process split, against the pipeline's 2/3 at best);
// prefill chunks are compute-bound and do overlap. Every rank splits a step
// the same way.
constexpr int64_t kMinMicroBatchTokens = 64;
std::vector<std::pair<size_t, size_t>> MicroBatches(const engine::ForwardBatch& b, int stages) {
  const size_t n = b.seqs.size();
  const int64_t tokens = b.NumTokens();
  const size_t k = static_cast<size_t>(
      std::max<int64_t>(1, std::min<int64_t>({static_cast<int64_t>(n), stages, tokens / kMinMicroBatchTokens})));
  std::vector<std::pair<size_t, size_t>> out;
  size_t first = 0;
  int64_t acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += static_cast<int64_t>(b.seqs[i].tokens.size());
    const size_t parts_left = k - out.size() - 1;  // after the one being filled
    const bool full = acc * static_cast<int64_t>(k) >= tokens * static_cast<int64_t>(out.size() + 1);
    if (parts_left > 0 && (full || n - i - 1 == parts_left)) {
      out.emplace_back(first, i + 1);
      first = i + 1;
    }
  }
  out.emplace_back(first, n);
  return out;
}

int64_t LogitRows(const engine::ForwardBatch& b, size_t first, size_t last) {
  int64_t rows = 0;
  for (size_t i = first; i < last; ++i) rows += b.seqs[i].NumLogits();
  return rows;
}

// Where this rank's model gets its input and sends its output (rank =
// stage x T + t).
model::LlamaModel::PipelineLinks Links(Collective& world, int tp, int pp) {
  const int r = world.rank(), stage = r / tp, t = r % tp;
  const bool last = stage == pp - 1;
  if (pp == 1) return {};
  return {&world, stage > 0 ? r - tp : -1, last ? -1 : r + tp, last && t == 0 && r != 0 ? 0 : -1};
}

// Rank 0's runner: the workers first, then its own shard.
class LeaderRunner : public engine::ModelRunner {
 public:
  LeaderRunner(std::unique_ptr<CpuRunner> local, Collective& group, Collective* stage, int pp,
               std::shared_ptr<ParallelStatsBoard> stats)
      : local_(std::move(local)),
        group_(group),
        pp_(pp),
        last_stage_rank_((pp - 1) * (group.size() / pp)),
        meter_(group, stage),
        stats_(std::move(stats)) {}
  ~LeaderRunner() override {
    Writer w(Op::kEnd);
    Send(group_, w);
  }
  int32_t vocab_size() const override { return local_->vocab_size(); }
  int32_t block_size() const override { return local_->block_size(); }
  int32_t num_blocks() const override { return local_->num_blocks(); }
  int32_t window() const override { return local_->window(); }
  int32_t num_window_blocks() const override { return local_->num_window_blocks(); }
  int64_t kv_committed_bytes() const override { return local_->kv_committed_bytes(); }

  // A block's KV is spread over the ranks: BlockBytes gathers every rank's
  // part to rank 0 (in rank order), LoadBlock hands each rank its part, so
  // the disk tier keeps whole blocks. Offered when every rank can export.
  void SetBlockBytes(std::vector<int64_t> sizes) {
    block_sizes_ = std::move(sizes);
    const bool all = std::find(block_sizes_.begin(), block_sizes_.end(), 0) == block_sizes_.end();
    whole_block_bytes_ = all ? std::accumulate(block_sizes_.begin(), block_sizes_.end(), int64_t{0}) : 0;
  }
  int64_t block_bytes() const override { return whole_block_bytes_; }
  std::span<const uint8_t> BlockBytes(int32_t block_id) const override {
    if (whole_block_bytes_ == 0) return {};
    Writer w(Op::kBlockBytes);
    w.Put<int32_t>(block_id);
    Send(group_, w);
    gathered_.resize(static_cast<size_t>(whole_block_bytes_));
    const std::span<const uint8_t> mine = local_->BlockBytes(block_id);
    std::copy(mine.begin(), mine.end(), gathered_.begin());
    for (int r = 1; r < group_.size(); ++r) {
      const int64_t n = block_sizes_[static_cast<size_t>(r)];
      recv_.resize(FloatsFor(n));
      group_.Recv(recv_, r, kBlockTag);
      std::memcpy(gathered_.data() + BlockOffset(block_sizes_, r), recv_.data(), static_cast<size_t>(n));
    }
    return gathered_;
  }
  bool LoadBlock(int32_t block_id, std::span<const uint8_t> bytes) override {
    if (whole_block_bytes_ == 0 || static_cast<int64_t>(bytes.size()) != whole_block_bytes_) return false;
    Writer w(Op::kLoadBlock);
    w.Put<int32_t>(block_id);
    w.PutBytes(bytes);
    Send(group_, w);
    return local_->LoadBlock(block_id, bytes.first(static_cast<size_t>(block_sizes_[0])));
  }

  Status Forward(const engine::ForwardBatch& batch, std::span<float> logits) override {
    Writer w(Op::kForward);
    w.Put<uint32_t>(static_cast<uint32_t>(batch.seqs.size()));
    for (const engine::ForwardSeq& s : batch.seqs) {
      w.Put<int64_t>(s.seq_id);
      w.Put<int32_t>(s.start_pos);
      w.Put<uint8_t>(static_cast<uint8_t>((s.want_logits ? 1 : 0) | (s.all_logits ? 2 : 0) | (s.decode_rows ? 4 : 0)));
      w.PutInts(s.tokens);
      w.PutInts(s.block_table);
      w.PutInts(s.window_block_table);
    }
    const bool report = ++steps_ % ParallelStatsBoard::kReportEvery == 0;
    w.Put<uint8_t>(report ? 1 : 0);
    Send(group_, w);
    const auto t0 = std::chrono::steady_clock::now();
    Status st;
    if (pp_ == 1) {
      st = local_->Forward(batch, logits);
    } else {
      // The last stage sends each micro-batch's logits here: every receive
      // is posted before the first send of activations, so that neither
      // side waits on the other.
      const auto parts = MicroBatches(batch, pp_);
      const int64_t vocab = local_->vocab_size();
      slices_.clear();  // a member: no allocation per step
      int64_t row = 0;
      for (const auto& [first, last] : parts) {
        const int64_t rows = LogitRows(batch, first, last);
        slices_.push_back(logits.subspan(static_cast<size_t>(row * vocab), static_cast<size_t>(rows * vocab)));
        if (rows > 0) group_.PostRecv(slices_.back(), last_stage_rank_, model::LlamaModel::kLogitsTag);
        row += rows;
      }
      for (size_t i = 0; i < parts.size() && st.ok(); ++i) {
        part_.seqs.assign(batch.seqs.begin() + static_cast<std::ptrdiff_t>(parts[i].first),
                          batch.seqs.begin() + static_cast<std::ptrdiff_t>(parts[i].second));
        st = local_->Forward(part_, slices_[i]);
      }
      group_.WaitPosted();
      if (stats_ != nullptr) stats_->AddMicroBatches(static_cast<int64_t>(parts.size()));
    }
    meter_.AddForward(SecondsSince(t0));
    if (report) meter_.Report(stats_.get());
    return st;
  }
  void ReleaseBlocks(std::span<const int32_t> ids) override { Release(Op::kRelease, ids); }
  void ReleaseWindowBlocks(std::span<const int32_t> ids) override { Release(Op::kReleaseWindow, ids); }

 private:
  void Release(Op op, std::span<const int32_t> ids) {
    Writer w(op);
    w.PutInts(ids);
    Send(group_, w);
    if (op == Op::kRelease) {
      local_->ReleaseBlocks(ids);
    } else {
      local_->ReleaseWindowBlocks(ids);
    }
  }

  std::unique_ptr<CpuRunner> local_;
  Collective& group_;
  int pp_;
  int last_stage_rank_;     // the last stage's first rank: it sends the logits
  engine::ForwardBatch part_;  // a micro-batch of the step
  std::vector<std::span<float>> slices_;  // [micro-batches] their rows of the step's logits
  RankMeter meter_;
  std::shared_ptr<ParallelStatsBoard> stats_;
  int64_t steps_ = 0;
  std::vector<int64_t> block_sizes_;  // [ranks] each rank's bytes of one block
  int64_t whole_block_bytes_ = 0;     // their sum; 0 when a rank cannot export
  mutable std::vector<uint8_t> gathered_;  // [whole_block_bytes_] BlockBytes' answer (engine thread)
  mutable std::vector<float> recv_;        // one rank's part as received
};

// A worker's shard for one setup, or why it has none. `stage` is its
// stage's group (the model's all-reduces).
StatusOr<std::unique_ptr<CpuRunner>> StartShard(Collective& group, Collective* stage, const TensorParallelSetup& s,
                                                const std::string& model_path, int threads) {
  KVS_ASSIGN_OR_RETURN(const std::string sha, Sha256File(model_path));
  if (!s.model_sha256.empty() && sha != s.model_sha256) {
    return DataLoss("{} hashes to {}, rank 0's model file to {}: every rank must load the same file", model_path, sha,
                    s.model_sha256);
  }
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(model_path));
  KVS_ASSIGN_OR_RETURN(const model::ModelConfig whole, model::ModelConfig::FromGguf(*file));
  const model::LoadOptions lo =
      ShardLoadOptions(s.model_dtype, s.tensor_parallel, s.pipeline_parallel, group.rank(), whole.n_layers);
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> model, model::LlamaModel::FromFile(std::move(file), lo));
  model->SetContextLength(s.context);
  if (s.tensor_parallel > 1) model->SetCollective(stage);
  model->SetPipeline(Links(group, s.tensor_parallel, s.pipeline_parallel));
  RunnerOptions ro = s.runner;
  ro.threads = threads;
  return CpuRunner::Create(std::move(model), ro);
}

}  // namespace

StatusOr<std::unique_ptr<engine::ModelRunner>> MakeTensorParallelRunner(std::unique_ptr<model::LlamaModel> model,
                                                                        const TensorParallelSetup& setup,
                                                                        Collective& group,
                                                                        std::shared_ptr<ParallelStatsBoard> stats) {
  if (group.rank() != 0) return FailedPrecondition("tensor parallel: only rank 0 runs the engine");
  if (model->shard_count() != setup.tensor_parallel || setup.tensor_parallel * setup.pipeline_parallel != group.size()) {
    return FailedPrecondition("tensor parallel: the model was loaded as {} shards of {} stages for a group of {}",
                              model->shard_count(), setup.pipeline_parallel, group.size());
  }
  std::vector<uint8_t> msg = EncodeSetup(setup);
  group.Broadcast(msg, 0);
  Collective* stage = group.Split(0, 0);  // rank 0: stage 0, t 0
  if (setup.tensor_parallel > 1) model->SetCollective(stage);
  model->SetPipeline(Links(group, setup.tensor_parallel, setup.pipeline_parallel));
  auto local = CpuRunner::Create(std::move(model), setup.runner);
  const int not_ready = CountNotReady(group, local.ok());
  if (!local.ok()) return local.status().WithContext("tensor parallel rank 0");
  if (not_ready > 0) {
    Writer w(Op::kEnd);
    Send(group, w);
    return FailedPrecondition("tensor parallel: {} of the {} ranks could not load their shard (their logs say why)",
                              not_ready, group.size());
  }
  const int64_t mine = (*local)->block_bytes();
  auto leader = std::make_unique<LeaderRunner>(std::move(*local), group, stage, setup.pipeline_parallel, std::move(stats));
  leader->SetBlockBytes(ShareBlockBytes(group, mine));
  return std::unique_ptr<engine::ModelRunner>(std::move(leader));
}

Status RunTensorParallelWorker(Collective& group, const std::string& model_path, int threads) {
  std::unique_ptr<CpuRunner> shard;
  std::vector<uint8_t> msg;
  // Owned copies of a forward message's lists; the batch's spans point into them.
  std::vector<std::vector<int32_t>> lists;
  engine::ForwardBatch batch, part;
  std::vector<float> logits;  // the last stage's first rank: what it sends to rank 0
  RankMeter meter(group, nullptr);
  std::vector<int64_t> block_sizes;  // [ranks] bytes of one KV block each (ShareBlockBytes)
  std::vector<float> send_buf;       // this rank's part of a block, as sent to rank 0
  int tp = 1, pp = 1;
  for (;;) {
    group.Broadcast(msg, 0);
    Reader r(msg);
    switch (static_cast<Op>(r.Get<uint8_t>())) {
      case Op::kSetup: {
        const TensorParallelSetup s = DecodeSetup(r);
        tp = s.tensor_parallel;
        pp = s.pipeline_parallel;
        // Collective: a stage's ranks are contiguous (rank = stage x T + t).
        Collective* stage = group.Split(group.rank() / tp, group.rank() % tp);
        meter.SetStage(stage);
        auto started = StartShard(group, stage, s, model_path, threads);
        if (!started.ok()) spdlog::error("tensor parallel rank {}: {}", group.rank(), started.status().ToString());
        shard = started.ok() ? std::move(*started) : nullptr;
        if (CountNotReady(group, shard != nullptr) == 0) {
          block_sizes = ShareBlockBytes(group, shard->block_bytes());  // as rank 0 does once all are ready
        }
        if (shard != nullptr) {
          spdlog::info("tensor parallel rank {} of {}: shard loaded ({} KV blocks)", group.rank(), group.size(),
                       s.runner.num_blocks);
        }
        break;
      }
      case Op::kForward: {
        const uint32_t n = r.Get<uint32_t>();
        lists.resize(3 * static_cast<size_t>(n));
        batch.seqs.resize(n);
        for (uint32_t i = 0; i < n; ++i) {
          engine::ForwardSeq& s = batch.seqs[i];
          s.seq_id = r.Get<int64_t>();
          s.start_pos = r.Get<int32_t>();
          const auto flags = r.Get<uint8_t>();
          s.want_logits = (flags & 1) != 0;
          s.all_logits = (flags & 2) != 0;
          s.decode_rows = (flags & 4) != 0;
          for (int k = 0; k < 3; ++k) r.GetInts(lists[3 * i + k]);
          s.tokens = lists[3 * i];
          s.block_table = lists[3 * i + 1];
          s.window_block_table = lists[3 * i + 2];
        }
        const bool report = r.Get<uint8_t>() != 0;
        if (shard == nullptr) return FailedPrecondition("tensor parallel: a step arrived before a shard was loaded");
        // Rank 0 checked the same batch: a failure here is a bug, and the
        // group cannot go on without this rank's part.
        const auto t0 = std::chrono::steady_clock::now();
        const bool sends_logits = group.rank() / tp == pp - 1 && group.rank() % tp == 0;
        for (const auto& [first, last] : MicroBatches(batch, pp)) {
          part.seqs.assign(batch.seqs.begin() + static_cast<std::ptrdiff_t>(first),
                           batch.seqs.begin() + static_cast<std::ptrdiff_t>(last));
          logits.resize(sends_logits ? static_cast<size_t>(LogitRows(batch, first, last) * shard->vocab_size()) : 0);
          KVS_RETURN_IF_ERROR(shard->Forward(part, logits));
        }
        meter.AddForward(SecondsSince(t0));
        if (report) meter.Report(nullptr);
        break;
      }
      case Op::kRelease:
      case Op::kReleaseWindow: {
        const bool window = static_cast<Op>(msg[0]) == Op::kReleaseWindow;
        std::vector<int32_t> ids;
        r.GetInts(ids);
        if (shard != nullptr) window ? shard->ReleaseWindowBlocks(ids) : shard->ReleaseBlocks(ids);
        break;
      }
      case Op::kBlockBytes: {
        // Rank 0 offers the disk tier only when every rank exports blocks.
        const int32_t id = r.Get<int32_t>();
        if (shard == nullptr) return FailedPrecondition("tensor parallel: a block was asked for before a shard was loaded");
        const std::span<const uint8_t> bytes = shard->BlockBytes(id);
        send_buf.assign(FloatsFor(static_cast<int64_t>(bytes.size())), 0.0f);
        if (!bytes.empty()) std::memcpy(send_buf.data(), bytes.data(), bytes.size());
        group.Send(send_buf, 0, kBlockTag);
        break;
      }
      case Op::kLoadBlock: {
        const int32_t id = r.Get<int32_t>();
        const std::span<const uint8_t> whole = r.GetBytes();
        if (shard == nullptr) return FailedPrecondition("tensor parallel: a block was sent before a shard was loaded");
        const size_t at = BlockOffset(block_sizes, group.rank());
        const auto n = static_cast<size_t>(block_sizes[static_cast<size_t>(group.rank())]);
        if (at + n > whole.size() || !shard->LoadBlock(id, whole.subspan(at, n))) {
          return Internal("tensor parallel rank {}: block {} from rank 0 does not match this shard's layout",
                          group.rank(), id);
        }
        break;
      }
      case Op::kEnd:
        shard.reset();
        break;
      case Op::kShutdown:
        return Status::Ok();
      default:
        return Internal("tensor parallel: unknown message {} from rank 0", msg.empty() ? -1 : msg[0]);
    }
  }
}

void ParallelStatsBoard::Add(std::span<const float> deltas) {
  std::lock_guard<std::mutex> lock(mu_);
  constexpr size_t kF = kFields;
  for (size_t r = 0; r < ranks_.size() && kF * r + kF - 1 < deltas.size(); ++r) {
    ranks_[r].forward_seconds += deltas[kF * r];
    ranks_[r].allreduce_seconds += deltas[kF * r + 1];
    ranks_[r].allreduce_bytes += deltas[kF * r + 2];
    ranks_[r].steps += deltas[kF * r + 3];
    ranks_[r].pipeline_wait_seconds += deltas[kF * r + 4];
  }
}

model::LoadOptions ShardLoadOptions(const std::string& dtype, int tensor_parallel, int pipeline_parallel, int rank,
                                    int32_t n_layers) {
  model::LoadOptions lo = model::LoadOptions::ForDtype(dtype);
  lo.shard_rank = rank % tensor_parallel;
  lo.shard_count = tensor_parallel;
  if (pipeline_parallel > 1) {
    const model::LayerRange layers = model::StageLayers(n_layers, pipeline_parallel, rank / tensor_parallel);
    lo.first_layer = layers.first;
    lo.num_layers = layers.count;
  }
  return lo;
}

void ShutdownTensorParallelWorkers(Collective& group) {
  Writer w(Op::kShutdown);
  Send(group, w);
}

}  // namespace kvs::backend
