#pragma once
// Blockwise symmetric quantization for collectives on slow links (ZeRO++'s qwZ and qgZ): each
// block of a buffer gets its own FP32 scale (its largest magnitude over 127 or 7), values are
// rounded to nearest (ties to even) and sent as INT8 or packed INT4. A block holding a NaN or
// an infinity decodes to NaN throughout, so a broken value is never turned into a finite one.
#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"

namespace st {

enum class Quantization : uint8_t { none, int8, int4 };
const char* quantization_name(Quantization q);  // "none", "int8", "int4"

// Elements per block with their own scale: 256 for INT8 (scales add 1.6% to the bytes), 128
// for INT4 (its coarser steps need smaller blocks; scales add 6%).
int64_t quant_block(Quantization q);
// Bytes of `n` elements encoded: the blocks' FP32 scales, then the values (INT4: two per
// byte, the first in the low nibble); rounded up to 8 so encoded pieces can be concatenated.
size_t quantized_bytes(Quantization q, int64_t n);

// out[quantized_bytes(q, n)] = the encoding of x[n].
void quantize_blocks(Quantization q, const float* x, int64_t n, uint8_t* out);
// out[n] (fp32 or bf16, rounded to nearest even) = the values `in` encodes.
void dequantize_blocks(Quantization q, const uint8_t* in, int64_t n, void* out, DType dtype);
// out[n] += the values `in` encodes (FP32 accumulation on arrival).
void dequantize_add(Quantization q, const uint8_t* in, int64_t n, float* out);

}  // namespace st
