#include "bench_model.h"

#include "cachet/error.h"

namespace cachet::cli {
int bench_model(const BenchModelArgs&) { fail("model benchmark not implemented yet"); }
}  // namespace cachet::cli
