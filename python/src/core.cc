// crosstune._core: the nanobind module under the Python package. It converts types and releases
// the GIL around every remote call and tuning step; the work is the C++ libraries'. The Python
// package (crosstune/__init__.py) gives it its public shape.
//
// Errors: a failed Status becomes StatusError, which the translator raises as the Python class
// the package registered for its code (crosstune.Timeout, crosstune.Disconnected, ...), with the
// message as its text.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "crosstune/builder/builder.h"
#include "crosstune/builder/target.h"
#include "crosstune/client/local_server.h"
#include "crosstune/client/session.h"
#include "crosstune/client/time_stats.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/package.h"
#include "crosstune/protocol.h"
#include "crosstune/tensor.h"
#include "crosstune/version.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace crosstune::python {
namespace {

using std::chrono::milliseconds;

// The Python classes of the error codes, registered by the package at import: a dict from the
// code's name ("Timeout") to the class.
nb::object& ErrorClasses() {
  static auto* classes = new nb::object();
  return *classes;
}

// --- Type conversions ---------------------------------------------------------------------------

AnyDict DeviceInfoDict(const msg::DeviceInfo& d) {
  nb::list gpus;
  for (const auto& g : d.gpus) {
    nb::dict gd;
    gd["name"] = g.name;
    gd["arch"] = g.arch;
    gd["memory_bytes"] = g.memory_bytes;
    gd["multiprocessors"] = g.multiprocessors;
    gd["max_threads_per_block"] = g.max_threads_per_block;
    gd["max_shared_per_block"] = g.max_shared_per_block;
    gd["max_shared_per_block_optin"] = g.max_shared_per_block_optin;
    gd["max_registers_per_block"] = g.max_registers_per_block;
    gd["warp_size"] = g.warp_size;
    gpus.append(gd);
  }
  AnyDict out;
  out["arch"] = d.arch;
  out["triple"] = d.triple;
  out["cpu_model"] = d.cpu_model;
  out["cpu_features"] = d.cpu_features;
  out["cores"] = d.cores;
  out["memory_bytes"] = d.memory_bytes;
  out["os"] = d.os;
  out["gpus"] = gpus;
  out["gpu_status"] = d.gpu_status;
  out["version"] = d.version;
  out["protocol"] = std::to_string(d.protocol_major) + "." + std::to_string(d.protocol_minor);
  return out;
}

AnyDict FileDict(const msg::FileEntry& f) {
  AnyDict out;
  out["path"] = f.path;
  out["size"] = f.size;
  out["sha256"] = f.sha256_hex;
  return out;
}

DLDataType ToDataType(nb::dlpack::dtype t) {
  // numpy's bool is one byte, as crosstune's "bool" (u8).
  if (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bool)) return {kDLUInt, 8, 1};
  return DLDataType{t.code, t.bits, t.lanes};
}

template <typename Array>
void FillHostArray(const Array& a, HostArray& storage) {
  storage.shape.resize(a.ndim());
  storage.strides.resize(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) {
    storage.shape[d] = static_cast<int64_t>(a.shape(d));
    storage.strides[d] = a.stride(d);
  }
  DLTensor& t = storage.tensor;
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.device = DLDevice{static_cast<DLDeviceType>(a.device_type()), a.device_id()};
  t.ndim = static_cast<int32_t>(a.ndim());
  t.dtype = ToDataType(a.dtype());
  t.shape = storage.shape.data();
  t.strides = storage.strides.data();
  t.byte_offset = 0;
}

// Call arguments from Python: int -> int64, float -> float64, an array -> a host tensor, a
// RemoteTensor -> itself. `storage` keeps the shapes the DLTensors point at.
std::vector<client::HostArg> ToHostArgs(const AnySequence& args, std::vector<HostArray>& storage) {
  const size_t n = nb::len(args);
  storage.resize(n);
  std::vector<client::HostArg> out(n);
  size_t i = 0;
  for (nb::handle h : args) {
    if (nb::isinstance<nb::bool_>(h)) {
      out[i] = client::HostArg::Int(nb::cast<bool>(h) ? 1 : 0);
    } else if (nb::isinstance<nb::int_>(h)) {
      out[i] = client::HostArg::Int(nb::cast<int64_t>(h));
    } else if (nb::isinstance<nb::float_>(h)) {
      out[i] = client::HostArg::Float(nb::cast<double>(h));
    } else if (nb::isinstance<client::RemoteTensor>(h)) {
      out[i] = client::HostArg::Remote(nb::cast<const client::RemoteTensor&>(h));
    } else if (!ToHostArg(h, storage[i], out[i])) {
      throw StatusError(Status(ErrorCode::kInvalidArgument,
                               "argument " + std::to_string(i) + ": " +
                                   nb::cast<std::string>(nb::str(h.type())) +
                                   " is not an int, a float, an array or a RemoteTensor"));
    }
    ++i;
  }
  return out;
}

