// Packing of weight rows into the interleaved panels of packed.h, and the
// public PackedBytes / PackWeights. Portable code: it runs once per matrix at
// load (and per panel for matrices nobody packed, amortized over a batch).
#include "kernels/packed.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "base/status.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/quant_formats.h"

namespace kvs::kernels {
namespace {

constexpr int64_t kChunk = kChunkBytes;

// dst chunk <- for each row r < valid, the 4 bytes at rows + r*row_bytes + off
// (XOR `flip` on every byte); zero for the other rows.
inline void GatherChunk(const uint8_t* rows, int64_t row_bytes, int valid, int64_t off, uint8_t flip,
                        uint8_t* dst) {
  for (int r = 0; r < valid; ++r) {
    const uint8_t* s = rows + r * row_bytes + off;
    for (int i = 0; i < 4; ++i) dst[4 * r + i] = static_cast<uint8_t>(s[i] ^ flip);
  }
  std::memset(dst + 4 * valid, 0, static_cast<size_t>(4 * (kPanelRows - valid)));
}

inline void ScatterChunk(const uint8_t* src, int r, int64_t off, uint8_t flip, uint8_t* row) {
  for (int i = 0; i < 4; ++i) row[off + i] = static_cast<uint8_t>(src[4 * r + i] ^ flip);
}

// The f16 at byte `off` of each row -> 16 f16 in row order (0 past valid).
inline void GatherHalves(const uint8_t* rows, int64_t row_bytes, int valid, int64_t off, uint8_t* dst) {
  for (int r = 0; r < valid; ++r) std::memcpy(dst + 2 * r, rows + r * row_bytes + off, 2);
  std::memset(dst + 2 * valid, 0, static_cast<size_t>(2 * (kPanelRows - valid)));
}

}  // namespace

bool HasPackedLayout(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL:
    case DType::kQ5_0:
    case DType::kIQ4_XS:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: return true;
    default: return false;
  }
}

// Chunks per Q4_K / Q5_K super-block.
constexpr int64_t kK4Chunks = kQ4KUnitBytes / kChunk, kK5Chunks = kQ5KUnitBytes / kChunk;

namespace {

// Where the fields of a Q8_0 / Q4_0 / Q4_1 / IQ4_NL / Q5_0 row lie, and
// where a panel puts them: `unit` chunks per block, of which the first
// `chunks` hold quants (block b's chunk c at panel chunk b * unit + c, XOR
// `flip`: Q8_0 stores offset binary) and Q5_0's last its 5th bits; then the
// blocks' scales, 16 f16 per block, at `scales`, then for Q4_1 the offsets
// likewise at `mins`. PackPanel and UnpackPanelRow share it so that the two
// stay inverse.
struct Q0Layout {
  Q0Layout(DType t, int64_t cols)
      : q8(t == DType::kQ8_0),
        q41(t == DType::kQ4_1),
        q5(t == DType::kQ5_0),
        nblk(cols / kQK0),
        bs(static_cast<int64_t>(q8 ? sizeof(BlockQ8_0) : q41 ? sizeof(BlockQ4_1) : q5 ? sizeof(BlockQ5_0) : sizeof(BlockQ4_0))),
        qs_off(q41 ? 4 : q5 ? 6 : 2),
        chunks(q8 ? 8 : 4),
        unit(static_cast<int>(PanelUnitBytes(t) / kChunk)),
        flip(static_cast<uint8_t>(q8 ? 0x80 : 0)),
        scales(nblk * unit * kChunk),
        mins(scales + 32 * nblk),
        end(mins + (q41 ? 32 * nblk : 0)) {}
  bool q8, q41, q5;
  int64_t nblk;    // blocks per row
  int64_t bs;      // bytes per block in a row
  int64_t qs_off;  // offset of the quants in a block
  int chunks;      // quant chunks per block
  int unit;        // panel chunks per block
  uint8_t flip;    // XOR on the quant bytes
  int64_t scales;  // panel offset of the scales
  int64_t mins;    // panel offset of Q4_1's offsets
  int64_t end;     // bytes used; the panel's rest is zero
};

// Q5_0's 5th bits (qh, bit j for element j) as a panel row's 4 bytes: byte
// i, bit 2c: element 4c + i; bit 2c + 1: element 16 + 4c + i.
inline uint32_t Q5HighToPanel(uint32_t qh) {
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 4; ++c) {
      out |= ((qh >> (4 * c + i)) & 1u) << (8 * i + 2 * c);
      out |= ((qh >> (16 + 4 * c + i)) & 1u) << (8 * i + 2 * c + 1);
    }
  }
  return out;
}
inline uint32_t Q5HighFromPanel(uint32_t v) {
  uint32_t qh = 0;
  for (int i = 0; i < 4; ++i) {
    for (int c = 0; c < 4; ++c) {
      qh |= ((v >> (8 * i + 2 * c)) & 1u) << (4 * c + i);
      qh |= ((v >> (8 * i + 2 * c + 1)) & 1u) << (16 + 4 * c + i);
    }
  }
  return qh;
}

