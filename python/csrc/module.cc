// SPDX-License-Identifier: Apache-2.0
// The Python module conflux._torch_backend: ProcessGroupConflux and its Options as torch.distributed types.
// conflux/torch/__init__.py registers the backend with torch.distributed.Backend.register_backend.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "host_memory.h"
#include "process_group_conflux.h"

namespace py = pybind11;
using cfx::torchext::ProcessGroupConflux;
namespace tx = cfx::torchext;

PYBIND11_MODULE(_torch_backend, m) {
  m.doc() = "The torch.distributed backend 'conflux' (import conflux.torch to register it).";
  m.def(
      "_use_shared_host_memory",
      [](size_t minBytes, const std::string& libraryPath) {
        tx::loadApi(libraryPath);
        tx::useSharedHostMemory(minBytes);
      },
      py::arg("min_bytes"), py::arg("library_path"),
      "CPU tensors of at least min_bytes come from ncclMemAlloc blocks, which same-host peers read in place");
  m.def("_stop_shared_host_memory", &tx::stopSharedHostMemory, "Puts PyTorch's previous CPU allocator back");
  m.def("_shared_host_stats", [] {
    const tx::SharedHostStats s = tx::sharedHostStats();
    py::dict d;
    d["installed"] = s.installed;
    d["min_bytes"] = s.minBytes;
    d["blocks_made"] = s.blocksMade;
    d["reuses"] = s.reuses;
    d["fallbacks"] = s.fallbacks;
    d["live_bytes"] = s.liveBytes;
    d["cached_bytes"] = s.cachedBytes;
    return d;
  });
  // The base classes below are torch's; their Python types must exist before ours derive from them.
  py::module::import("torch.distributed");

  auto pg = py::class_<ProcessGroupConflux, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupConflux>>(
      m, "ProcessGroupConflux",
      "A process group on Conflux. Made by torch.distributed.init_process_group('conflux') and new_group(); "
      "not meant to be constructed directly.");

  py::class_<ProcessGroupConflux::Options, c10d::ProcessGroup::Options,
             c10::intrusive_ptr<ProcessGroupConflux::Options>>(
      pg, "Options",
      "Options of a 'conflux' group: timeout bounds every operation from its call (the communicator is revoked when "
      "one runs past it); codec is the group's default codec (cfxCommSetCodec). Pass as init_process_group(..., "
      "pg_options=...) or new_group(..., pg_options=...); the timeout given here wins over the timeout argument.")
      .def(py::init<std::chrono::milliseconds, std::string, std::string>(),
           py::arg("timeout") = kProcessGroupDefaultTimeout, py::arg("codec") = "", py::arg("codec_mode") = "auto")
      .def_readwrite("codec", &ProcessGroupConflux::Options::codec,
                     "The group's default codec as cfxCodecParse reads it (bf16, int8, topk:0.01, ...); '' for the "
                     "library's default (CFX_CODEC)")
      .def_readwrite("codec_mode", &ProcessGroupConflux::Options::codecMode,
                     "auto (where the planner prices the codec cheaper: slow links between hosts), always, never");

  pg.def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     c10::intrusive_ptr<ProcessGroupConflux::Options> options, const std::string& libraryPath) {
           return c10::make_intrusive<ProcessGroupConflux>(store, rank, size, std::move(options), libraryPath);
         }),
         py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"), py::arg("library_path"),
         py::call_guard<py::gil_scoped_release>())
      .def("_split", &ProcessGroupConflux::split, py::arg("ranks"), py::arg("options"),
           "Collective over this group: the ranks in `ranks` form a new group (ncclCommSplit); every other rank "
           "calls _split_nocolor().",
           py::call_guard<py::gil_scoped_release>())
      .def("_split_nocolor", &ProcessGroupConflux::splitNoColor, py::call_guard<py::gil_scoped_release>())
      .def("_abort", &ProcessGroupConflux::abort,
           "Aborts the communicator: pending operations fail, later ones are refused. Never waits for peers.",
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("timeout", &ProcessGroupConflux::timeout)
      .def(
          "_compress_stats",
          [](ProcessGroupConflux& self) {
            cfxCompressStats s;
            {
              py::gil_scoped_release nogil;
              s = self.compressStats();
            }
            py::dict d;
            d["compressed"] = s.compressed != 0;
            d["codec"] = std::string(s.codec);
            d["algorithm"] = std::string(s.algorithm);
            d["buffer_bytes"] = s.bufferBytes;
            d["wire_bytes"] = s.wireBytes;
            return d;
          },
          "cfxCommGetCompressStats of the group's last operation that carried a codec, as a dict");
}
