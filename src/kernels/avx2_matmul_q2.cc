// AVX2 tiles for Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q3_K and Q2_K weights: the
// row-at-a-time kernels of rowdot_q_impl.h with maddubs + madd dot products
// (these types have no packed panel layout).
#define KVS_ROWDOT_ISA avx2
#define KVS_ROWDOT_VNNI 0
#include "kernels/isa_decls.h"
#include "kernels/rowdot_q_impl.h"