// IQ4_XS: a row's sub-block scale s (6 bits) of super-block `blk`.
inline int IQ4XSScale(const BlockIQ4_XS& blk, int s) {
  return ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((blk.scales_h >> (2 * s)) & 3) << 4);
}

// The same for a Q4_K / Q5_K row: super-block sb at panel offset
// sb * sb_bytes; its quants at qs_off in the row's block.
struct K45Layout {
  explicit K45Layout(DType t)
      : q5(t == DType::kQ5_K),
        bs(q5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K)),
        qs_off(q5 ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs)),
        sb_bytes((q5 ? kK5Chunks : kK4Chunks) * kChunk) {}
  bool q5;
  int64_t bs;
  int64_t qs_off;
  int64_t sb_bytes;
};

}  // namespace

int64_t PanelBytes(DType t, int64_t cols) {
  switch (t) {
    case DType::kBF16: return Bf16PanelBytes(cols);
    case DType::kIQ4_XS: return RoundUp64(cols / kQKK * (kIQ4XSUnitBytes + 32));
    case DType::kQ3_K: return RoundUp64(cols / kQKK * (kQ3KUnitBytes + 32));
    case DType::kQ2_K: return cols / kQKK * kQ2KUnitBytes;
    case DType::kQ4_K: return cols / kQKK * kK4Chunks * kChunk;
    case DType::kQ5_K: return cols / kQKK * kK5Chunks * kChunk;
    default: return RoundUp64(kPanelRows * RowBytes(t, cols));
  }
}

