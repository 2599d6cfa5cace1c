// What a conversation spends, and the budgets that bound it: its own (the
// step's or agent entry's `budget:`) and the shared ones it is charged to
// as well (a job's budget).
#ifndef STEPS_AGENT_SPENDING_H_
#define STEPS_AGENT_SPENDING_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "providers/chat.h"

namespace steps::agent {

// The USD cost of one answer: from the source's `price:` when it has one,
// otherwise the cost the provider reported, otherwise the prices table's
// (`listed`, --prices), otherwise 0.
double AnswerUsd(const Usage& usage, const std::optional<SourcePrice>& price,
                 const std::optional<SourcePrice>& listed = std::nullopt);

// The meters one conversation charges. Not thread-safe itself; the meters
// are (shared meters are charged by many conversations at once).
class Spending {
 public:
  Spending(const std::optional<BudgetLimit>& own,
           const std::vector<std::shared_ptr<BudgetMeter>>& shared);

  // Charges one answer to every meter. Returns "" or, for the first meter
  // now past its cap, "step budget: token budget of 1000 exceeded (1203
  // used)".
  std::string Charge(int64_t tokens, double usd);
  // "" or, for the first meter whose cap is reached (another request would
  // pass it), "job budget: token budget of 1000 spent (1000 used)".
  std::string Spent() const;

 private:
  std::vector<std::shared_ptr<BudgetMeter>> meters_;
};

}  // namespace steps::agent

#endif  // STEPS_AGENT_SPENDING_H_
