// driftscope._core: the streaming writer.
//
// Payloads come through the buffer protocol (numpy arrays, torch tensors viewed as uint8 numpy
// arrays, bytes, memoryview), so a contiguous CPU tensor reaches the C++ writer with no copy.
// The GIL is released for the write itself; the buffer stays exported (and so alive) meanwhile.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "py_core.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/writer.hpp"

namespace driftscope::py {

namespace {

struct PyWriter {
  // shared: a write() running without the GIL keeps the writer alive while another thread closes.
  std::shared_ptr<Writer> writer;
  std::string path;
};

class Buffer {
 public:
  explicit Buffer(nb::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      raise(Errc::invalid_argument,
            std::string("payload must be a C-contiguous buffer (numpy array, bytes, memoryview), "
                        "got ") + Py_TYPE(obj.ptr())->tp_name);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { PyBuffer_Release(&view_); }
  std::span<const std::byte> bytes() const {
    return {static_cast<const std::byte*>(view_.buf), static_cast<size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

SyncPolicy parse_sync(std::string_view s) {
  if (s == "close") return SyncPolicy::on_close;
  if (s == "record") return SyncPolicy::every_record;
  if (s == "bytes") return SyncPolicy::every_bytes;
  raise(Errc::invalid_argument, "sync '" + std::string(s) + "' is not one of close, record, bytes");
}

// (kind, axis, scales, zero_points) as produced by driftscope._writer.
using EncodingArg = std::tuple<std::string, uint32_t, std::vector<double>, std::vector<int64_t>>;

TensorInfo make_info(std::string name, std::string_view dtype, std::vector<uint64_t> shape,
                     std::string op_type, std::string_view role, uint16_t role_index,
                     std::optional<uint32_t> occurrence, std::optional<uint64_t> exec_index,
                     std::vector<std::string> axes, KeyValues attrs,
                     std::optional<EncodingArg> encoding) {
  TensorInfo info;
  info.name = std::move(name);
  info.dtype = parse_dtype_or_raise(dtype);
  info.shape = std::move(shape);
  info.op_type = std::move(op_type);
  info.role = parse_role(role);
  info.role_index = role_index;
  info.occurrence = occurrence.value_or(kAutoOccurrence);
  info.exec_index = exec_index.value_or(kAutoIndex);
  info.axes = std::move(axes);
  info.attrs = std::move(attrs);
  if (encoding) {
    auto& [kind, axis, scales, zero_points] = *encoding;
    if (kind == "affine_tensor")
      info.encoding.kind = EncodingKind::affine_tensor;
    else if (kind == "affine_channel")
      info.encoding.kind = EncodingKind::affine_channel;
    else if (kind != "raw")
      raise(Errc::invalid_argument,
            "encoding '" + kind + "' is not one of raw, affine_tensor, affine_channel");
    info.encoding.axis = axis;
    info.encoding.scales = std::move(scales);
    info.encoding.zero_points = std::move(zero_points);
  }
  return info;
}

nb::dict result_dict(const WriteResult& r) {
  nb::dict d;
  d["status"] = r.status == WriteStatus::written    ? "written"
                : r.status == WriteStatus::filtered ? "filtered"
                                                    : "over_budget";
  d["exec_index"] = r.exec_index;
  d["occurrence"] = r.occurrence;
  d["offset"] = r.status == WriteStatus::written ? nb::object(nb::int_(r.offset)) : nb::object(nb::none());
  return d;
}

PyWriter create_writer(const std::string& path, KeyValues metadata, std::string filter,
                       std::string_view sync, uint64_t sync_bytes, bool append, bool overwrite,
                       bool background, uint64_t queue_bytes, std::optional<uint64_t> salt,
                       bool drop_behind) {
  WriterOptions o;
  o.metadata = std::move(metadata);
  o.filter = std::move(filter);
  o.sync = parse_sync(sync);
  o.sync_bytes = sync_bytes;
  o.append = append;
  o.overwrite = overwrite;
  o.background = background;
  o.queue_bytes = queue_bytes;
  o.drop_behind = drop_behind;
  if (salt) {
    o.fixed_salt = true;
    o.salt = *salt;
  }
  std::optional<Result<std::unique_ptr<Writer>>> made;
  {
    nb::gil_scoped_release unlocked;  // append validates (reads) the existing file
    made.emplace(Writer::create(path, o));
  }
  return PyWriter{std::shared_ptr<Writer>(unwrap(std::move(*made))), path};
}

}  // namespace

void bind_writer(nb::module_& m) {
  nb::class_<PyWriter>(m, "Writer")
      .def_static("create", &create_writer, nb::arg("path"), nb::arg("metadata"),
                  nb::arg("filter"), nb::arg("sync"), nb::arg("sync_bytes"), nb::arg("append"),
                  nb::arg("overwrite"), nb::arg("background"), nb::arg("queue_bytes"),
                  nb::arg("salt").none(), nb::arg("drop_behind") = false)
      .def_prop_ro("path", [](const PyWriter& w) { return w.path; })
      .def(
          "write",
          [](PyWriter& w, std::string name, nb::handle data, std::string_view dtype,
             std::vector<uint64_t> shape, std::string op_type, std::string_view role,
             uint16_t role_index, std::optional<uint32_t> occurrence,
             std::optional<uint64_t> exec_index, std::vector<std::string> axes, KeyValues attrs,
             std::optional<EncodingArg> encoding) {
            TensorInfo info = make_info(std::move(name), dtype, std::move(shape),
                                        std::move(op_type), role, role_index, occurrence,
                                        exec_index, std::move(axes), std::move(attrs),
                                        std::move(encoding));
            Buffer buf(data);
            std::shared_ptr<Writer> keep = w.writer;
            std::optional<Result<WriteResult>> r;
            {
              nb::gil_scoped_release unlocked;
              r.emplace(keep->write(info, buf.bytes()));
            }
            return result_dict(unwrap(std::move(*r)));
          },
          nb::arg("name"), nb::arg("data"), nb::arg("dtype"), nb::arg("shape"),
          nb::arg("op_type"), nb::arg("role"), nb::arg("role_index"),
          nb::arg("occurrence").none(), nb::arg("exec_index").none(), nb::arg("axes"),
          nb::arg("attrs"), nb::arg("encoding").none())
      .def(
          "write_summary",
          [](PyWriter& w, std::string name, nb::handle data, std::string_view dtype,
             std::vector<uint64_t> shape, std::string op_type, std::string_view role,
             uint16_t role_index, std::optional<uint32_t> occurrence,
             std::optional<uint64_t> exec_index, std::vector<std::string> axes, KeyValues attrs,
             std::optional<EncodingArg> encoding, uint32_t projection_dim, uint64_t seed) {
            TensorInfo info = make_info(std::move(name), dtype, std::move(shape),
                                        std::move(op_type), role, role_index, occurrence,
                                        exec_index, std::move(axes), std::move(attrs),
                                        std::move(encoding));
            Buffer buf(data);
            std::shared_ptr<Writer> keep = w.writer;
            std::optional<Result<WriteResult>> r;
            {
              nb::gil_scoped_release unlocked;
              auto s = summarize(info, buf.bytes(), projection_dim, seed);
              if (s.ok())
                r.emplace(keep->write_summary(info, *s));
              else
                r.emplace(std::move(s).error());
            }
            return result_dict(unwrap(std::move(*r)));
          },
          nb::arg("name"), nb::arg("data"), nb::arg("dtype"), nb::arg("shape"),
          nb::arg("op_type"), nb::arg("role"), nb::arg("role_index"),
          nb::arg("occurrence").none(), nb::arg("exec_index").none(), nb::arg("axes"),
          nb::arg("attrs"), nb::arg("encoding").none(), nb::arg("projection_dim"),
          nb::arg("seed"))
      .def("wants", [](const PyWriter& w, std::string_view name) { return w.writer->wants(name); })
      .def("flush", [](PyWriter& w) {
        std::shared_ptr<Writer> keep = w.writer;
        std::optional<Result<void>> r;
        {
          nb::gil_scoped_release unlocked;
          r.emplace(keep->flush());
        }
        check(std::move(*r));
      })
      .def("close", [](PyWriter& w) {
        std::shared_ptr<Writer> keep = w.writer;
        std::optional<Result<void>> r;
        {
          nb::gil_scoped_release unlocked;
          r.emplace(keep->close());
        }
        check(std::move(*r));
      })
      .def_prop_ro("records_written", [](const PyWriter& w) { return w.writer->records_written(); })
      .def_prop_ro("bytes_written", [](const PyWriter& w) { return w.writer->bytes_written(); })
      .def_prop_ro("salt", [](const PyWriter& w) { return w.writer->salt(); });
}

}  // namespace driftscope::py
