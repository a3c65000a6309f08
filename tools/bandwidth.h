// Memory read bandwidth of this machine, as the roofline reference for benchmarks.
#pragma once

namespace cachet {
class ThreadPool;
}

namespace cachet::cli {

struct Bandwidth {
  // The roofline reference: the fastest whole pass of a streaming read over a buffer of at
  // least 1 GiB with every thread of the pool, in GB/s (1e9 bytes per second). Several read
  // patterns take turns and the fastest pass of any counts.
  double sustained_gbs = 0;
  // The fastest single read of one 128 MiB slice of that buffer: a short burst, which a
  // decoding step reading more than a GiB does not see. Printed for comparison only.
  double burst_gbs = 0;
};

Bandwidth measure_bandwidth(ThreadPool& pool, double gib = 1.0);

// Prints `bandwidth: X GB/s` (the roofline reference) and the burst figure on its own line.
double print_bandwidth(ThreadPool& pool);

}  // namespace cachet::cli
