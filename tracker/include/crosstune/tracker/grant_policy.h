// Who gets the next free device of a key: the seam for grant policies. The scheduler asks the
// policy to put a key's waiting requests in grant order before each grant round and each round of
// position updates, then offers free devices front to back (a request no free device matches is
// passed over, not waited on). A new policy is one class here plus one row in MakeGrantPolicy.
//
//   priority    (default) higher priority first; a waiting request gains one level per
//               aging_step, so an old low-priority request overtakes newer high ones; then
//               arrival order.
//   fair-share  the request whose holder holds the fewest of the key's devices goes first; a
//               holder's earlier waiting requests count as held (one grant round shares out
//               devices one per holder in turn); then higher priority, then arrival. No aging:
//               holding fewer devices is what moves a request up.
//
// Thread-safety: a policy is immutable after construction; Order may run on any one thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker/outbox.h"
#include "crosstune/tracker/request_queue.h"

namespace crosstune::tracker {

class GrantPolicy {
 public:
  virtual ~GrantPolicy() = default;
  virtual std::string_view name() const = 0;
  // Puts `queue` (the waiting requests of one key) in grant order. `held(holder)` is how many of
  // the key's devices that holder holds now. The order must be total (ties broken by Waiter::seq),
  // so the same queue and holdings always give the same order.
  virtual void Order(std::vector<Waiter>& queue,
                     const std::function<int(const std::string& holder)>& held) const = 0;
  // The priority the status page shows for `w` at `now`.
  virtual int64_t EffectivePriority(const Waiter& w, TimePoint now) const = 0;
};

// The policies by name, for --policy's help and errors.
const std::vector<std::string>& GrantPolicyNames();
// The policy called `name`; InvalidArgument naming the known ones when there is none.
Expected<std::unique_ptr<GrantPolicy>> MakeGrantPolicy(std::string_view name, Ms aging_step);

}  // namespace crosstune::tracker
