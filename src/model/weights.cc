#include "model/weights.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "base/thread_pool.h"

namespace kvs::model {
namespace {

std::string DimsString(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Rows [first, first + n) of a matrix, as a matrix of its own.
kernels::MatView RowRange(const kernels::MatView& m, int64_t first, int64_t n) {
  kernels::MatView v = m;
  v.data = static_cast<const uint8_t*>(m.data) + first * RowBytes(m.type, m.cols);
  v.rows = n;
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const gguf::GgufFile& f, const ModelConfig& c,
                                                          const LoadOptions& options) {
  auto w = std::make_unique<ModelWeights>();

  auto find = [&](const std::string& name, bool required) -> StatusOr<const gguf::TensorInfo*> {
    const gguf::TensorInfo* t = f.FindTensor(name);
    if (t == nullptr && required) return InvalidArgument("tensor {} is missing", name);
    return t;
  };
  // A matrix [rows, cols]: GGUF dims are [cols, rows].
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) -> StatusOr<kernels::MatView> {
    KVS_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name, true));
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      return InvalidArgument("tensor {} has shape {}, expected [{}, {}]", name, DimsString(t->dims), cols, rows);
    }
    if (!Traits(t->type).supported || !kernels::CanQuantize(t->type)) {
      return Unimplemented("tensor {} has type {}, which kvserve does not support "
                           "(supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
                           name, DTypeName(t->type));
    }
    w->total_bytes += t->nbytes;
    return kernels::MatView{t->type, t->data, rows, cols};
  };
  // A 3-D expert tensor [n, rows, cols] (GGUF dims [cols, rows, n]), one
  // matrix per expert; or, in files of the old Mixtral layout (converted
  // before 2024, which llama.cpp no longer loads), one 2-D tensor per
  // expert named `old_name` with the expert's number.
  auto experts = [&](const std::string& name, const std::string& old_name, int64_t n, int64_t rows, int64_t cols,
                     std::vector<kernels::MatView>& out) -> Status {
    if (f.FindTensor(name) == nullptr && f.FindTensor(fmt::format(fmt::runtime(old_name), 0)) != nullptr) {
      for (int64_t e = 0; e < n; ++e) {
        KVS_ASSIGN_OR_RETURN(kernels::MatView m, matrix(fmt::format(fmt::runtime(old_name), e), rows, cols));
        out.push_back(m);
      }
      return Status::Ok();
    }
    KVS_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name, true));
    if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != n) {
      return InvalidArgument("tensor {} has shape {}, expected [{}, {}, {}]", name, DimsString(t->dims), cols, rows,
                             n);
    }
    if (!Traits(t->type).supported || !kernels::CanQuantize(t->type)) {
      return Unimplemented("tensor {} has type {}, which kvserve does not support", name, DTypeName(t->type));
    }
    w->total_bytes += t->nbytes;
    const kernels::MatView all{t->type, t->data, n * rows, cols};
    for (int64_t e = 0; e < n; ++e) out.push_back(RowRange(all, e * rows, rows));
    return Status::Ok();
  };
  auto vec = [&](const std::string& name, int64_t n, bool required) -> StatusOr<const float*> {
    KVS_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, find(name, required));
    if (t == nullptr) return static_cast<const float*>(nullptr);
    if (t->NumElements() != n || t->dims[0] != n) {
      return InvalidArgument("tensor {} has shape {}, expected [{}]", name, DimsString(t->dims), n);
    }
    w->total_bytes += t->nbytes;
    if (t->type == DType::kF32) return reinterpret_cast<const float*>(t->data);
    if (t->type != DType::kF16 && t->type != DType::kBF16) {
      return Unimplemented("vector tensor {} has type {} (expected F32, F16 or BF16)", name, DTypeName(t->type));
    }
    std::vector<float>& out = w->owned_.emplace_back(static_cast<size_t>(n));
    kernels::DequantizeRow(t->type, t->data, out.data(), n);
    return static_cast<const float*>(out.data());
  };

  KVS_ASSIGN_OR_RETURN(w->token_embd, matrix("token_embd.weight", c.vocab, c.hidden));
  KVS_ASSIGN_OR_RETURN(w->output_norm, vec("output_norm.weight", c.hidden, true));
  if (c.tied_embeddings) {
    w->output = w->token_embd;
  } else {
    KVS_ASSIGN_OR_RETURN(w->output, matrix("output.weight", c.vocab, c.hidden));
  }
  KVS_ASSIGN_OR_RETURN(w->rope_freqs, vec("rope_freqs.weight", c.rope_dim / 2, false));
  KVS_ASSIGN_OR_RETURN(w->rope_long, vec("rope_factors_long.weight", c.rope_dim / 2, false));
  KVS_ASSIGN_OR_RETURN(w->rope_short, vec("rope_factors_short.weight", c.rope_dim / 2, false));
  if (c.longrope && (w->rope_long == nullptr || w->rope_short == nullptr)) {
    return InvalidArgument("LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight");
  }
  const int32_t first = options.first_layer;
  const int32_t end = options.num_layers < 0 ? c.n_layers : first + options.num_layers;
  if (first < 0 || end > c.n_layers || first >= end) {
    return InvalidArgument("layers [{}, {}) are not a range of the model's {} layers", first, end, c.n_layers);
  }
  w->layers.resize(static_cast<size_t>(end - first));
  for (int32_t i = first; i < end; ++i) {
    LayerWeights& L = w->layers[static_cast<size_t>(i - first)];
    const std::string p = fmt::format("blk.{}.", i);
    KVS_ASSIGN_OR_RETURN(L.attn_norm, vec(p + "attn_norm.weight", c.hidden, true));
    if (c.fused_qkv) {
      KVS_ASSIGN_OR_RETURN(kernels::MatView qkv, matrix(p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), c.hidden));
      L.wq = RowRange(qkv, 0, c.q_dim());
      L.wk = RowRange(qkv, c.q_dim(), c.kv_dim());
      L.wv = RowRange(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    } else {
      KVS_ASSIGN_OR_RETURN(L.wq, matrix(p + "attn_q.weight", c.q_dim(), c.hidden));
      KVS_ASSIGN_OR_RETURN(L.wk, matrix(p + "attn_k.weight", c.kv_dim(), c.hidden));
      KVS_ASSIGN_OR_RETURN(L.wv, matrix(p + "attn_v.weight", c.kv_dim(), c.hidden));
    }
    KVS_ASSIGN_OR_RETURN(L.wo, matrix(p + "attn_output.weight", c.hidden, c.q_dim()));
    if (c.qkv_bias) {
      KVS_ASSIGN_OR_RETURN(L.bq, vec(p + "attn_q.bias", c.q_dim(), true));
      KVS_ASSIGN_OR_RETURN(L.bk, vec(p + "attn_k.bias", c.kv_dim(), true));
      KVS_ASSIGN_OR_RETURN(L.bv, vec(p + "attn_v.bias", c.kv_dim(), true));
    }
    if (c.qk_norm) {
      KVS_ASSIGN_OR_RETURN(L.q_norm, vec(p + "attn_q_norm.weight", c.head_dim, true));
      KVS_ASSIGN_OR_RETURN(L.k_norm, vec(p + "attn_k_norm.weight", c.head_dim, true));
    }
    KVS_ASSIGN_OR_RETURN(L.ffn_norm, vec(p + "ffn_norm.weight", c.hidden, true));
    if (c.post_norms) {
      KVS_ASSIGN_OR_RETURN(L.attn_post_norm, vec(p + "post_attention_norm.weight", c.hidden, true));
      KVS_ASSIGN_OR_RETURN(L.ffn_post_norm, vec(p + "post_ffw_norm.weight", c.hidden, true));
    }
    if (c.is_moe()) {
      MoeWeights& M = L.moe;
      KVS_ASSIGN_OR_RETURN(M.router, matrix(p + "ffn_gate_inp.weight", c.n_experts, c.hidden));
      KVS_RETURN_IF_ERROR(
          experts(p + "ffn_gate_exps.weight", p + "ffn_gate.{}.weight", c.n_experts, c.expert_ffn, c.hidden, M.gate));
      KVS_RETURN_IF_ERROR(
          experts(p + "ffn_up_exps.weight", p + "ffn_up.{}.weight", c.n_experts, c.expert_ffn, c.hidden, M.up));
      KVS_RETURN_IF_ERROR(
          experts(p + "ffn_down_exps.weight", p + "ffn_down.{}.weight", c.n_experts, c.hidden, c.expert_ffn, M.down));
      if (c.shared_ffn > 0) {
        KVS_ASSIGN_OR_RETURN(M.shared_gate, vec(p + "ffn_gate_inp_shexp.weight", c.hidden, true));
        KVS_ASSIGN_OR_RETURN(M.shared_gate_mat, matrix(p + "ffn_gate_shexp.weight", c.shared_ffn, c.hidden));
        KVS_ASSIGN_OR_RETURN(M.shared_up, matrix(p + "ffn_up_shexp.weight", c.shared_ffn, c.hidden));
        KVS_ASSIGN_OR_RETURN(M.shared_down, matrix(p + "ffn_down_shexp.weight", c.hidden, c.shared_ffn));
      }
    } else if (c.fused_gate_up) {
      KVS_ASSIGN_OR_RETURN(kernels::MatView gate_up, matrix(p + "ffn_up.weight", 2 * c.ffn, c.hidden));
      L.w_gate = RowRange(gate_up, 0, c.ffn);
      L.w_up = RowRange(gate_up, c.ffn, c.ffn);
    } else {
      KVS_ASSIGN_OR_RETURN(L.w_gate, matrix(p + "ffn_gate.weight", c.ffn, c.hidden));
      KVS_ASSIGN_OR_RETURN(L.w_up, matrix(p + "ffn_up.weight", c.ffn, c.hidden));
    }
    if (!c.is_moe()) {
      KVS_ASSIGN_OR_RETURN(L.w_down, matrix(p + "ffn_down.weight", c.hidden, c.ffn));
    }
  }
  // A pipeline stage before the last never computes logits; one after the
  // first never embeds (its lookups would read the file, not count).
  const bool tied = w->output.data == w->token_embd.data;
  w->output_tied_ = tied;
  if (end < c.n_layers) {
    w->output_unused_ = true;
    if (!tied) w->total_bytes -= static_cast<uint64_t>(RowBytes(w->output.type, w->output.cols) * w->output.rows);
  }
  if (first > 0 && !(tied && end == c.n_layers)) {
    w->total_bytes -= static_cast<uint64_t>(RowBytes(w->token_embd.type, w->token_embd.cols) * w->token_embd.rows);
  }
  if (options.shard_count > 1) KVS_RETURN_IF_ERROR(w->Shard(c, options.shard_rank, options.shard_count));
  w->PlaceFloatMatrices(f, options);
  w->PackMatrices(f);
  return w;
}