void PackPanel(DType t, const uint8_t* rows, int64_t row_bytes, int valid, int64_t cols, uint8_t* panel) {
  KVS_CHECK(valid >= 1 && valid <= kPanelRows);
  const int64_t pb = PanelBytes(t, cols);
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL:
    case DType::kQ5_0: {
      const Q0Layout q(t, cols);
      for (int64_t b = 0; b < q.nblk; ++b) {
        for (int c = 0; c < q.chunks; ++c) {
          GatherChunk(rows, row_bytes, valid, b * q.bs + q.qs_off + 4 * c, q.flip,
                      panel + (b * q.unit + c) * kChunk);
        }
        if (q.q5) {
          uint8_t* hc = panel + (b * q.unit + 4) * kChunk;
          std::memset(hc, 0, kChunk);
          for (int r = 0; r < valid; ++r) {
            uint32_t qh;
            std::memcpy(&qh, rows + r * row_bytes + b * q.bs + 2, 4);
            const uint32_t v = Q5HighToPanel(qh);
            std::memcpy(hc + 4 * r, &v, 4);
          }
        }
        GatherHalves(rows, row_bytes, valid, b * q.bs, panel + q.scales + 32 * b);
        if (q.q41) GatherHalves(rows, row_bytes, valid, b * q.bs + 2, panel + q.mins + 32 * b);
      }
      std::memset(panel + q.end, 0, static_cast<size_t>(pb - q.end));
      return;
    }
    case DType::kQ3_K: {
      const int64_t nsb = cols / kQKK;
      uint8_t* d = panel + nsb * kQ3KUnitBytes;
      std::memset(panel, 0, static_cast<size_t>(pb));
      for (int64_t sb = 0; sb < nsb; ++sb) {
        uint8_t* out = panel + sb * kQ3KUnitBytes;
        const int64_t base = sb * static_cast<int64_t>(sizeof(BlockQ3_K));
        for (int c = 0; c < 16; ++c) {
          GatherChunk(rows, row_bytes, valid, base + offsetof(BlockQ3_K, qs) + 4 * c, 0, out + c * kChunk);
        }
        for (int c = 0; c < 8; ++c) {
          GatherChunk(rows, row_bytes, valid, base + offsetof(BlockQ3_K, hmask) + 4 * c, 0,
                      out + kQ3KHighOff + c * kChunk);
        }
        for (int r = 0; r < kPanelRows; ++r) {
          const uint8_t* scales = rows + r * row_bytes + base + offsetof(BlockQ3_K, scales);
          for (int g = 0; g < 16; ++g) {
            const int sc = r < valid ? GetScaleQ3K(g, scales) : 0;
            out[kQ3KScalesOff + 16 * g + r] = static_cast<uint8_t>(static_cast<int8_t>(sc - 32));
          }
        }
        GatherHalves(rows, row_bytes, valid, base + offsetof(BlockQ3_K, d), d + 32 * sb);
      }
      return;
    }
    case DType::kQ2_K: {
      for (int64_t sb = 0; sb < cols / kQKK; ++sb) {
        uint8_t* out = panel + sb * kQ2KUnitBytes;
        const int64_t base = sb * static_cast<int64_t>(sizeof(BlockQ2_K));
        GatherChunk(rows, row_bytes, valid, base + offsetof(BlockQ2_K, d), 0, out);  // d, dmin
        for (int c = 0; c < 16; ++c) {
          GatherChunk(rows, row_bytes, valid, base + offsetof(BlockQ2_K, qs) + 4 * c, 0,
                      out + kQ2KCodesOff + c * kChunk);
        }
        std::memset(out + kQ2KScalesOff, 0, 4 * kChunk);
        for (int r = 0; r < valid; ++r) {
          for (int g = 0; g < 16; ++g) {
            out[kQ2KScalesOff + 16 * g + r] = rows[r * row_bytes + base + offsetof(BlockQ2_K, scales) + g];
          }
        }
      }
      return;
    }
    case DType::kIQ4_XS: {
      const int64_t nsb = cols / kQKK;
      uint8_t* d = panel + nsb * kIQ4XSUnitBytes;
      std::memset(panel, 0, static_cast<size_t>(pb));
      for (int64_t sb = 0; sb < nsb; ++sb) {
        uint8_t* out = panel + sb * kIQ4XSUnitBytes;
        const int64_t base = sb * static_cast<int64_t>(sizeof(BlockIQ4_XS));
        for (int j = 0; j < 8; ++j) {
          for (int c = 0; c < 4; ++c) {
            GatherChunk(rows, row_bytes, valid, base + offsetof(BlockIQ4_XS, qs) + 16 * j + 4 * c, 0,
                        out + (4 * j + c) * kChunk);
          }
        }
        for (int r = 0; r < kPanelRows; ++r) {
          BlockIQ4_XS blk{};
          if (r < valid) std::memcpy(&blk, rows + r * row_bytes + base, sizeof(blk));
          for (int j = 0; j < 8; ++j) {
            out[kIQ4XSScalesOff + 16 * j + r] = static_cast<uint8_t>(static_cast<int8_t>(IQ4XSScale(blk, j) - 32));
          }
        }
        GatherHalves(rows, row_bytes, valid, base, d + 32 * sb);
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const K45Layout k(t);
      std::memset(panel, 0, static_cast<size_t>(pb));
      for (int64_t sb = 0; sb < cols / kQKK; ++sb) {
        uint8_t* out = panel + sb * k.sb_bytes;
        const int64_t base = sb * k.bs;
        GatherChunk(rows, row_bytes, valid, base, 0, out);  // d, dmin
        for (int r = 0; r < valid; ++r) {
          const uint8_t* scales = rows + r * row_bytes + base + 4;
          for (int s = 0; s < 8; ++s) GetScaleMinK4(s, scales, &out[64 + 16 * s + r], &out[192 + 16 * s + r]);
        }
        for (int g = 0; g < 4; ++g) {
          for (int c = 0; c < 8; ++c) {
            GatherChunk(rows, row_bytes, valid, base + k.qs_off + 32 * g + 4 * c, 0, out + (5 + 8 * g + c) * kChunk);
          }
        }
        if (k.q5) {
          for (int c = 0; c < 8; ++c) {
            GatherChunk(rows, row_bytes, valid, base + offsetof(BlockQ5_K, qh) + 4 * c, 0,
                        out + (kK4Chunks + c) * kChunk);
          }
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const int64_t nsb = cols / kQKK;
      constexpr int64_t kSb = 52 * kChunk;
      uint8_t* d = panel + nsb * kSb;
      std::memset(panel, 0, static_cast<size_t>(pb));
      for (int64_t sb = 0; sb < nsb; ++sb) {
        uint8_t* out = panel + sb * kSb;
        for (int r = 0; r < valid; ++r) {
          const auto* blk = reinterpret_cast<const BlockQ6_K*>(rows + r * row_bytes) + sb;
          for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 32; ++l) {
              int e[4];
              for (int k = 0; k < 4; ++k) {
                const int lo = ((k & 1 ? blk->ql[64 * h + 32 + l] : blk->ql[64 * h + l]) >> (k & 2 ? 4 : 0)) & 0xF;
                e[k] = lo | (((blk->qh[32 * h + l] >> (2 * k)) & 3) << 4);
              }
              const int c = l / 4, i = l % 4;
              for (int j = 0; j < 3; ++j) {
                out[(24 * h + 3 * c + j) * kChunk + 4 * r + i] =
                    static_cast<uint8_t>(e[j] | (((e[3] >> (4 - 2 * j)) & 3) << 6));
              }
            }
          }
          for (int g = 0; g < 16; ++g) out[48 * kChunk + 16 * g + r] = static_cast<uint8_t>(blk->scales[g]);
          std::memcpy(d + 32 * sb + 2 * r, &blk->d, 2);
        }
      }
      return;
    }
    default: KVS_CHECK_MSG(false, "PackPanel: {} has no packed layout", DTypeName(t));
  }
}

