// backplane._fast_call: calls a registry op from Python for what a generated aten binding
// (torch.add) costs, instead of torch.ops' generic path (pybind11 conversion of every
// argument against the schema, which costs more than the call; bench/results/).
//
// A FastCall object is made once per op from its schema. Called, it converts the
// arguments it can convert exactly (tensors, Python float/int/bool, lists of ints) and
// calls the operator boxed through the dispatcher, with the GIL released as torch does:
// autograd, the Python dispatch key (FakeTensor, functionalization, TorchDispatchMode),
// profiling and plugin selection all happen below, in the dispatcher, as before.
//
// Everything else goes to the `fallback` (torch.ops' own callable for the op), untouched:
// a __torch_function__ mode or a tensor subclass overriding __torch_function__, JIT
// tracing, an argument of any other Python type (numpy scalars, 0-dim tensors for
// Scalars, None), a keyword it does not know, too many arguments, a missing one. So
// every error message and every result is torch's own; the fast path only ever takes
// calls whose conversion is unambiguous.
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <Python.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace {

// Enough for every registry op; an op with more arguments keeps torch's path.
constexpr size_t kMaxArguments = 16;

enum class Kind { Tensor, Float, Int, Bool, Scalar, IntList };

struct Argument {
  Kind kind;
  PyObject* name;  // interned str
  bool kwarg_only;
  std::optional<c10::IValue> default_value;
  std::optional<int32_t> list_size;  // int[4]: 4
};

struct FastCall {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fallback;
  c10::OperatorHandle* op;
  std::vector<Argument>* arguments;
  size_t positional;  // arguments that may be given by position
  size_t returns;
};

// Parameter and other subclasses keep the fast path when they disable __torch_function__
// (as torch.nn.Parameter does); any other override goes to torch's path.
PyObject* disabled_torch_function = nullptr;

bool plain_tensor(PyObject* obj) {
  if (THPVariable_CheckExact(obj)) return true;
  // The object's real type, not isinstance(): that trusts a __class__ attribute, which an
  // object only posing as a tensor (a mock with spec=torch.Tensor) has.
  if (!THPVariableClass || !PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(THPVariableClass))) return false;
  static PyObject* attr = PyUnicode_InternFromString("__torch_function__");
  PyObject* impl = _PyType_Lookup(Py_TYPE(obj), attr);  // borrowed
  return impl == nullptr || impl == disabled_torch_function;
}

std::optional<int64_t> exact_int(PyObject* obj) {
  if (!PyLong_CheckExact(obj)) return std::nullopt;
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return std::nullopt;
  }
  return static_cast<int64_t>(value);
}

// The IValue for `obj` as `arg`, or nullopt where torch's own conversion must decide.
std::optional<c10::IValue> convert(const Argument& arg, PyObject* obj) {
  switch (arg.kind) {
    case Kind::Tensor:
      if (!plain_tensor(obj)) return std::nullopt;
      return c10::IValue(THPVariable_Unpack(obj));
    case Kind::Float:
      if (PyFloat_CheckExact(obj)) return c10::IValue(PyFloat_AS_DOUBLE(obj));
      if (auto i = exact_int(obj)) return c10::IValue(static_cast<double>(*i));
      return std::nullopt;
    case Kind::Int:
      if (auto i = exact_int(obj)) return c10::IValue(*i);
      return std::nullopt;
    case Kind::Bool:
      if (PyBool_Check(obj)) return c10::IValue(obj == Py_True);
      return std::nullopt;
    case Kind::Scalar:
      if (PyFloat_CheckExact(obj)) return c10::IValue(c10::Scalar(PyFloat_AS_DOUBLE(obj)));
      if (PyBool_Check(obj)) return c10::IValue(c10::Scalar(obj == Py_True));
      if (auto i = exact_int(obj)) return c10::IValue(c10::Scalar(*i));
      return std::nullopt;
    case Kind::IntList: {
      if (!PyList_CheckExact(obj) && !PyTuple_CheckExact(obj)) return std::nullopt;
      PyObject* items = PySequence_Fast(obj, "");  // the list or tuple itself, new reference
      const Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
      std::optional<c10::IValue> out;
      if (!arg.list_size || n == *arg.list_size) {
        std::vector<int64_t> values;
        values.reserve(n);
        for (Py_ssize_t i = 0; i < n; ++i) {
          auto v = exact_int(PySequence_Fast_GET_ITEM(items, i));
          if (!v) break;
          values.push_back(*v);
        }
        if (static_cast<Py_ssize_t>(values.size()) == n) out = c10::IValue(std::move(values));
      }
      Py_DECREF(items);
      return out;
    }
  }
  return std::nullopt;
}

