// AVX-512 variant's tiles for Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q3_K and Q2_K
// weights: the row-at-a-time kernels of rowdot_q_impl.h on 256-bit vectors
// with VNNI (vpdpbusd) dot products (these types have no packed panel
// layout).
#define KVS_ROWDOT_ISA avx512
#define KVS_ROWDOT_VNNI 1
#include "kernels/isa_decls.h"
#include "kernels/rowdot_q_impl.h"