Status ModelWeights::Shard(const ModelConfig& c, int rank, int count) {
  KVS_RETURN_IF_ERROR(c.CheckTensorParallel(count));
  if (rank < 0 || rank >= count) return InvalidArgument("shard {} of {} does not exist", rank, count);
  const int64_t qd = c.q_dim() / count, ff = c.ffn / count;
  // This rank's KV heads: a share, or one replicated head (rows start at
  // kv0, not rank * kd, when more ranks than KV heads).
  const int64_t kd = int64_t{c.ShardKvHeads(count)} * c.head_dim;
  const int64_t kv0 = int64_t{c.ShardKvHead(rank, count)} * c.head_dim;
  uint64_t dropped = 0;  // bytes of the other shards' parts
  auto rows = [&](kernels::MatView& m, int64_t n, int64_t first) {
    dropped += static_cast<uint64_t>(RowBytes(m.type, m.cols) * (m.rows - n));
    m = RowRange(m, first, n);
  };
  // Columns [rank * n, (rank + 1) * n) of every row, copied: quantized
  // blocks are never split, so n must be a whole number of them.
  auto columns = [&](kernels::MatView& m, int64_t n, const char* name, int32_t layer) -> Status {
    const int64_t block = Traits(m.type).block_size;
    if (n % block != 0) {
      return InvalidArgument(
          "tensor parallel {}: blk.{}.{} ({}) would be split inside its {}-element blocks ({} columns per rank); "
          "use a tensor_parallel that gives each rank a multiple of {} columns",
          count, layer, name, DTypeName(m.type), block, n, block);
    }
    const int64_t row_in = RowBytes(m.type, m.cols), row_out = RowBytes(m.type, n), skip = RowBytes(m.type, rank * n);
    std::unique_ptr<uint8_t[]>& out = slices_.emplace_back(new uint8_t[static_cast<size_t>(row_out * m.rows)]);
    const auto* in = static_cast<const uint8_t*>(m.data);
    for (int64_t r = 0; r < m.rows; ++r) {
      std::memcpy(out.get() + r * row_out, in + r * row_in + skip, static_cast<size_t>(row_out));
    }
    dropped += static_cast<uint64_t>((row_in - row_out) * m.rows);
    m.data = out.get();
    m.cols = n;
    return Status::Ok();
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerWeights& L = layers[i];
    const auto layer = static_cast<int32_t>(i);
    rows(L.wq, qd, rank * qd);
    rows(L.wk, kd, kv0);
    rows(L.wv, kd, kv0);
    KVS_RETURN_IF_ERROR(columns(L.wo, qd, "attn_output", layer));
    if (L.bq != nullptr) {
      L.bq += rank * qd;
      L.bk += kv0;
      L.bv += kv0;
    }
    rows(L.w_gate, ff, rank * ff);
    rows(L.w_up, ff, rank * ff);
    KVS_RETURN_IF_ERROR(columns(L.w_down, ff, "ffn_down", layer));
  }
  // Vocab-parallel head: each rank computes the logits of its rows of the
  // vocabulary (its share of the head's bytes and FLOPs); the stage's rank 0
  // gathers them (LlamaModel::Forward). Tied: the rows are a view into the
  // embeddings, which every rank keeps whole for its lookups.
  if (!output_unused_) {
    const ModelConfig::Rows v = c.ShardVocab(rank, count);
    if (!output_tied_) dropped += static_cast<uint64_t>(RowBytes(output.type, output.cols) * (output.rows - v.count));
    output = RowRange(output, v.first, v.count);
  }
  total_bytes -= dropped;
  return Status::Ok();
}

