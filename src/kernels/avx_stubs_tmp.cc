// TEMPORARY: forwards the AVX variants to scalar until they exist.
#include "kernels/isa_decls.h"
#define FWD(ns) namespace kvs::kernels::ns { \
void TileF32(const TileArgs& a){scalar::TileF32(a);} \
void TileF16(const TileArgs& a){scalar::TileF16(a);} \
void TileBF16(const TileArgs& a){scalar::TileBF16(a);} \
void TileQ8_0(const TileArgs& a){scalar::TileQ8_0(a);} \
void TileQ4_0(const TileArgs& a){scalar::TileQ4_0(a);} \
void TileQ4_K(const TileArgs& a){scalar::TileQ4_K(a);} \
void TileQ6_K(const TileArgs& a){scalar::TileQ6_K(a);} \
void QuantizeActs(const ActLayout& l, const float* x, int64_t ldx, int64_t m, uint8_t* b){scalar::QuantizeActs(l,x,ldx,m,b);} \
void RmsNorm(const float* x, const float* w, float* o, int64_t n, float e){scalar::RmsNorm(x,w,o,n,e);} \
void SiluMul(const float* g, const float* u, float* o, int64_t n){scalar::SiluMul(g,u,o,n);} \
void Add(const float* a, const float* b, float* o, int64_t n){scalar::Add(a,b,o,n);} \
void Axpy(float a, const float* x, float* y, int64_t n){scalar::Axpy(a,x,y,n);} \
float Dot(const float* a, const float* b, int64_t n){return scalar::Dot(a,b,n);} \
void Softmax(float* x, int64_t n){scalar::Softmax(x,n);} \
void ConvertFromF32(DType t, const float* x, void* y, int64_t n){scalar::ConvertFromF32(t,x,y,n);} }
FWD(avx2)
FWD(avx512)
