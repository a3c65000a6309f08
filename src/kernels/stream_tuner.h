// Internal: chooses, per X16 layout and number of activation rows, the StreamWay its products
// take (kernels.h), by timing the products themselves.
#pragma once
#include <cstddef>

#include "cachet/kernels.h"

namespace cachet::kern {

// The way for one product of `bytes` weight bytes, and whether the caller should time it and
// report the time. AVX-512 only (it asks the kernels which ways differ).
struct StreamPick {
  StreamWay way;
  bool measure;
};
StreamPick pick_stream_way(MatLayout layout, int nx, size_t bytes);
void report_stream_time(MatLayout layout, int nx, StreamWay way, size_t bytes, double seconds);

}  // namespace cachet::kern