client::TimeStats TimeWith(client::RemoteModule& m, const std::string& function,
                           const AnySequence& args, uint32_t number, uint32_t repeat,
                           uint32_t min_repeat_ms, uint32_t cooldown_ms, bool flush_cache,
                           double timeout_s, uint32_t threads) {
  std::vector<HostArray> storage;
  std::vector<client::HostArg> host = ToHostArgs(args, storage);
  const client::TimeOptions o =
      TimeOptionsOf(number, repeat, min_repeat_ms, cooldown_ms, flush_cache, timeout_s, threads);
  msg::TimeReply reply;
  {
    nb::gil_scoped_release release;
    reply = Unwrap(m.TimeHost(function, host, o));
  }
  return client::SummarizeTimes(reply);
}

void CopyArray(client::RemoteTensor& t, nb::handle array, bool in) {
  HostArray storage;
  client::HostArg arg;
  if (!ToHostArg(array, storage, arg)) {
    throw StatusError(Status(ErrorCode::kInvalidArgument, "expected an array"));
  }
  if (!in && !arg.copy_back) {
    throw StatusError(Status(ErrorCode::kInvalidArgument, "the array is read-only"));
  }
  nb::gil_scoped_release release;
  Check(in ? t.CopyFromHost(arg.host) : t.CopyToHost(arg.host));
}

}  // namespace

void Check(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}

milliseconds Ms(double seconds) {
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

uint32_t TimeoutMs(double seconds) {
  return seconds > 0 ? static_cast<uint32_t>(Ms(seconds).count()) : 0;
}

client::TimeOptions TimeOptionsOf(uint32_t number, uint32_t repeat, uint32_t min_repeat_ms,
                                  uint32_t cooldown_ms, bool flush_cache, double timeout_s,
                                  uint32_t threads) {
  client::TimeOptions o;
  o.timing.number = number;
  o.timing.repeat = repeat;
  o.timing.min_repeat_ms = min_repeat_ms;
  o.timing.cooldown_ms = cooldown_ms;
  o.timing.flush_cache = flush_cache;
  o.timeout_ms = TimeoutMs(timeout_s);
  o.threads = threads;
  return o;
}

bool ToHostArg(nb::handle h, HostArray& storage, client::HostArg& out) {
  // A read-only array (an input) is sent but never written back.
  nb::ndarray<> writable;
  nb::ndarray<nb::ro> readonly;
  if (nb::try_cast(h, writable, /*convert=*/false)) {
    FillHostArray(writable, storage);
    out = client::HostArg::Host(storage.tensor, true);
    return true;
  }
  if (nb::try_cast(h, readonly, /*convert=*/false)) {
    FillHostArray(readonly, storage);
    out = client::HostArg::Host(storage.tensor, false);
    return true;
  }
  return false;
}

// numpy's name of a crosstune dtype ("f32" -> "float32").
std::string NumpyDType(DLDataType t) {
  const std::string name = DTypeName(t);
  if (name == "bool") return name;
  const char* kinds[] = {"int", "uint", "float"};  // DLPack codes 0, 1, 2
  if (t.code > 2) return name;
  return kinds[t.code] + std::to_string(t.bits);
}

}  // namespace crosstune::python

// --- The module ---------------------------------------------------------------------------------

