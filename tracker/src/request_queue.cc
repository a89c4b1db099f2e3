#include "crosstune/tracker/request_queue.h"

#include <algorithm>
#include <optional>

#include "crosstune/tracker/grant_policy.h"
#include "durations.h"

namespace crosstune::tracker {
void RequestQueue::Add(Waiter w) {
  std::string key = w.req.key;
  dirty_.insert(key);
  if (w.last_position == 0) unannounced_[key]++;
  queues_[key].push_back(std::move(w));  // placed by the next arrangement
}

bool RequestQueue::Remove(uint64_t conn, uint32_t request_id) {
  for (auto& [key, q] : queues_) {
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->conn == conn && it->request_id == request_id) {
        q.erase(it);
        dirty_.insert(key);
        return true;
      }
    }
  }
  return false;
}

void RequestQueue::RemoveConn(uint64_t conn) {
  for (auto& [key, q] : queues_) {
    if (std::erase_if(q, [&](const Waiter& w) { return w.conn == conn; }) > 0) dirty_.insert(key);
  }
}

std::vector<Waiter> RequestQueue::TakeExpired(TimePoint now) {
  std::vector<Waiter> expired;
  for (auto& [key, q] : queues_) {
    for (auto it = q.begin(); it != q.end();) {
      if (now >= it->deadline) {
        expired.push_back(std::move(*it));
        it = q.erase(it);
      } else {
        ++it;
      }
    }
  }
  return expired;
}

void RequestQueue::Arrange(const std::string& key, std::vector<Waiter>& q) const {
  policy_->Order(q, [&](const std::string& holder) { return held_(key, holder); });
}

std::vector<Waiter>& RequestQueue::Arranged(const std::string& key) {
  auto& q = queues_[key];
  Arrange(key, q);
  return q;
}

std::vector<Waiter> RequestQueue::InGrantOrder(const std::string& key) const {
  auto it = queues_.find(key);
  if (it == queues_.end()) return {};
  std::vector<Waiter> q = it->second;
  Arrange(key, q);
  return q;
}

void RequestQueue::DropGranted(const std::string& key) {
  std::erase_if(queues_[key], [](const Waiter& w) { return w.seq == 0; });
  dirty_.insert(key);
}

void RequestQueue::SendPositions(TimePoint now, bool full, uint32_t eager_positions, Ms interval,
                                 const std::function<std::string(const Waiter&)>& note,
                                 Outbox& out) {
  for (auto& [key, q] : queues_) {
    if (q.empty()) continue;
    // Between ticks only the front of a queue that changed is looked at (and new waiters,
    // which mark it dirty); the tick's full pass tells everyone else.
    bool dirty = dirty_.count(key) > 0;
    if (!full && !dirty) continue;
    Arrange(key, q);
    int& unannounced = unannounced_[key];
    size_t limit = full || unannounced > 0 ? q.size() : std::min<size_t>(q.size(), eager_positions);
    uint32_t pos = 0;
    for (size_t i = 0; i < limit; ++i) {
      Waiter* w = &q[i];
      ++pos;
      if (w->last_position == pos) continue;
      if (w->last_position != 0 && pos > eager_positions && now - w->last_update < interval) {
        continue;
      }
      w->last_position = pos;
      w->last_update = now;
      Action a{.kind = Action::Kind::kQueueUpdate, .conn = w->conn, .request_id = w->request_id};
      a.update.position = pos;
      a.update.queue_length = static_cast<uint32_t>(q.size());
      a.update.waited_ms = static_cast<uint64_t>(ToMs(now - w->enqueued));
      a.update.note = note(*w);
      out.Push(std::move(a));
    }
    if (limit == q.size()) unannounced = 0;  // everyone has heard at least once
  }
  dirty_.clear();
}

}  // namespace crosstune::tracker
