// driftscope._core: the reader, its records, and numpy arrays over the mapped file.
//
// Zero-copy contract: an array of a record whose dtype numpy has (every TDUMP dtype except bf16
// and the fp8 pair) is a read-only view of the mapped payload. The array's owner is a capsule
// holding a shared_ptr to the reader, so the mapping lives as long as any array over it, even
// after the Dump (and every Record) is gone.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "py_core.hpp"
#include "driftscope/decode.hpp"
#include "driftscope/reader.hpp"

namespace driftscope::py {

namespace {

using ReaderPtr = std::shared_ptr<const Reader>;

struct PyRecord {
  ReaderPtr reader;
  size_t index = 0;
  const Record& rec() const { return reader->records()[index]; }
};

nb::capsule keep_alive(ReaderPtr reader) {
  auto* held = new ReaderPtr(std::move(reader));
  return nb::capsule(held, [](void* p) noexcept { delete static_cast<ReaderPtr*>(p); });
}

template <class T>
nb::capsule own_vector(std::vector<T>* v) {
  return nb::capsule(v, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
}

// numpy has no bfloat16 or fp8: those return nullopt and are decoded to float32 instead.
std::optional<nb::dlpack::dtype> numpy_dtype(DType t) {
  using nb::dlpack::dtype_code;
  auto make = [](dtype_code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::f64: return make(dtype_code::Float, 64);
    case DType::f32: return make(dtype_code::Float, 32);
    case DType::f16: return make(dtype_code::Float, 16);
    case DType::i64: return make(dtype_code::Int, 64);
    case DType::i32: return make(dtype_code::Int, 32);
    case DType::i16: return make(dtype_code::Int, 16);
    case DType::i8: return make(dtype_code::Int, 8);
    case DType::u8: return make(dtype_code::UInt, 8);
    case DType::u16: return make(dtype_code::UInt, 16);
    case DType::u32: return make(dtype_code::UInt, 32);
    case DType::u64: return make(dtype_code::UInt, 64);
    case DType::boolean: return make(dtype_code::Bool, 8);
    case DType::bf16:
    case DType::f8e4m3fn:
    case DType::f8e5m2: return std::nullopt;
  }
  return std::nullopt;
}

std::vector<size_t> shape_of(const TensorInfo& info) {
  return {info.shape.begin(), info.shape.end()};
}

nb::object view_array(const ReaderPtr& reader, const Record& r, nb::dlpack::dtype dt) {
  auto shape = shape_of(r.info);
  // The payload pointer of an empty tensor may sit at the end of the mapping; numpy never reads it.
  const std::byte* data = reader->bytes().data() + r.payload_offset;
  nb::ndarray<nb::numpy, nb::ro> arr(data, shape.size(), shape.data(), keep_alive(reader), nullptr,
                                     dt, nb::device::cpu::value);
  return nb::cast(std::move(arr), nb::rv_policy::reference);
}

template <class T>
nb::object decoded_array(const Record& r) {
  uint64_t n = r.info.numel();
  auto* values = new std::vector<T>();
  Result<void> status;
  {
    nb::gil_scoped_release unlocked;
    values->resize(static_cast<size_t>(n));
    status = decode(r.info, r.payload, 0, std::span<T>(*values));
  }
  if (!status.ok()) {
    delete values;
    raise(status.error());
  }
  auto shape = shape_of(r.info);
  T* data = values->data();
  nb::ndarray<nb::numpy, T> arr(data, shape.size(), shape.data(), own_vector(values));
  return nb::cast(std::move(arr), nb::rv_policy::reference);
}

void require_tensor(const Record& r) {
  if (r.kind != RecordKind::tensor)
    raise(Errc::unsupported,
          "'" + r.info.name + "' (occurrence " + std::to_string(r.info.occurrence) +
              ") is a SUMMARY record (light mode): it holds statistics, not values; use "
              "record.summary");
}

// `as`: "" keeps stored values (zero-copy where numpy has the dtype, bf16/fp8 widened to f32);
// "float32"/"float64" decode every dtype, dequantising affine encodings.
nb::object record_values(const ReaderPtr& reader, const Record& r, std::string_view as) {
  require_tensor(r);
  if (as.empty()) {
    if (auto dt = numpy_dtype(r.info.dtype)) return view_array(reader, r, *dt);
    return decoded_array<float>(r);
  }
  DType want = parse_dtype_or_raise(as);
  if (want == DType::f32) return decoded_array<float>(r);
  if (want == DType::f64) return decoded_array<double>(r);
  raise(Errc::invalid_argument,
        "values can be decoded to float32 or float64, not '" + std::string(as) + "'");
}

nb::dict key_values(const KeyValues& kv) {
  nb::dict d;
  for (const auto& [k, v] : kv) d[nb::str(k.data(), k.size())] = nb::str(v.data(), v.size());
  return d;
}

nb::object encoding_of(const Encoding& e) {
  if (e.kind == EncodingKind::raw) return nb::none();
  nb::dict d;
  d["kind"] = e.kind == EncodingKind::affine_tensor ? "affine_tensor" : "affine_channel";
  if (e.kind == EncodingKind::affine_channel) d["axis"] = e.axis;
  d["scales"] = nb::cast(e.scales);
  d["zero_points"] = nb::cast(e.zero_points);
  return d;
}

nb::dict stats_dict(const TensorStats& s) {
  nb::dict d;
  d["count"] = s.count;
  d["nan_count"] = s.nan_count;
  d["posinf_count"] = s.posinf_count;
  d["neginf_count"] = s.neginf_count;
  d["zero_count"] = s.zero_count;
  d["min"] = s.min;
  d["max"] = s.max;
  d["mean"] = s.mean;
  d["std"] = s.std;
  d["l2_norm"] = s.l2_norm;
  return d;
}

nb::object summary_of(const Record& r) {
  if (!r.summary()) return nb::none();
  const Summary& s = *r.summary();
  nb::dict d = stats_dict(s.stats);
  d["projection_seed"] = s.projection_seed;
  d["projection_kind"] = s.projection_kind;
  auto* proj = new std::vector<float>(s.projection);
  size_t dim = proj->size();
  nb::ndarray<nb::numpy, float> arr(proj->data(), 1, &dim, own_vector(proj));
  d["projection"] = nb::cast(std::move(arr), nb::rv_policy::reference);
  return d;
}

nb::tuple shape_tuple(const std::vector<uint64_t>& shape) {
  nb::list l;
  for (uint64_t d : shape) l.append(d);
  return nb::tuple(l);
}

nb::tuple axes_tuple(const std::vector<std::string>& axes) {
  nb::list l;
  for (const auto& a : axes) l.append(nb::str(a.data(), a.size()));
  return nb::tuple(l);
}

nb::dict integrity_dict(const Integrity& in) {
  nb::dict d;
  d["state"] = std::string(file_state_name(in.state));
  d["file_size"] = in.file_size;
  d["valid_end"] = in.valid_end;
  d["cut_offset"] = in.cut_offset == kNoOffset ? nb::object(nb::none()) : nb::int_(in.cut_offset);
  d["discarded_bytes"] = in.discarded_bytes;
  d["corruption"] = in.corruption ? make_exception(*in.corruption) : nb::object(nb::none());
  d["corrupt_name"] =
      in.corrupt_name.empty() ? nb::object(nb::none()) : nb::str(in.corrupt_name.c_str());
  nb::list warnings;
  for (const auto& w : in.warnings) warnings.append(make_exception(w));
  d["warnings"] = warnings;
  d["index_used"] = in.index_used;
  d["checksums_verified"] = in.checksums_verified;
  return d;
}

PyReader open_reader(const std::string& path, bool verify_payloads, bool use_index, bool resync) {
  OpenOptions options;
  options.verify = verify_payloads ? Verify::full : Verify::frames;
  options.use_index = use_index;
  options.resync = resync;
  std::optional<Result<Reader>> opened;
  {
    nb::gil_scoped_release unlocked;  // a full verify reads and checksums the whole file
    opened.emplace(Reader::open(path, options));
  }
  Reader reader = unwrap(std::move(*opened));
  return PyReader{std::make_shared<const Reader>(std::move(reader)), path};
}

std::optional<size_t> find_index(const Reader& reader, std::string_view name, uint32_t occurrence,
                                 std::string_view role, uint16_t role_index) {
  const Record* r = reader.find(name, occurrence, parse_role(role), role_index);
  if (!r) return std::nullopt;
  return static_cast<size_t>(r - reader.records().data());
}

}  // namespace

void bind_reader(nb::module_& m) {
  nb::class_<PyRecord>(m, "Record",
                       "One TENSOR or SUMMARY record of a dump (docs/format.md §3.3, §3.6).")
      .def_prop_ro("name", [](const PyRecord& p) { return p.rec().info.name; })
      .def_prop_ro("op_type", [](const PyRecord& p) { return p.rec().info.op_type; })
      .def_prop_ro("role", [](const PyRecord& p) { return std::string(role_name(p.rec().info.role)); })
      .def_prop_ro("role_index", [](const PyRecord& p) { return p.rec().info.role_index; })
      .def_prop_ro("occurrence", [](const PyRecord& p) { return p.rec().info.occurrence; })
      .def_prop_ro("exec_index", [](const PyRecord& p) { return p.rec().info.exec_index; })
      .def_prop_ro("dtype", [](const PyRecord& p) { return std::string(dtype_name(p.rec().info.dtype)); })
      .def_prop_ro("shape", [](const PyRecord& p) { return shape_tuple(p.rec().info.shape); })
      .def_prop_ro("numel", [](const PyRecord& p) { return p.rec().info.numel(); })
      .def_prop_ro("axes", [](const PyRecord& p) { return axes_tuple(p.rec().info.axes); })
      .def_prop_ro("attrs", [](const PyRecord& p) { return key_values(p.rec().info.attrs); })
      .def_prop_ro("encoding", [](const PyRecord& p) { return encoding_of(p.rec().info.encoding); })
      .def_prop_ro("kind", [](const PyRecord& p) {
        return p.rec().kind == RecordKind::summary ? "summary" : "tensor";
      })
      .def_prop_ro("offset", [](const PyRecord& p) { return p.rec().offset; })
      .def_prop_ro("size", [](const PyRecord& p) { return p.rec().size; })
      .def_prop_ro("payload_offset", [](const PyRecord& p) { return p.rec().payload_offset; })
      .def_prop_ro("nbytes", [](const PyRecord& p) { return p.rec().payload.size(); })
      .def_prop_ro("summary", [](const PyRecord& p) { return summary_of(p.rec()); },
                   "Statistics and projection of a SUMMARY record (dict), None for TENSOR.")
      .def(
          "numpy", [](const PyRecord& p, std::string_view dtype) {
            return record_values(p.reader, p.rec(), dtype);
          },
          nb::arg("dtype") = "",
          "The values: a read-only zero-copy view when numpy has the dtype, bf16/fp8 decoded to "
          "float32; dtype='float32'|'float64' decodes (and dequantises) any dtype.")
      .def(
          "stats",
          [](const PyRecord& p) {
            const Record& r = p.rec();
            if (r.kind == RecordKind::summary) {
              nb::dict d = stats_dict(r.summary()->stats);
              return d;
            }
            std::optional<Result<TensorStats>> s;
            {
              nb::gil_scoped_release unlocked;
              s.emplace(compute_stats(r.info, r.payload));
            }
            return stats_dict(unwrap(std::move(*s)));
          },
          "count, NaN/Inf/zero counts, min, max, mean, std, L2 norm (float64 accumulation).")
      .def("verify", [](const PyRecord& p) {
        std::optional<Result<void>> s;
        {
          nb::gil_scoped_release unlocked;
          s.emplace(p.reader->verify_payload(p.rec()));
          // A CRC over zeros read past a cut is not the error: the cut is.
          if (!*s) {
            if (auto c = p.reader->check_unchanged(); !c) s.emplace(std::move(c));
          }
        }
        check(std::move(*s));
      }, "Checks the record's CRC (needed after open(..., verify=False)).")
      .def("__repr__", [](const PyRecord& p) {
        const auto& i = p.rec().info;
        std::string shape;
        for (size_t k = 0; k < i.shape.size(); ++k)
          shape += (k ? ", " : "") + std::to_string(i.shape[k]);
        if (i.shape.size() == 1) shape += ",";
        return "<Record #" + std::to_string(i.exec_index) + " " + i.name + " occurrence=" +
               std::to_string(i.occurrence) + " " + std::string(role_name(i.role)) + "[" +
               std::to_string(i.role_index) + "] " + std::string(dtype_name(i.dtype)) + " (" +
               shape + ")" + (p.rec().kind == RecordKind::summary ? " summary" : "") + ">";
      });

  nb::class_<PyReader>(m, "Reader")
      .def_static("open", &open_reader, nb::arg("path"), nb::arg("verify") = true,
                  nb::arg("use_index") = true, nb::arg("resync") = false)
      .def_prop_ro("path", [](const PyReader& p) { return p.path; })
      .def("check_unchanged", [](const PyReader& p) { check(p.reader->check_unchanged()); },
           "DumpIOError 'file changed while reading' when the file shrank since it was opened.")
      // record_count(): len() of a million-record dump does not build every Record.
      .def("__len__", [](const PyReader& p) { return p.reader->record_count(); })
      .def("record", [](const PyReader& p, size_t i) {
        if (i >= p.reader->record_count())
          raise(Errc::invalid_argument, "record index " + std::to_string(i) + " out of range (" +
                                            std::to_string(p.reader->record_count()) + " records)");
        return PyRecord{p.reader, i};
      })
      .def("find", [](const PyReader& p, std::string_view name, uint32_t occurrence,
                      std::string_view role, uint16_t role_index) -> std::optional<PyRecord> {
        auto i = find_index(*p.reader, name, occurrence, role, role_index);
        if (!i) return std::nullopt;
        return PyRecord{p.reader, *i};
      }, nb::arg("name"), nb::arg("occurrence") = 0, nb::arg("role") = "output",
         nb::arg("role_index") = 0)
      .def("find_all", [](const PyReader& p, std::string_view name) {
        std::vector<PyRecord> out;
        for (const Record* r : p.reader->find_all(name))
          out.push_back(PyRecord{p.reader, static_cast<size_t>(r - p.reader->records().data())});
        return out;
      })
      .def_prop_ro("metadata", [](const PyReader& p) { return key_values(p.reader->header().metadata); })
      .def_prop_ro("header", [](const PyReader& p) {
        const FileHeader& h = p.reader->header();
        nb::dict d;
        d["version"] = nb::make_tuple(h.version_major, h.version_minor);
        d["salt"] = h.salt;
        d["required_features"] = h.required_features;
        d["optional_features"] = h.optional_features;
        d["header_length"] = h.header_length;
        return d;
      })
      .def_prop_ro("integrity", [](const PyReader& p) { return integrity_dict(p.reader->integrity()); });
}

}  // namespace driftscope::py
