// The tracker: connect, query, and leased sessions (crosstune.connect_tracker, Tracker.request).
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "crosstune/client/tracker_client.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace crosstune::python {
namespace {

// A session on a granted device and the tracker connection that holds its lease.
class Lease {
 public:
  explicit Lease(client::LeasedSession leased) : leased_(std::move(leased)) {}
  client::Session& session() { return *leased_.session; }
  const msg::Grant& grant() const { return leased_.grant; }
  bool held() const { return leased_.tracker != nullptr; }
  // Ends the session, then the lease. The Session object stays (closed) for Python references.
  void Release() {
    if (leased_.session) (void)leased_.session->Close();
    leased_.tracker.reset();
  }

 private:
  client::LeasedSession leased_;
};

class Tracker {
 public:
  Tracker(client::TrackerOptions options, std::unique_ptr<client::TrackerClient> client)
      : options_(std::move(options)), client_(std::move(client)) {}
  const client::TrackerOptions& options() const { return options_; }
  client::TrackerClient& client() { return *client_; }

 private:
  client::TrackerOptions options_;
  std::unique_ptr<client::TrackerClient> client_;
};

}  // namespace

void BindTracker(nb::module_& m) {
  nb::class_<Lease>(m, "Lease", "A session on a device a tracker granted, and its lease.")
      .def_prop_ro("session", &Lease::session, nb::rv_policy::reference_internal)
      .def_prop_ro("device", [](const Lease& l) { return l.grant().device; })
      .def_prop_ro("address", [](const Lease& l) { return l.grant().address; })
      .def_prop_ro("key", [](const Lease& l) { return l.grant().key; })
      .def_prop_ro("held", &Lease::held)
      .def(
          "release",
          [](Lease& l) {
            nb::gil_scoped_release release;
            l.Release();
          },
          "Ends the session and gives the lease back.");

  nb::class_<Tracker>(m, "Tracker", "A connection to a crosstune-tracker.")
      .def_static(
          "connect",
          [](const std::string& address, const std::string& auth_secret,
             const std::string& peer_name, double connect_timeout_s, double request_timeout_s) {
            client::TrackerOptions o;
            o.tracker = address;
            o.auth_secret = auth_secret;
            o.peer_name = peer_name;
            o.connect_timeout = Ms(connect_timeout_s);
            o.request_timeout = Ms(request_timeout_s);
            nb::gil_scoped_release release;
            auto c = Unwrap(client::TrackerClient::Connect(o));
            return std::make_unique<Tracker>(o, std::move(c));
          },
          "address"_a, "auth_secret"_a = "", "peer_name"_a = "", "connect_timeout_s"_a = 10.0,
          "request_timeout_s"_a = 30.0)
      .def_prop_ro("address", [](const Tracker& t) { return t.options().tracker; })
      .def("query",
           [](Tracker& t) {
             nb::gil_scoped_release release;
             return Unwrap(t.client().Query());
           })
      .def(
          "admin",
          [](Tracker& t, const std::string& action, const std::string& device,
             const std::string& admin_secret) {
            nb::gil_scoped_release release;
            Check(t.client().Admin(action, device, admin_secret));
          },
          "action"_a, "device"_a, "admin_secret"_a)
      .def(
          "request",
          [](Tracker& t, const std::string& key, const std::vector<std::string>& constraints,
             int32_t priority, double wait_s, double hold_s, const std::string& server_secret,
             double request_timeout_s,
             std::function<void(uint32_t, uint32_t, const std::string&)> on_queue) {
            client::LeaseRequest r;
            r.key = key;
            r.constraints = constraints;
            r.priority = priority;
            r.wait = Ms(wait_s);
            r.hold = Ms(hold_s);
            if (on_queue) {
              r.on_queue_update = [on_queue](const msg::QueueUpdate& u) {
                nb::gil_scoped_acquire acquire;
                try {
                  on_queue(u.position, u.queue_length, u.note);
                } catch (nb::python_error& e) {
                  e.discard_as_unraisable("crosstune: on_queue");
                }
              };
            }
            client::ConnectOptions co;
            co.auth_secret = server_secret;
            co.request_timeout = Ms(request_timeout_s);
            co.connect_timeout = std::min(co.connect_timeout, co.request_timeout);
            nb::gil_scoped_release release;
            return std::make_unique<Lease>(Unwrap(client::OpenLeasedSession(t.options(), r, co)));
          },
          "key"_a, "constraints"_a = std::vector<std::string>{}, "priority"_a = 0,
          "wait_s"_a = 600.0, "hold_s"_a = 1800.0, "server_secret"_a = "",
          "request_timeout_s"_a = 60.0, "on_queue"_a = nb::none(),
          "Waits in the key's queue for a device and opens a session on it.");
}

}  // namespace crosstune::python