// Marks the reused stack busy, and empties it when the call ends however it ends.
class StackLease {
 public:
  StackLease(torch::jit::Stack& stack, bool* in_use) : stack_(stack), in_use_(in_use) {
    if (in_use_) *in_use_ = true;
  }
  ~StackLease() {
    stack_.clear();
    if (in_use_) *in_use_ = false;
  }
  StackLease(const StackLease&) = delete;
  StackLease& operator=(const StackLease&) = delete;

 private:
  torch::jit::Stack& stack_;
  bool* in_use_;
};

class WithoutGil {
 public:
  WithoutGil() : state_(PyEval_SaveThread()) {}
  ~WithoutGil() { PyEval_RestoreThread(state_); }
  WithoutGil(const WithoutGil&) = delete;
  WithoutGil& operator=(const WithoutGil&) = delete;

 private:
  PyThreadState* state_;
};

PyObject* call_fallback(FastCall* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

// The arguments in schema order, or false where torch's path must take the call.
bool bind(FastCall* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, torch::jit::Stack& stack) {
  const auto& schema_args = *self->arguments;
  if (static_cast<size_t>(nargs) > self->positional) return false;
  std::array<PyObject*, kMaxArguments> given;  // only the schema's first entries are used
  std::fill_n(given.begin(), schema_args.size(), nullptr);
  std::copy_n(args, nargs, given.begin());
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    size_t at = schema_args.size();
    for (size_t j = 0; j < schema_args.size() && at == schema_args.size(); ++j)
      if (key == schema_args[j].name || PyUnicode_Compare(key, schema_args[j].name) == 0) at = j;
    if (PyErr_Occurred()) PyErr_Clear();
    if (at == schema_args.size() || given[at] != nullptr) return false;
    given[at] = args[nargs + k];
  }
  for (size_t j = 0; j < schema_args.size(); ++j) {
    if (given[j] == nullptr) {
      if (!schema_args[j].default_value) return false;
      stack.push_back(*schema_args[j].default_value);
      continue;
    }
    auto value = convert(schema_args[j], given[j]);
    if (!value) return false;
    stack.push_back(std::move(*value));
  }
  return true;
}

PyObject* fast_call_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<FastCall*>(callable);
  // Modes and tracing see the call through torch's path, as they would without Backplane.
  if (at::impl::torch_function_mode_enabled() || torch::jit::tracer::isTracing())
    return call_fallback(self, args, nargsf, kwnames);
  // One stack per thread, reused (a call that comes back here from inside a kernel, a
  // Python kernel or mode calling another op, gets a fresh one).
  thread_local torch::jit::Stack reused;
  thread_local bool in_use = false;
  torch::jit::Stack fresh;
  torch::jit::Stack& stack = in_use ? fresh : reused;
  const StackLease lease(stack, &stack == &reused ? &in_use : nullptr);
  HANDLE_TH_ERRORS  // from here on a C++ exception (std::bad_alloc included) becomes a Python one
  if (!bind(self, args, PyVectorcall_NARGS(nargsf), kwnames, stack)) return call_fallback(self, args, nargsf, kwnames);
  {
    const WithoutGil no_gil;  // as torch's own bindings run a kernel
    self->op->callBoxed(stack);
  }
  if (self->returns == 0) Py_RETURN_NONE;
  if (self->returns == 1) return THPVariable_Wrap(std::move(stack[0]).toTensor());
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(self->returns));
  if (tuple == nullptr) return nullptr;
  for (size_t i = 0; i < self->returns; ++i) {
    PyObject* item = THPVariable_Wrap(std::move(stack[i]).toTensor());
    if (item == nullptr) {
      Py_DECREF(tuple);
      return nullptr;
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), item);
  }
  return tuple;
  END_HANDLE_TH_ERRORS
}

void fast_call_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<FastCall*>(obj);
  Py_XDECREF(self->fallback);
  if (self->arguments) {
    for (auto& a : *self->arguments) Py_XDECREF(a.name);
    delete self->arguments;
  }
  delete self->op;
  Py_TYPE(obj)->tp_free(obj);
}