namespace {

int64_t Padded64(int64_t n) { return (n + 63) / 64 * 64; }

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// Drops the whole pages inside [data, data + bytes) of a mapped file: clean
// private file pages, so dropping them loses nothing (a later read, e.g. a
// scalar path, maps them in again).
void DropPages(const gguf::GgufFile& f, const void* data, int64_t bytes) {
  if (!f.mapped()) return;
  // Only the file's own pages (a shard's column slices are copies on the heap).
  const std::span<const uint8_t> file = f.bytes();
  const auto* p = static_cast<const uint8_t*>(data);
  if (p < file.data() || p + bytes > file.data() + file.size()) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t lo = (begin + page - 1) / page * page;
  const uintptr_t hi = (begin + static_cast<uintptr_t>(bytes)) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

// One row of a stored float matrix as BF16, through `scratch` (cols floats):
// rows and panels round the same way.
void RowToBf16(DType t, const uint8_t* in, int64_t cols, std::vector<float>& scratch, void* out) {
  kernels::DequantizeRow(t, in, scratch.data(), cols);
  kernels::ConvertRowFromF32(DType::kBF16, scratch.data(), out, cols);
}

}  // namespace

std::vector<std::pair<kernels::MatView*, bool>> ModelWeights::Matrices() {
  // A tied output layer shares token_embd's rows, which embedding lookups
  // keep reading a few at a time: its pages stay.
  std::vector<std::pair<kernels::MatView*, bool>> todo;
  for (LayerWeights& L : layers) {
    for (kernels::MatView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      if (m->rows > 0) todo.emplace_back(m, true);
    }
    MoeWeights& M = L.moe;
    for (kernels::MatView* m : {&M.router, &M.shared_gate_mat, &M.shared_up, &M.shared_down}) {
      if (m->rows > 0) todo.emplace_back(m, true);
    }
    for (std::vector<kernels::MatView>* v : {&M.gate, &M.up, &M.down}) {
      for (kernels::MatView& m : *v) todo.emplace_back(&m, true);
    }
  }
  if (!output_unused_) todo.emplace_back(&output, !output_tied_);
  return todo;
}

LoadOptions LoadOptions::ForDtype(const std::string& dtype) {
  LoadOptions o;
  o.f32_matrices_as_bf16 = dtype == "bf16";
  o.f16_matrices_as_bf16 = dtype == "bf16" || (dtype == "auto" && kernels::NativeBf16Dot());
  return o;
}

// Why float matrices kept as stored are copied too: the GEMMs read a weight
// panel as 16 rows at a time, a few hundred bytes of each, and every row of
// a 2-16 KiB-row matrix sits on its own 4 KiB page of the file mapping, so
// each panel cost 16 TLB misses. From huge pages, forced-AVX2 M-F16 pp512
// (kvserve bench, 2 threads, 4 interleaved pairs): 86-89 -> 93-95 t/s (one
// outlier pair), the panel packing's share of the profile 4.7 -> 2.4 %.
// The file pages are dropped afterwards, so resident memory does not grow.
void ModelWeights::PlaceFloatMatrices(const gguf::GgufFile& f, const LoadOptions& options) {
  struct Todo {
    kernels::MatView* m;
    bool convert;    // to BF16; else copied as stored
    int64_t panels;  // bytes of its BF16 panels (kernels::PackedBf16Bytes), or 0: rows
  };
  std::vector<Todo> todo;
  int64_t total = 0;
  for (const auto& [m, release] : Matrices()) {
    // A tied output stays as token_embd is (a copy would cost its bytes again).
    if (!release || !IsFloat(m->type)) continue;
    const bool convert = (m->type == DType::kF32 && options.f32_matrices_as_bf16) ||
                         (m->type == DType::kF16 && options.f16_matrices_as_bf16);
    const int64_t panels = convert || m->type == DType::kBF16 ? kernels::PackedBf16Bytes(m->rows, m->cols) : 0;
    if (!convert && panels == 0 && !f.mapped()) continue;  // already in memory of its own
    todo.push_back({m, convert, panels});
    total += Padded64(panels > 0 ? panels : convert ? m->rows * m->cols * 2 : RowBytes(m->type, m->cols) * m->rows);
  }
  if (total == 0) return;
  floats_ = HugeBuffer(static_cast<size_t>(total));
  ThreadPool pool(0);  // load time only: every core converts or copies
  uint8_t* next = floats_.data();
  for (const Todo& t : todo) {
    // Plain locals, not structured bindings: clang before 16 (the ASan build
    // uses clang 14) cannot capture a structured binding in a lambda.
    kernels::MatView* const m = t.m;
    const bool convert = t.convert;
    const int64_t row_in = RowBytes(m->type, m->cols), row_out = convert ? m->cols * 2 : row_in;
    const auto* src = static_cast<const uint8_t*>(m->data);
    if (t.panels > 0) {
      // BF16 panels in place of rows (the avx512bf16 kernels' layout): the
      // tile no longer packs them on every call.
      const int64_t rows_per = 16, panel_bytes = t.panels / ((m->rows + rows_per - 1) / rows_per);
      pool.ParallelFor((m->rows + rows_per - 1) / rows_per, [&](int64_t q0, int64_t q1) {
        std::vector<float> row(convert ? static_cast<size_t>(m->cols) : 0);
        std::vector<uint16_t> bf16(convert ? static_cast<size_t>(rows_per * m->cols) : 0);
        const uint16_t* rows[16];
        for (int64_t q = q0; q < q1; ++q) {
          const int valid = static_cast<int>(std::min(rows_per, m->rows - q * rows_per));
          for (int r = 0; r < valid; ++r) {
            const uint8_t* in = src + (q * rows_per + r) * row_in;
            if (convert) {
              RowToBf16(m->type, in, m->cols, row, bf16.data() + r * m->cols);
              rows[r] = bf16.data() + r * m->cols;
            } else {
              rows[r] = reinterpret_cast<const uint16_t*>(in);
            }
          }
          kernels::PackBf16Panel(rows, valid, m->cols, next + q * panel_bytes);
        }
      });
      DropPages(f, m->data, row_in * m->rows);
      // The bytes of the matrix as BF16 rows (the panels add at most one
      // panel's padding of rows and 31 columns).
      if (convert) {
        bf16_bytes += static_cast<uint64_t>(row_out * m->rows);
        m->type = DType::kBF16;
        m->data = nullptr;  // no BF16 rows exist; only kernels that read panels may use it
      } else {
        float_copy_bytes += static_cast<uint64_t>(row_out * m->rows);
      }
      m->packed = next;
      next += Padded64(t.panels);
      continue;
    }
    pool.ParallelFor(m->rows, [&](int64_t r0, int64_t r1) {
      if (!convert) {
        std::memcpy(next + r0 * row_out, src + r0 * row_in, static_cast<size_t>((r1 - r0) * row_in));
        return;
      }
      std::vector<float> row(static_cast<size_t>(m->cols));
      for (int64_t r = r0; r < r1; ++r) RowToBf16(m->type, src + r * row_in, m->cols, row, next + r * row_out);
    });
    DropPages(f, m->data, row_in * m->rows);
    if (convert) {
      m->type = DType::kBF16;
      bf16_bytes += static_cast<uint64_t>(row_out * m->rows);
    } else {
      float_copy_bytes += static_cast<uint64_t>(row_out * m->rows);
    }
    m->data = next;
    next += Padded64(row_out * m->rows);
  }
}

void ModelWeights::PackMatrices(const gguf::GgufFile& f) {
  const std::vector<std::pair<kernels::MatView*, bool>> todo = Matrices();
  // One huge-page region for all panels (base/huge_buffer.h says why), each
  // panel 64-byte aligned inside it.
  int64_t total = 0;
  for (const auto& [m, release] : todo) total += Padded64(kernels::PackedBytes(m->type, m->rows, m->cols));
  if (total == 0) return;
  packed_ = HugeBuffer(static_cast<size_t>(total));

  ThreadPool pool(0);  // load time only: every core packs
  uint8_t* next = packed_.data();
  for (const auto& [m, release] : todo) {
    const int64_t n = kernels::PackedBytes(m->type, m->rows, m->cols);
    if (n == 0) continue;
    kernels::PackWeights(*m, next, pool);
    m->packed = next;
    next += Padded64(n);
    packed_bytes += static_cast<uint64_t>(n);
    if (release) DropPages(f, m->data, RowBytes(m->type, m->cols) * m->rows);
  }
}

}  // namespace kvs::model
