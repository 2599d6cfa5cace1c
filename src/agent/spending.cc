#include "agent/spending.h"

namespace steps::agent {
namespace {

std::string Named(const BudgetMeter& meter, const std::string& what) {
  if (meter.name().empty()) return what;
  return meter.name() + " budget: " + what;
}

}  // namespace

namespace {

double Priced(const Usage& usage, const SourcePrice& price) {
  return (static_cast<double>(usage.prompt_tokens) * price.input_per_mtok +
          static_cast<double>(usage.completion_tokens) *
              price.output_per_mtok) /
         1e6;
}

}  // namespace

double AnswerUsd(const Usage& usage, const std::optional<SourcePrice>& price,
                 const std::optional<SourcePrice>& listed) {
  if (price) return Priced(usage, *price);
  if (usage.cost_usd) return *usage.cost_usd;
  if (listed) return Priced(usage, *listed);
  return 0.0;
}

Spending::Spending(const std::optional<BudgetLimit>& own,
                   const std::vector<std::shared_ptr<BudgetMeter>>& shared) {
  if (own) meters_.push_back(std::make_shared<BudgetMeter>(*own, "step"));
  for (const auto& meter : shared) {
    if (meter) meters_.push_back(meter);
  }
}

std::string Spending::Charge(int64_t tokens, double usd) {
  std::string exceeded;
  for (const auto& meter : meters_) {
    if (!meter->Add(tokens, usd) && exceeded.empty()) {
      exceeded = Named(*meter, meter->Describe());
    }
  }
  return exceeded;
}

std::string Spending::Spent() const {
  for (const auto& meter : meters_) {
    if (meter->Spent()) return Named(*meter, meter->DescribeSpent());
  }
  return "";
}

}  // namespace steps::agent