PyTypeObject FastCallType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// The kind of each argument, or nullopt where the schema holds a type the fast path does
// not convert (the op then keeps torch's path entirely).
std::optional<Argument> describe(const c10::Argument& a) {
  const auto& type = a.type();
  Argument out{Kind::Tensor, nullptr, a.kwarg_only(), a.default_value(), std::nullopt};
  switch (type->kind()) {
    case c10::TypeKind::TensorType: out.kind = Kind::Tensor; break;
    case c10::TypeKind::FloatType: out.kind = Kind::Float; break;
    case c10::TypeKind::IntType: out.kind = Kind::Int; break;
    case c10::TypeKind::BoolType: out.kind = Kind::Bool; break;
    case c10::TypeKind::NumberType: out.kind = Kind::Scalar; break;
    case c10::TypeKind::ListType:
      if (type->containedType(0)->kind() != c10::TypeKind::IntType) return std::nullopt;
      out.kind = Kind::IntList;
      out.list_size = a.N();
      break;
    default:
      return std::nullopt;
  }
  out.name = PyUnicode_InternFromString(a.name().c_str());
  if (out.name == nullptr) {  // out of memory: the op keeps torch's path
    PyErr_Clear();
    return std::nullopt;
  }
  return out;
}

// make(qualified_name, overload_name, fallback) -> FastCall, or None where the op's
// schema has an argument or return the fast path does not handle.
PyObject* make(PyObject* /*module*/, PyObject* args) {
  const char* name = nullptr;
  const char* overload = nullptr;
  PyObject* fallback = nullptr;
  if (!PyArg_ParseTuple(args, "ssO:make", &name, &overload, &fallback)) return nullptr;
  if (!PyCallable_Check(fallback)) {
    PyErr_SetString(PyExc_TypeError, "make: fallback must be callable");
    return nullptr;
  }
  HANDLE_TH_ERRORS
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!handle) {
    PyErr_Format(PyExc_ValueError, "no operator %s.%s is registered", name, overload);
    return nullptr;
  }
  const auto& schema = handle->schema();
  if (schema.is_vararg() || schema.is_varret() || schema.arguments().size() > kMaxArguments) Py_RETURN_NONE;
  for (const auto& r : schema.returns())
    if (r.type()->kind() != c10::TypeKind::TensorType) Py_RETURN_NONE;
  auto arguments = std::make_unique<std::vector<Argument>>();
  size_t positional = 0;
  for (const auto& a : schema.arguments()) {
    auto described = describe(a);
    if (!described) {
      for (auto& d : *arguments) Py_XDECREF(d.name);
      Py_RETURN_NONE;
    }
    if (!described->kwarg_only) ++positional;
    arguments->push_back(std::move(*described));
  }
  auto* self = PyObject_New(FastCall, &FastCallType);
  if (self == nullptr) return nullptr;
  self->vectorcall = fast_call_vectorcall;
  Py_INCREF(fallback);
  self->fallback = fallback;
  self->op = new c10::OperatorHandle(*handle);
  self->arguments = arguments.release();
  self->positional = positional;
  self->returns = schema.returns().size();
  return reinterpret_cast<PyObject*>(self);
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"make", make, METH_VARARGS,
     "make(qualified_name, overload_name, fallback) -> a fast callable for the op, or None"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_fast_call", "Calls registry ops from Python at aten's cost.", -1,
                          methods};

}  // namespace

PyMODINIT_FUNC PyInit__fast_call() {
  FastCallType.tp_name = "backplane._fast_call.FastCall";
  FastCallType.tp_basicsize = sizeof(FastCall);
  FastCallType.tp_dealloc = fast_call_dealloc;
  FastCallType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  FastCallType.tp_vectorcall_offset = offsetof(FastCall, vectorcall);
  FastCallType.tp_call = PyVectorcall_Call;
  FastCallType.tp_doc = "A registry op called from Python through the dispatcher, boxed";
  if (PyType_Ready(&FastCallType) < 0) return nullptr;
  // torch._C._disabled_torch_function_impl: what Parameter's __torch_function__ is.
  PyObject* torch_c = PyImport_ImportModule("torch._C");
  if (torch_c == nullptr) return nullptr;
  disabled_torch_function = PyObject_GetAttrString(torch_c, "_disabled_torch_function_impl");
  Py_DECREF(torch_c);
  if (disabled_torch_function == nullptr) return nullptr;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  Py_INCREF(&FastCallType);
  if (PyModule_AddObject(module, "FastCall", reinterpret_cast<PyObject*>(&FastCallType)) < 0) {
    Py_DECREF(&FastCallType);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
