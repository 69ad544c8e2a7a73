// Block layouts of the quantized tensor types, byte-compatible with the
// blocks in GGUF files written by llama.cpp (little-endian; `d`/`dmin`
// fields are IEEE half bits). A row of n elements is n / block_size blocks
// stored back to back, with no padding between blocks or rows.
//
// Values a block encodes (q = the stored small integers):
//   Q8_0  x = d * q,              q in [-127, 127]
//   Q4_0  x = d * (q - 8),        q in [0, 15]; element j is the low nibble
//                                 of qs[j], element j+16 the high nibble
//   Q4_K  8 sub-blocks of 32:     x = d*sc[s] * q - dmin*m[s], q in [0, 15];
//                                 sc/m are 6-bit, packed in `scales` (see
//                                 GetScaleMinK4); qs[32*g + l] holds element
//                                 64g+l (low nibble) and 64g+32+l (high)
//   Q5_K  as Q4_K with q in [0, 31]: the low 4 bits as Q4_K's nibbles, the
//                                 5th bit of element 32s + l in bit s of qh[l]
//   Q6_K  16 sub-blocks of 16:    x = d * scales[s] * (q - 32), q in [0, 63];
//                                 low 4 bits in ql, high 2 bits in qh
//   Q5_0  x = d * (q - 16),       q in [0, 31]; low 4 bits as Q4_0's nibbles,
//                                 the 5th bit of element j in bit j of qh
//   Q4_1  x = d * q + m,          q in [0, 15]; nibbles as Q4_0
//   IQ4_NL x = d * kIQ4NLValues[q], q in [0, 15]; nibbles as Q4_0
//   IQ4_XS 8 sub-blocks of 32:    x = d * (ls[s] - 32) * kIQ4NLValues[q];
//                                 ls is 6-bit: low 4 bits in a nibble of
//                                 scales_l[s/2], high 2 bits at bit 2s of
//                                 scales_h; qs[16s + l] holds element 32s+l
//                                 (low nibble) and 32s+16+l (high)
//   Q3_K  16 sub-blocks of 16:    x = d * (sc[s] - 32) * (q - 4), q in [0, 7];
//                                 sc is 6-bit (see GetScaleQ3K); the low 2
//                                 bits of element 128h + 32k + l are bits
//                                 2k..2k+1 of qs[32h + l], the 3rd bit is
//                                 bit 4h + k of hmask[l]
//   Q2_K  16 sub-blocks of 16:    x = d * sc[s] * q - dmin * m[s], q in [0, 3];
//                                 scales[s] = sc | m << 4; codes packed as
//                                 Q3_K's low 2 bits
//   Q8_K  x = d * q (f32 d; activation format of K-quant dot products,
//         with bsums[i] = sum of qs[16i .. 16i+15])
#pragma once

#include <cstdint>

namespace kvs::kernels {

inline constexpr int kQK0 = 32;   // elements per Q8_0 / Q4_0 block
inline constexpr int kQKK = 256;  // elements per K-quant super-block

struct BlockQ8_0 {
  uint16_t d;      // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // nibbles, see above
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ5_0 {
  uint16_t d;      // f16 scale
  uint8_t qh[4];   // 5th bits, little-endian: bit j for element j
  uint8_t qs[16];  // low 4 bits, as Q4_0's nibbles
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ4_1 {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 offset (the block's minimum)
  uint8_t qs[16];  // nibbles, as Q4_0
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockIQ4_NL {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // indices into kIQ4NLValues, as Q4_0's nibbles
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockIQ4_XS {
  uint16_t d;            // f16 super-block scale
  uint16_t scales_h;     // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[4];   // low 4 bits of the sub-block scales
  uint8_t qs[128];       // indices into kIQ4NLValues
};
static_assert(sizeof(BlockIQ4_XS) == 136);

struct BlockQ3_K {
  uint8_t hmask[32];    // 3rd bits of the codes
  uint8_t qs[64];       // low 2 bits of the codes
  uint8_t scales[12];   // 16 scales, 6 bits each
  uint16_t d;           // f16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ2_K {
  uint8_t scales[16];   // sub-block scale (low nibble) and min (high nibble)
  uint8_t qs[64];       // 2-bit codes
  uint16_t d;           // f16 super-block scale of the scales
  uint16_t dmin;        // f16 super-block scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

// The 16 values an IQ4_NL / IQ4_XS index stands for (ggml's kvalues_iq4nl):
// a non-uniform grid, denser near zero.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

struct BlockQ4_K {
  uint16_t d;           // f16 super-block scale of the 6-bit scales
  uint16_t dmin;        // f16 super-block scale of the 6-bit mins
  uint8_t scales[12];   // 8 scales + 8 mins, 6 bits each
  uint8_t qs[128];      // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d;           // f16 super-block scale of the 6-bit scales
  uint16_t dmin;        // f16 super-block scale of the 6-bit mins
  uint8_t scales[12];   // as Q4_K
  uint8_t qh[32];       // 5th bits: element 32s + l (sub-block s) in bit s of qh[l]
  uint8_t qs[128];      // low 4 bits, as Q4_K's nibbles
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[128];      // low 4 bits of the quants
  uint8_t qh[64];       // high 2 bits of the quants
  int8_t scales[16];    // 8-bit sub-block scales
  uint16_t d;           // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Sub-block j (0..7) scale and min of a Q4_K block: j < 4 keep the low 6
// bits of bytes j and j+4; j >= 4 combine a nibble of byte j+4 with the top
// two bits of bytes j-4 (scale) and j (min).
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The 6-bit scale of Q3_K sub-block s (0..15), before subtracting 32: the
// low 4 bits are a nibble of byte s % 8 (the high one for s >= 8), the high
// 2 bits are bits 2(s/4).. of byte 8 + s % 4.
inline int GetScaleQ3K(int s, const uint8_t* q) {
  const int lo = s < 8 ? q[s] & 0xF : q[s - 8] >> 4;
  return lo | (((q[8 + s % 4] >> (2 * (s / 4))) & 3) << 4);
}

}  // namespace kvs::kernels
