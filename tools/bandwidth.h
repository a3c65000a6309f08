// Memory read bandwidth of this machine, as the roofline reference for benchmarks.
#pragma once

namespace cachet {
class ThreadPool;
}

namespace cachet::cli {

struct Bandwidth {
  // The roofline reference: the fastest whole pass of a streaming read over a buffer of
  // 1 GiB with every thread of the pool, in GB/s (1e9 bytes per second). Several read
  // patterns take turns and the fastest pass of any counts.
  double sustained_gbs = 0;
  // The fastest single read of one 128 MiB slice of that buffer: a short burst, which a
  // decoding step reading more than a GiB does not see. Printed for comparison only.
  double burst_gbs = 0;
};

// Whole passes for at least `seconds` (and at least 12), then the bursts (when `bursts`). The
// 1 GiB buffer is made by the first probe and kept for the next ones (freeing it disturbed the
// figures timed after a probe on a host that reclaims its guests' free memory); it is left out
// of peak_rss_gib(), and probe_buffer_gib() says how much to leave out of other RSS figures.
Bandwidth measure_bandwidth(ThreadPool& pool, double seconds = 1.5, bool bursts = true);

// The resident size of the probes' buffer: 0 before the first probe, then 1 GiB.
double probe_buffer_gib();

// The process's peak resident memory in GiB, leaving out the probes' buffer: the high-water
// mark is read before each probe and reset after it (/proc/self/clear_refs); where the kernel
// does not allow the reset, the figure includes the probe's passes.
double peak_rss_gib();

// Prints `bandwidth: X GB/s` (the roofline reference) and the burst figure on its own line.
double print_bandwidth(ThreadPool& pool);

// Host steal: CPU time that this machine's CPUs, being those of a virtual machine, spent
// waiting while its host ran other work (/proc/stat). A benchmark marks the start and the end
// of its timed part, and print_steal prints `host steal: P% of the CPU time while LABEL (S of
// T CPU-seconds)`: steps that lost time to it took two to three times the median step on one
// host, so the share tells a slow mean apart from slow code. Nothing is printed where
// /proc/stat has no steal column.
struct StealMark {
  double steal = -1;  // CPU-seconds of steal over all CPUs so far (-1: unknown)
  double wall = 0;    // seconds on a steady clock
};
StealMark steal_mark();
void print_steal(const StealMark& from, const StealMark& to, const char* label);

// The load on a shared host's memory moves within seconds, so a figure is compared with probes
// taken just before and just after it: the higher of the two is its reference.
struct Probes {
  double before = 0, after = 0;
  double best() const { return before > after ? before : after; }
};

template <typename F>
Probes between_probes(ThreadPool& pool, F&& measure) {
  Probes p;
  p.before = measure_bandwidth(pool, 1.0, false).sustained_gbs;
  measure();
  p.after = measure_bandwidth(pool, 1.0, false).sustained_gbs;
  return p;
}

// `bandwidth: X GB/s (the higher of the probes just before and after WHAT: B, A GB/s)`
void print_probes(const Probes& p, const char* what);

}  // namespace cachet::cli