void UnpackPanelRow(DType t, const uint8_t* panel, int r, int64_t cols, uint8_t* row) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL:
    case DType::kQ5_0: {
      const Q0Layout q(t, cols);
      for (int64_t b = 0; b < q.nblk; ++b) {
        for (int c = 0; c < q.chunks; ++c) {
          ScatterChunk(panel + (b * q.unit + c) * kChunk, r, b * q.bs + q.qs_off + 4 * c, q.flip, row);
        }
        if (q.q5) {
          uint32_t v;
          std::memcpy(&v, panel + (b * q.unit + 4) * kChunk + 4 * r, 4);
          const uint32_t qh = Q5HighFromPanel(v);
          std::memcpy(row + b * q.bs + 2, &qh, 4);
        }
        std::memcpy(row + b * q.bs, panel + q.scales + 32 * b + 2 * r, 2);
        if (q.q41) std::memcpy(row + b * q.bs + 2, panel + q.mins + 32 * b + 2 * r, 2);
      }
      return;
    }
    case DType::kQ3_K: {
      const int64_t nsb = cols / kQKK;
      const uint8_t* d = panel + nsb * kQ3KUnitBytes;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* in = panel + sb * kQ3KUnitBytes;
        BlockQ3_K blk{};
        auto* b = reinterpret_cast<uint8_t*>(&blk);
        for (int c = 0; c < 16; ++c) ScatterChunk(in + c * kChunk, r, offsetof(BlockQ3_K, qs) + 4 * c, 0, b);
        for (int c = 0; c < 8; ++c) {
          ScatterChunk(in + kQ3KHighOff + c * kChunk, r, offsetof(BlockQ3_K, hmask) + 4 * c, 0, b);
        }
        for (int g = 0; g < 16; ++g) {  // the inverse of GetScaleQ3K
          const int sc = static_cast<int8_t>(in[kQ3KScalesOff + 16 * g + r]) + 32;
          blk.scales[g % 8] = static_cast<uint8_t>(blk.scales[g % 8] | ((sc & 0xF) << (g < 8 ? 0 : 4)));
          blk.scales[8 + g % 4] = static_cast<uint8_t>(blk.scales[8 + g % 4] | ((sc >> 4) << (2 * (g / 4))));
        }
        std::memcpy(&blk.d, d + 32 * sb + 2 * r, 2);
        std::memcpy(row + sb * static_cast<int64_t>(sizeof(BlockQ3_K)), &blk, sizeof(blk));
      }
      return;
    }
    case DType::kQ2_K: {
      for (int64_t sb = 0; sb < cols / kQKK; ++sb) {
        const uint8_t* in = panel + sb * kQ2KUnitBytes;
        const int64_t base = sb * static_cast<int64_t>(sizeof(BlockQ2_K));
        ScatterChunk(in, r, base + offsetof(BlockQ2_K, d), 0, row);
        for (int c = 0; c < 16; ++c) {
          ScatterChunk(in + kQ2KCodesOff + c * kChunk, r, base + offsetof(BlockQ2_K, qs) + 4 * c, 0, row);
        }
        for (int g = 0; g < 16; ++g) row[base + offsetof(BlockQ2_K, scales) + g] = in[kQ2KScalesOff + 16 * g + r];
      }
      return;
    }
    case DType::kIQ4_XS: {
      const int64_t nsb = cols / kQKK;
      const uint8_t* d = panel + nsb * kIQ4XSUnitBytes;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* in = panel + sb * kIQ4XSUnitBytes;
        BlockIQ4_XS blk{};
        for (int j = 0; j < 8; ++j) {
          for (int c = 0; c < 4; ++c) {
            ScatterChunk(in + (4 * j + c) * kChunk, r, offsetof(BlockIQ4_XS, qs) + 16 * j + 4 * c, 0,
                         reinterpret_cast<uint8_t*>(&blk));
          }
          const int ls = static_cast<int8_t>(in[kIQ4XSScalesOff + 16 * j + r]) + 32;
          blk.scales_l[j / 2] = static_cast<uint8_t>(blk.scales_l[j / 2] | ((ls & 0xF) << (4 * (j % 2))));
          blk.scales_h = static_cast<uint16_t>(blk.scales_h | ((ls >> 4) << (2 * j)));
        }
        std::memcpy(&blk.d, d + 32 * sb + 2 * r, 2);
        std::memcpy(row + sb * static_cast<int64_t>(sizeof(BlockIQ4_XS)), &blk, sizeof(blk));
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const K45Layout k(t);
      for (int64_t sb = 0; sb < cols / kQKK; ++sb) {
        const uint8_t* in = panel + sb * k.sb_bytes;
        const int64_t base = sb * k.bs;
        ScatterChunk(in, r, base, 0, row);
        uint8_t* scales = row + base + 4;  // repack the 6-bit fields as GGUF does
        std::memset(scales, 0, 12);
        for (int s = 0; s < 8; ++s) {
          const uint8_t ls = in[64 + 16 * s + r], lm = in[192 + 16 * s + r];
          if (s < 4) {
            scales[s] = static_cast<uint8_t>(scales[s] | ls);
            scales[s + 4] = static_cast<uint8_t>(scales[s + 4] | lm);
          } else {
            scales[s + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            scales[s - 4] = static_cast<uint8_t>(scales[s - 4] | ((ls >> 4) << 6));
            scales[s] = static_cast<uint8_t>(scales[s] | ((lm >> 4) << 6));
          }
        }
        for (int g = 0; g < 4; ++g) {
          for (int c = 0; c < 8; ++c) ScatterChunk(in + (5 + 8 * g + c) * kChunk, r, base + k.qs_off + 32 * g + 4 * c, 0, row);
        }
        if (k.q5) {
          for (int c = 0; c < 8; ++c) ScatterChunk(in + (kK4Chunks + c) * kChunk, r, base + offsetof(BlockQ5_K, qh) + 4 * c, 0, row);
        }
      }
      return;
    }
    case DType::kQ6_K: {
      const int64_t nsb = cols / kQKK;
      constexpr int64_t kSb = 52 * kChunk;
      const uint8_t* d = panel + nsb * kSb;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* in = panel + sb * kSb;
        BlockQ6_K blk;
        std::memset(&blk, 0, sizeof(blk));
        for (int h = 0; h < 2; ++h) {
          for (int l = 0; l < 32; ++l) {
            const int c = l / 4, i = l % 4;
            int x[3], e[4];
            for (int j = 0; j < 3; ++j) x[j] = in[(24 * h + 3 * c + j) * kChunk + 4 * r + i];
            for (int j = 0; j < 3; ++j) e[j] = x[j] & 63;
            e[3] = ((x[0] >> 6) << 4) | ((x[1] >> 6) << 2) | (x[2] >> 6);
            for (int k = 0; k < 4; ++k) {
              uint8_t& q = k & 1 ? blk.ql[64 * h + 32 + l] : blk.ql[64 * h + l];
              q = static_cast<uint8_t>(q | ((e[k] & 0xF) << (k & 2 ? 4 : 0)));
              blk.qh[32 * h + l] = static_cast<uint8_t>(blk.qh[32 * h + l] | ((e[k] >> 4) << (2 * k)));
            }
          }
        }
        for (int g = 0; g < 16; ++g) blk.scales[g] = static_cast<int8_t>(in[48 * kChunk + 16 * g + r]);
        std::memcpy(&blk.d, d + 32 * sb + 2 * r, 2);
        std::memcpy(row + sb * static_cast<int64_t>(sizeof(BlockQ6_K)), &blk, sizeof(blk));
      }
      return;
    }
    default: KVS_CHECK_MSG(false, "UnpackPanelRow: {} has no packed layout", DTypeName(t));
  }
}

