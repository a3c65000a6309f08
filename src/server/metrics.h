// Counters and histograms of `cachet serve`, rendered in the Prometheus text exposition format.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cachet::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, ascending
  void observe(double v);
  // name_bucket{le="..."} lines (cumulative), name_sum and name_count.
  void render(std::string& out, const std::string& name) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, the last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // A counter; labels are already formatted, e.g. endpoint="/health",status="200".
  void add(const std::string& name, const std::string& labels, double v = 1);
  void observe(const std::string& name, double v);  // name must be a histogram below
  double get(const std::string& name, const std::string& labels = "") const;

  // A value computed elsewhere, rendered after the counters and histograms.
  struct Extra {
    std::string name, help;
    const char* type;  // "gauge" or "counter"
    double value;
  };
  std::string render(const std::vector<Extra>& extras) const;

 private:
  struct Family {
    std::string help;
    std::map<std::string, double> values;  // by labels
  };
  mutable std::mutex mu_;
  std::map<std::string, Family> counters_;
  std::map<std::string, std::pair<std::string, Histogram>> histograms_;
};

// Escapes a label value (backslash, quote, newline).
std::string label_escape(const std::string& v);

}  // namespace cachet::server
