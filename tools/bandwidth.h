// Memory read bandwidth of this machine, as the roofline reference for benchmarks.
#pragma once

namespace cachet {
class ThreadPool;
}

namespace cachet::cli {

// Streaming read rate over a buffer of at least 1 GiB with every thread of the pool, in GB/s
// (1e9 bytes per second): the fastest of many calls that each read one 128 MiB slice.
double measure_bandwidth_gbs(ThreadPool& pool, double gib = 1.0);

}  // namespace cachet::cli
