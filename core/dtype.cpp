#include "core/dtype.hpp"

#include "core/error.hpp"

namespace st {

DType parse_float_dtype(std::string_view text, std::string_view what) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::f32;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  fail_input("{}: '{}' is not a floating-point dtype (expected fp32 or bf16)", what, text);
}

}  // namespace st
