// AVX-512 matvec kernels: the 256-bit kernels built with VNNI dot products.
#define CACHET_VECDOT_VNNI 1
#include "kernels/vecdot_256.h"

namespace cachet::kern {

Kernel avx512_kernel(DType t) { return kernel_256(t); }

}  // namespace cachet::kern
