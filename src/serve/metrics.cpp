#include "serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace orchard::serve {
namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

constexpr auto kWindow = std::chrono::seconds(5);

}  // namespace

Histogram::Histogram(std::initializer_list<double> bounds) : bounds_(bounds), counts_(bounds.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  ++counts_[i];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::render(const std::string& name) const {
  std::string out;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
  return out;
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, status}];
}

void Metrics::prompt_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(n);
}

void Metrics::prompt_placed(int64_t cached, int64_t computed) {
  std::lock_guard lock(mu_);
  cached_prompt_tokens_ += static_cast<uint64_t>(cached);
  computed_prompt_tokens_ += static_cast<uint64_t>(computed);
}

void Metrics::first_token(double ttft_s) {
  std::lock_guard lock(mu_);
  ttft_.observe(ttft_s);
}

void Metrics::token(double since_previous_s) {
  std::lock_guard lock(mu_);
  token_latency_.observe(since_previous_s);
}

void Metrics::generated(int64_t n) {
  std::lock_guard lock(mu_);
  generated_tokens_ += static_cast<uint64_t>(n);
  const auto now = std::chrono::steady_clock::now();
  recent_.emplace_back(now, n);
  while (!recent_.empty() && now - recent_.front().first > kWindow) recent_.pop_front();
}

void Metrics::set_queue(int64_t waiting, int64_t active_slots, int64_t slots) {
  std::lock_guard lock(mu_);
  waiting_ = waiting;
  active_ = active_slots;
  slots_ = slots;
}

void Metrics::rejected(const std::string& why) {
  std::lock_guard lock(mu_);
  ++rejected_[why];
}

double Metrics::tokens_per_second() const {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  int64_t n = 0;
  for (const auto& [t, k] : recent_)
    if (now - t <= kWindow) n += k;
  return static_cast<double>(n) / std::chrono::duration<double>(kWindow).count();
}

int64_t Metrics::queue_waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

int64_t Metrics::active_slots() const {
  std::lock_guard lock(mu_);
  return active_;
}

std::string Metrics::render() const {
  const double tps = tokens_per_second();
  std::lock_guard lock(mu_);
  std::string o;
  o += "# HELP orchard_requests_total HTTP requests by endpoint and status code.\n";
  o += "# TYPE orchard_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    o += "orchard_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
         std::to_string(n) + "\n";
  o += "# HELP orchard_rejected_total Requests refused before generation, by reason.\n";
  o += "# TYPE orchard_rejected_total counter\n";
  for (const auto& [why, n] : rejected_) o += "orchard_rejected_total{reason=\"" + why + "\"} " + std::to_string(n) + "\n";
  o += "# HELP orchard_prompt_tokens_total Prompt tokens processed.\n# TYPE orchard_prompt_tokens_total counter\n";
  o += "orchard_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  o += "# HELP orchard_prompt_tokens_cached_total Prompt tokens whose keys and values a slot already held (the prompt cache).\n"
       "# TYPE orchard_prompt_tokens_cached_total counter\n";
  o += "orchard_prompt_tokens_cached_total " + std::to_string(cached_prompt_tokens_) + "\n";
  o += "# HELP orchard_prompt_tokens_computed_total Prompt tokens run through the model.\n"
       "# TYPE orchard_prompt_tokens_computed_total counter\n";
  o += "orchard_prompt_tokens_computed_total " + std::to_string(computed_prompt_tokens_) + "\n";
  o += "# HELP orchard_generated_tokens_total Tokens generated.\n# TYPE orchard_generated_tokens_total counter\n";
  o += "orchard_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  o += "# HELP orchard_time_to_first_token_seconds From request to first generated token.\n";
  o += "# TYPE orchard_time_to_first_token_seconds histogram\n";
  o += ttft_.render("orchard_time_to_first_token_seconds");
  o += "# HELP orchard_time_per_output_token_seconds Time between consecutive generated tokens.\n";
  o += "# TYPE orchard_time_per_output_token_seconds histogram\n";
  o += token_latency_.render("orchard_time_per_output_token_seconds");
  o += "# HELP orchard_queue_depth Requests waiting for a slot.\n# TYPE orchard_queue_depth gauge\n";
  o += "orchard_queue_depth " + std::to_string(waiting_) + "\n";
  o += "# HELP orchard_slots_active Slots generating now.\n# TYPE orchard_slots_active gauge\n";
  o += "orchard_slots_active " + std::to_string(active_) + "\n";
  o += "# HELP orchard_slots Slots (concurrent sequences) the server holds.\n# TYPE orchard_slots gauge\n";
  o += "orchard_slots " + std::to_string(slots_) + "\n";
  o += "# HELP orchard_tokens_per_second Generated tokens per second over the last 5 s.\n";
  o += "# TYPE orchard_tokens_per_second gauge\n";
  o += "orchard_tokens_per_second " + num(tps) + "\n";
  // The whole CPU package since the server started (idle time and other processes included).
  if (const std::optional<double> j = energy_.joules()) {
    o += "# HELP orchard_energy_joules_total CPU package energy since the server started.\n";
    o += "# TYPE orchard_energy_joules_total counter\norchard_energy_joules_total " + num(*j) + "\n";
    o += "# HELP orchard_energy_joules_per_generated_token That energy over the tokens generated since.\n";
    o += "# TYPE orchard_energy_joules_per_generated_token gauge\norchard_energy_joules_per_generated_token " +
         (generated_tokens_ > 0 ? num(*j / static_cast<double>(generated_tokens_)) : std::string("NaN")) + "\n";
  } else {
    o += "# orchard_energy: " + platform::energy_source() + "\n";
  }
  return o;
}

}  // namespace orchard::serve