int64_t PackedLayoutBytes(DType t, int64_t rows, int64_t cols) {
  if (!HasPackedLayout(t) || rows <= 0 || cols <= 0 || cols % Traits(t).block_size != 0) return 0;
  return NumPanels(rows) * PanelBytes(t, cols);
}

int64_t PackedBytes(DType t, int64_t rows, int64_t cols) {
  return ActiveKernels().reads_packed ? PackedLayoutBytes(t, rows, cols) : 0;
}

int64_t PackedBf16Bytes(int64_t rows, int64_t cols) {
  if (!ActiveKernels().reads_packed_bf16 || rows <= 0 || cols <= 0) return 0;
  return NumPanels(rows) * Bf16PanelBytes(cols);
}

void PackBf16Panel(const uint16_t* const* rows, int valid, int64_t cols, void* panel) {
  KVS_CHECK(valid >= 1 && valid <= kPanelRows);
  KVS_CHECK_MSG(reinterpret_cast<uintptr_t>(panel) % 64 == 0, "PackBf16Panel: panel not 64-byte aligned");
  auto* out = static_cast<uint32_t*>(panel);
  const int64_t npairs = (cols + 31) / 32 * 16;
  for (int64_t p = 0; p < npairs; ++p) {
    const int64_t c = 2 * p;
    for (int r = 0; r < kPanelRows; ++r) {
      uint32_t v = 0;
      if (r < valid && c < cols) {
        v = rows[r][c];
        if (c + 1 < cols) v |= static_cast<uint32_t>(rows[r][c + 1]) << 16;
      }
      out[p * kPanelRows + r] = v;
    }
  }
}

void PackWeights(const MatView& w, void* out, ThreadPool& pool) {
  const int64_t pb = PanelBytes(w.type, w.cols), rb = RowBytes(w.type, w.cols);
  KVS_CHECK_MSG(PackedLayoutBytes(w.type, w.rows, w.cols) > 0, "PackWeights: {} [{}, {}] has no packed layout",
                DTypeName(w.type), w.rows, w.cols);
  KVS_CHECK_MSG(reinterpret_cast<uintptr_t>(out) % 64 == 0, "PackWeights: output not 64-byte aligned");
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* dst = static_cast<uint8_t*>(out);
  pool.ParallelFor(NumPanels(w.rows), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
      PackPanel(w.type, src + p * kPanelRows * rb, rb, valid, w.cols, dst + p * pb);
    }
  });
}

}  // namespace kvs::kernels