NB_MODULE(_core, m) {
  using namespace crosstune;
  using namespace crosstune::python;
  m.doc() = "crosstune's C++ libraries (client, builder, tuner) as the Python package uses them.";
  m.def(
      "version", [] { return std::string(kCrosstuneVersion); }, "crosstune's version.");

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const std::string name(ErrorCodeName(e.status().code()));
      nb::object cls;
      if (ErrorClasses().is_valid()) {
        nb::dict classes = nb::borrow<nb::dict>(ErrorClasses());
        if (classes.contains(name.c_str())) cls = classes[name.c_str()];
        if (!cls.is_valid() && classes.contains("Error")) cls = classes["Error"];
      }
      if (!cls.is_valid()) {
        PyErr_SetString(PyExc_RuntimeError, e.status().ToString().c_str());
        return;
      }
      PyErr_SetObject(cls.ptr(), nb::str(e.status().message().c_str()).ptr());
    }
  });

  m.def(
      "register_errors",
      [](nb::typed<nb::dict, nb::str, nb::type_object> classes) { ErrorClasses() = classes; },
      "classes"_a, "The package's exception classes by error code name (done at import).");
  m.def(
      "error_codes",
      [] {
        std::vector<std::pair<int, std::string>> out;
        for (int c = 1; c <= static_cast<int>(ErrorCode::kInternal); ++c) {
          out.emplace_back(c, std::string(ErrorCodeName(static_cast<ErrorCode>(c))));
        }
        return out;
      },
      "Every error code of the protocol: (value, name).");
  m.def(
      "raise_error",
      [](int code, const std::string& message) {
        Check(Status(static_cast<ErrorCode>(code), message));
      },
      "code"_a, "message"_a, "Raises the exception of an error code (for tests).");

  // --- Sessions ---------------------------------------------------------------------------------

  nb::class_<msg::CallReply>(m, "CallResult", "What a call returned.")
      .def_ro("ret", &msg::CallReply::ret, "the function's return value (0)")
      .def_ro("seconds", &msg::CallReply::seconds, "wall time of the call on the device")
      .def_ro("threads", &msg::CallReply::threads, "threads the call could use")
      .def("__repr__", [](const msg::CallReply& r) {
        return "CallResult(seconds=" + std::to_string(r.seconds) +
               ", threads=" + std::to_string(r.threads) + ")";
      });

  nb::class_<client::TimeStats>(m, "TimeResult",
                                "The device's time evaluator's rounds, summarised (seconds per "
                                "call).")
      .def_ro("seconds_per_call", &client::TimeStats::seconds_per_call, "one per round")
      .def_ro("number", &client::TimeStats::number, "calls per round")
      .def_ro("threads", &client::TimeStats::threads)
      .def_ro("median", &client::TimeStats::median)
      .def_ro("mean", &client::TimeStats::mean)
      .def_ro("min", &client::TimeStats::min)
      .def_ro("max", &client::TimeStats::max)
      .def_ro("std", &client::TimeStats::std)
      .def("gflops", &client::TimeStats::Gflops, "flops"_a,
           "GFLOP/s at the median, given the floating-point operations of one call.")
      .def("__repr__", [](const client::TimeStats& t) {
        return "TimeResult(median=" + std::to_string(t.median) +
               ", mean=" + std::to_string(t.mean) +
               ", rounds=" + std::to_string(t.seconds_per_call.size()) +
               ", number=" + std::to_string(t.number) + ")";
      });

  nb::class_<client::Session::CopyStats>(m, "CopyStats",
                                         "Tensor copies of a session and where the last ones "
                                         "read from and wrote to in this process.")
      .def_ro("copies_in", &client::Session::CopyStats::copies_in)
      .def_ro("copies_out", &client::Session::CopyStats::copies_out)
      .def_ro("bytes_in", &client::Session::CopyStats::bytes_in)
      .def_ro("bytes_out", &client::Session::CopyStats::bytes_out)
      .def_prop_ro("last_in_source",
                   [](const client::Session::CopyStats& s) {
                     return reinterpret_cast<uintptr_t>(s.last_in_source);
                   })
      .def_prop_ro("last_out_destination", [](const client::Session::CopyStats& s) {
        return reinterpret_cast<uintptr_t>(s.last_out_destination);
      });

  nb::class_<client::RemoteTensor>(m, "RemoteTensor",
                                   "A tensor in a device's memory. Belongs to its session.")
      .def_prop_ro("shape", [](const client::RemoteTensor& t) { return t.shape(); })
      .def_prop_ro("dtype", [](const client::RemoteTensor& t) { return DTypeName(t.dtype()); })
      .def_prop_ro("nbytes", &client::RemoteTensor::nbytes)
      .def(
          "copy_from", [](client::RemoteTensor& t, nb::handle a) { CopyArray(t, a, true); },
          "array"_a, "Copies a C-ordered host array of the tensor's size in, from its own memory.")
      .def(
          "copy_to", [](client::RemoteTensor& t, nb::handle a) { CopyArray(t, a, false); },
          "array"_a,
          "Copies the tensor into a writable C-ordered host array of its size, in place.")
      .def(
          "numpy",
          [](client::RemoteTensor& t) {
            nb::object array =
                nb::module_::import_("numpy").attr("empty")(t.shape(), NumpyDType(t.dtype()));
            CopyArray(t, array, false);
            return array;
          },
          "A new host array with the tensor's contents.")
      .def(
          "free",
          [](client::RemoteTensor& t) {
            nb::gil_scoped_release release;
            Check(t.Free());
          },
          "Frees the tensor on the device.");

  nb::class_<client::RemoteModule>(m, "RemoteModule", "A module loaded in a session.")
      .def_prop_ro("functions",
                   [](const client::RemoteModule& mod) {
                     std::vector<std::pair<std::string, std::string>> out;
                     for (const auto& f : mod.info().functions)
                       out.emplace_back(f.name, f.signature);
                     return out;
                   })
      .def_prop_ro("target", [](const client::RemoteModule& mod) { return mod.info().target; })
      .def_prop_ro("kind", [](const client::RemoteModule& mod) { return mod.info().kind; })
      .def(
          "call",
          [](client::RemoteModule& mod, const std::string& function, AnySequence args,
             double timeout_s, uint32_t threads) {
            std::vector<HostArray> storage;
            std::vector<client::HostArg> host = ToHostArgs(args, storage);
            nb::gil_scoped_release release;
            return Unwrap(mod.CallHost(function, host, TimeoutMs(timeout_s), threads));
          },
          "function"_a, "args"_a, "timeout_s"_a = 0.0, "threads"_a = 0,
          "Calls a function; arrays go in and come back in place.")
      .def("time", &TimeWith, "function"_a, "args"_a, "number"_a = 10, "repeat"_a = 5,
           "min_repeat_ms"_a = 0, "cooldown_ms"_a = 0, "flush_cache"_a = false, "timeout_s"_a = 0.0,
           "threads"_a = 0, "Times a function with the device's evaluator.")
      .def(
          "unload",
          [](client::RemoteModule& mod) {
            nb::gil_scoped_release release;
            Check(mod.Unload());
          },
          "Unloads the module on the device.");

  nb::class_<client::Session>(m, "Session", "A session with one crosstune-server.")
      .def_static(
          "connect",
          [](const std::string& server, const std::string& auth_secret,
             const std::string& lease_token, double connect_timeout_s, double request_timeout_s) {
            client::ConnectOptions o;
            o.server = server;
            o.auth_secret = auth_secret;
            o.lease_token = lease_token;
            o.connect_timeout = Ms(connect_timeout_s);
            o.request_timeout = Ms(request_timeout_s);
            nb::gil_scoped_release release;
            return Unwrap(client::Session::Connect(o));
          },
          "server"_a, "auth_secret"_a = "", "lease_token"_a = "", "connect_timeout_s"_a = 10.0,
          "request_timeout_s"_a = 60.0, "Connects to a crosstune-server at HOST:PORT.")
      .def_prop_ro("server", &client::Session::server)
      .def_prop_ro("connected", &client::Session::connected)
      .def("copy_stats", [](const client::Session& s) { return s.copy_stats(); })
      .def("ping",
           [](client::Session& s) {
             nb::gil_scoped_release release;
             Check(s.Ping());
           })
      .def("info",
           [](client::Session& s) {
             msg::DeviceInfo info;
             {
               nb::gil_scoped_release release;
               info = Unwrap(s.Info());
             }
             return DeviceInfoDict(info);
           })
      .def(
          "target",
          [](client::Session& s, bool cuda) {
            nb::gil_scoped_release release;
            msg::DeviceInfo info = Unwrap(s.Info());
            const auto kind = cuda ? builder::TargetKind::kCuda : builder::TargetKind::kCpu;
            return Unwrap(builder::TargetFromDevice(info, kind)).ToString();
          },
          "cuda"_a = false)
      .def(
          "upload",
          [](client::Session& s, const std::string& local, const std::string& remote) {
            msg::FileEntry f;
            {
              nb::gil_scoped_release release;
              f = Unwrap(s.Upload(local, remote));
            }
            return FileDict(f);
          },
          "local"_a, "remote"_a)
      .def(
          "upload_bytes",
          [](client::Session& s, nb::bytes data, const std::string& remote) {
            std::string_view view(data.c_str(), data.size());
            msg::FileEntry f;
            {
              nb::gil_scoped_release release;
              f = Unwrap(s.UploadBytes(view, remote));
            }
            return FileDict(f);
          },
          "data"_a, "remote"_a)
      .def(
          "download",
          [](client::Session& s, const std::string& remote, const std::string& local) {
            msg::FileEntry f;
            {
              nb::gil_scoped_release release;
              f = Unwrap(s.Download(remote, local));
            }
            return FileDict(f);
          },
          "remote"_a, "local"_a)
      .def("ls",
           [](client::Session& s) {
             std::vector<msg::FileEntry> files;
             {
               nb::gil_scoped_release release;
               files = Unwrap(s.ListFiles());
             }
             AnyDictList out;
             for (const auto& f : files) out.append(FileDict(f));
             return out;
           })
      .def(
          "rm",
          [](client::Session& s, const std::string& remote) {
            nb::gil_scoped_release release;
            Check(s.RemoveFile(remote));
          },
          "remote"_a)
      .def(
          "load",
          [](client::Session& s, const std::string& remote) {
            nb::gil_scoped_release release;
            return Unwrap(s.LoadModule(remote));
          },
          "remote"_a, nb::keep_alive<0, 1>())
      .def(
          "alloc",
          [](client::Session& s, const std::vector<int64_t>& shape, const std::string& dtype) {
            DLDataType t = Unwrap(ParseDType(dtype));
            nb::gil_scoped_release release;
            return Unwrap(s.AllocTensor(shape, t));
          },
          "shape"_a, "dtype"_a, nb::keep_alive<0, 1>())
      .def("close", [](client::Session& s) {
        nb::gil_scoped_release release;
        Check(s.Close());
      });

  nb::class_<client::LocalServer>(m, "LocalServer",
                                  "A crosstune-server (or any program that prints its listening "
                                  "line) started on this machine, stopped with this object.")
      .def(nb::init<>())
      .def(
          "start",
          [](client::LocalServer& s, const std::string& binary,
             const std::vector<std::string>& args, const std::string& stderr_log,
             double start_timeout_s) {
            client::LocalServerOptions o;
            o.binary = binary;
            o.args = args;
            o.stderr_log = stderr_log;
            o.start_timeout = Ms(start_timeout_s);
            nb::gil_scoped_release release;
            Check(s.Start(o));
          },
          "binary"_a, "args"_a = std::vector<std::string>{}, "stderr_log"_a = "",
          "start_timeout_s"_a = 30.0, "Starts a crosstune-server on 127.0.0.1, port 0.")
      .def(
          "start_argv",
          [](client::LocalServer& s, const std::vector<std::string>& argv, double timeout_s,
             const std::string& stderr_log) {
            nb::gil_scoped_release release;
            Check(s.Start(argv, Ms(timeout_s), stderr_log));
          },
          "argv"_a, "timeout_s"_a = 30.0, "stderr_log"_a = "",
          "Starts a program as given (a server under qemu, a tracker) and waits for its "
          "listening line.")
      .def("stop",
           [](client::LocalServer& s) {
             nb::gil_scoped_release release;
             s.Stop();
           })
      .def_prop_ro("running", &client::LocalServer::running)
      .def_prop_ro("address", &client::LocalServer::address)
      .def_prop_ro("port", &client::LocalServer::port)
      .def_prop_ro("pid", &client::LocalServer::pid)
      .def_prop_ro("listening_line", &client::LocalServer::listening_line);

  // --- Tracker, builder, tuner ------------------------------------------------------------------

  BindTracker(m);
  BindBuilder(m);
  BindTuner(m);
  BindModel(m);
}
