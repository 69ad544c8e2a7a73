// Interleaved ("packed") layout of quantized weight matrices, shared by the
// AVX2 and AVX-512 kernels (internal to kernels/ and its tests).
//
// Why: a decode step multiplies every weight by one activation row, so the
// kernels must stream the weights at memory speed. Reading 16 rows at once
// with every 4 consecutive codes of the 16 rows in one 64-byte chunk lets one
// VNNI instruction (vpdpbusd; maddubs on AVX2) multiply-accumulate 16 rows x
// 4 codes against 4 broadcast activation codes, with no horizontal sums and
// no per-call repacking; the panel is one contiguous stream per thread.
// Packing happens once, at model load (PackWeights). A packed matrix takes
// the bytes of the original rows (Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q2_K, Q6_K; rounded
// up to whole panels of 16 rows and to 64 bytes per panel) or 1.5-3 % more
// (Q4_K, Q5_K, IQ4_XS, Q3_K, whose 6-bit sub-block scales are stored as
// bytes so the kernels need not unpack them).
//
// A panel holds rows [16p, 16p + 16) (rows past the matrix are zero). A
// "chunk" is 64 bytes: 4 bytes for each of the 16 rows, row r at bytes
// [4r, 4r + 4). Per weight type (sizes per panel):
//   Q8_0  [nblk][8 chunks]    chunk c: codes 4c..4c+3 of each row, +128
//                             (unsigned: code - 128 is the stored int8)
//         [nblk][16 x f16]    the blocks' d, row order
//   Q4_0  [nblk][4 chunks]    chunk c: bytes qs[4c..4c+3] of each row: low
//                             nibbles are elements 4c.., high 16+4c..
//         [nblk][16 x f16]    d
//   Q4_1  as Q4_0, then [nblk][16 x f16] m (the blocks' offsets)
//   IQ4_NL as Q4_0 (the nibbles are indices into kIQ4NLValues)
//   Q5_0  [nblk][4 chunks as Q4_0's][1 chunk 5th bits: byte i, bit 2c:
//         element 4c + i; bit 2c + 1: element 16 + 4c + i], then d as Q4_0
//   IQ4_XS per super-block: [32 chunks codes][2 chunks scales]
//         codes chunk 4j + c: as Q4_0's chunk c of 32-element block j
//         scales: byte 16j + r = the 6-bit scale of block j, row r, minus 32
//                (int8; padding rows -32, so they unpack to zero bytes)
//         after all super-blocks: [nsb][16 x f16] d
//   Q3_K  per super-block: [16 chunks low bits][8 chunks high bits]
//                          [4 chunks scales]
//         low chunk 8h + c: bytes qs[32h + 4c .. +3] (bits 2k..2k+1: low
//                bits of element 128h + 32k + 4c + i, as GGUF stores them)
//         high chunk c: bytes hmask[4c .. +3] (bit 4h + k: 3rd bit of that
//                element)
//         scales: byte 16g + r = the 6-bit scale of 16-group g, row r,
//                minus 32 (int8; padding rows -32)
//         after all super-blocks: [nsb][16 x f16] d
//   Q2_K  per super-block: [1 chunk header][16 chunks codes][4 chunks scales]
//         header: each row's f16 d | f16 dmin << 16
//         codes chunk 8h + c: bytes qs[32h + 4c .. +3] (as Q3_K's low bits)
//         scales: byte 16g + r = scales[g] of row r (sc | m << 4)
//   Q4_K  per super-block: [5 chunks header][32 chunks codes]
//         header chunk 0: each row's f16 d | f16 dmin << 16
//                bytes 64 + 16s + r: the 6-bit scale of sub-block s, row r
//                bytes 192 + 16s + r: the 6-bit min of sub-block s, row r
//         codes chunk 8g + c: bytes qs[32g + 4c .. +3]: low nibbles are
//                sub-block 2g elements 4c.., high nibbles sub-block 2g+1
//   Q5_K  as Q4_K, then [8 chunks] qh: chunk c = bytes qh[4c..4c+3]
//                (bit s of a byte: 5th bit of that element of sub-block s)
//   Q6_K  per super-block: [48 chunks codes][4 chunks scales]
//         codes chunk 24h + 3c + j (h < 2, c < 8, j < 3): for l = 4c + i
//                (i < 4) byte i of each row is e_j | (bits of e_3) << 6,
//                where e_k is the 6-bit code of element 128h + 32k + l and
//                the bits of e_3 are (e_3 >> 4) & 3, (e_3 >> 2) & 3, e_3 & 3
//                for j = 0, 1, 2: e_0..e_2 are one AND away, 4 * e_3 is
//                (X0 & 0xC0) | ((X1 >> 2) & 0x30) | ((X2 >> 4) & 0x0C)
//         scales: [16 groups][16 rows] int8 (byte 16g + r)
//         after all super-blocks: [nsb][16 x f16] d
// (Element order within a block is the GGUF format's; see quant_formats.h.)
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace kvs::kernels {

inline constexpr int kPanelRows = 16;
inline constexpr int64_t kChunkBytes = 64;
// Bytes of one super-block of a panel, and offsets inside it.
inline constexpr int64_t kQ4KUnitBytes = 37 * kChunkBytes, kQ5KUnitBytes = 45 * kChunkBytes;
inline constexpr int64_t kK4ScalesOff = 64, kK4MinsOff = 192, kK4CodesOff = 5 * kChunkBytes,
                         kK5HighOff = 37 * kChunkBytes;
inline constexpr int64_t kQ6KUnitBytes = 52 * kChunkBytes, kQ6KScalesOff = 48 * kChunkBytes;
inline constexpr int64_t kQ3KUnitBytes = 28 * kChunkBytes, kQ3KHighOff = 16 * kChunkBytes,
                         kQ3KScalesOff = 24 * kChunkBytes;
inline constexpr int64_t kQ2KUnitBytes = 21 * kChunkBytes, kQ2KCodesOff = kChunkBytes,
                         kQ2KScalesOff = 17 * kChunkBytes;
inline constexpr int64_t kIQ4XSUnitBytes = 34 * kChunkBytes, kIQ4XSScalesOff = 32 * kChunkBytes;

// A panel's code stream is a run of units: 32-element blocks for Q8_0,
// Q4_0, Q4_1, IQ4_NL and Q5_0 (their f16 scales follow all blocks),
// super-blocks for the others. The kernels and PackPanel share these.
constexpr bool PanelHasBlock32Units(DType t) {
  return t == DType::kQ8_0 || t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kIQ4_NL || t == DType::kQ5_0;
}
// Bytes of one unit (0: no packed layout).
constexpr int64_t PanelUnitBytes(DType t) {
  switch (t) {
    case DType::kQ8_0: return 8 * kChunkBytes;
    case DType::kQ5_0: return 5 * kChunkBytes;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL: return 4 * kChunkBytes;
    case DType::kIQ4_XS: return kIQ4XSUnitBytes;
    case DType::kQ2_K: return kQ2KUnitBytes;
    case DType::kQ3_K: return kQ3KUnitBytes;
    case DType::kQ4_K: return kQ4KUnitBytes;
    case DType::kQ5_K: return kQ5KUnitBytes;
    case DType::kQ6_K: return kQ6KUnitBytes;
    default: return 0;
  }
}

// True for the types with a packed layout: every quantized weight type
// MatMul supports (Q8_0, Q4_0, Q4_1, Q5_0, IQ4_NL, IQ4_XS, Q2_K .. Q6_K).
bool HasPackedLayout(DType t);
// Bytes of one panel (a multiple of 64).
int64_t PanelBytes(DType t, int64_t cols);
inline int64_t NumPanels(int64_t rows) { return (rows + kPanelRows - 1) / kPanelRows; }
// Bytes of the packed layout of a matrix (0: no layout for the type, or
// cols not whole blocks), whichever kernels run.
int64_t PackedLayoutBytes(DType t, int64_t rows, int64_t cols);

// Packs `valid` (1..16) rows starting at `rows` (row_bytes apart, GGUF
// layout) into one panel; rows past `valid` are written as zero codes and
// zero scales. `panel` has PanelBytes(t, cols) bytes.
void PackPanel(DType t, const uint8_t* rows, int64_t row_bytes, int valid, int64_t cols, uint8_t* panel);
// The inverse for tests: row r (< 16) of a panel, in the GGUF layout.
void UnpackPanelRow(DType t, const uint8_t* panel, int r, int64_t cols, uint8_t* row);

// BF16 panels, read by the avx512bf16 variant only (its tile packed the
// same layout per call before; packing at load spares that, ~10 % of the
// GEMM's time at m = 512). Panel q holds rows [16q, 16q + 16):
//   [cp / 2][16] u32   pair p of row r at u32 16p + r: columns 2p and
//                      2p + 1 (low half first, as in memory); cp = cols
//                      rounded up to 32, zero past cols and past the rows
// Not a HasPackedLayout type: the other variants keep reading the rows, and
// a matrix converted to BF16 at load may have none (MatView::data null).
inline int64_t Bf16PanelBytes(int64_t cols) { return (cols + 31) / 32 * 32 * kPanelRows * 2; }

}  // namespace kvs::kernels
