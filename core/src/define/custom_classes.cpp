// Registers the registry's custom classes (torchbind) from their ClassDefs: one
// generic C++ holder for every class, and boxed methods built from the YAML schemas.
//
// Each class gets __init__ (its state), __getstate__/__setstate__ (so an object
// survives torch.save, torch.export and .pt2 packaging, and is rebuilt by AOTInductor's
// loader from C++ with no Python), __obj_flatten__ (so torch.export and torch.compile
// can trace it with the fake class the Python package makes from the same YAML), and
// its YAML methods: `calls: op` forwards the method's arguments to backplane::op
// through the dispatcher, so it runs on the backend of its tensors; `returns: field`
// returns one state field.
#include "define/custom_classes.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <torch/custom_class.h>

namespace backplane::detail {
namespace {

// Every registry class shares this holder; its state is the constructor's arguments,
// one IValue per ClassDef::state field. Only capsules are ever made of it (never
// IValue(intrusive_ptr<RegistryObject>)), so sharing one C++ type between classes is
// safe: torch's type-id map, which would tell them apart, is never consulted.
struct RegistryObject : torch::CustomClassHolder {
  explicit RegistryObject(std::vector<c10::IValue> fields) : state(std::move(fields)) {}
  std::vector<c10::IValue> state;
};

c10::TypePtr field_type(const std::string& type) {
  if (type == "int") return c10::IntType::get();
  if (type == "float") return c10::FloatType::get();
  if (type == "bool") return c10::BoolType::get();
  return c10::StringType::get();  // the parser admits nothing else
}

const RegistryObject& object_of(const c10::IValue& self, const ClassDef& cls) {
  const auto& obj = self.toObject();
  const c10::IValue slot = obj->getSlot(0);
  TORCH_CHECK(slot.isCapsule(), "backplane::", cls.name, " object was used before __init__ or __setstate__ ran");
  return *static_cast<const RegistryObject*>(slot.toCapsule().get());
}

void set_object(const c10::IValue& self, std::vector<c10::IValue> state) {
  self.toObject()->setSlot(0, c10::IValue::make_capsule(c10::make_intrusive<RegistryObject>(std::move(state))));
}

c10::Argument returns_of(c10::TypePtr type) { return c10::Argument("", std::move(type)); }

c10::FunctionSchema method_schema(const std::string& name, const c10::ClassTypePtr& cls,
                                  std::vector<c10::Argument> args, std::vector<c10::Argument> returns) {
  args.insert(args.begin(), c10::Argument("self", cls));
  return c10::FunctionSchema(name, "", std::move(args), std::move(returns));
}

c10::TypePtr state_tuple_type(const ClassDef& cls) {
  std::vector<c10::TypePtr> types;
  for (const auto& f : cls.state) types.push_back(field_type(f.type));
  return c10::TupleType::create(std::move(types));
}

void define_class(torch::Library& m, const ClassDef& cls) {
  auto registered = m.class_<RegistryObject>(cls.name);
  const c10::ClassTypePtr type = torch::getCustomClass(std::string("__torch__.torch.classes.") + kNamespace + "." + cls.name);
  TORCH_INTERNAL_ASSERT(type, "class ", cls.name, " was not registered");
  const size_t n_fields = cls.state.size();

  // __init__(self, <state...>) -> NoneType
  const auto init = torch::jit::parseSchema("__init__" + cls.init + " -> ()");
  registered._def_unboxed(
      "__init__",
      [n_fields](torch::jit::Stack& stack) {
        std::vector<c10::IValue> state(stack.end() - n_fields, stack.end());
        c10::IValue self = stack[stack.size() - n_fields - 1];
        torch::jit::drop(stack, n_fields + 1);
        set_object(self, std::move(state));
        stack.emplace_back();
      },
      method_schema("__init__", type, init.arguments(), {returns_of(c10::NoneType::get())}), cls.doc);

  // __getstate__(self) -> (fields...); __setstate__(self, (fields...)) -> NoneType
  const c10::TypePtr state_type = state_tuple_type(cls);
  registered._def_unboxed(
      "__getstate__",
      [&cls](torch::jit::Stack& stack) {
        c10::IValue self = torch::jit::pop(stack);
        stack.emplace_back(c10::ivalue::Tuple::create(object_of(self, cls).state));
      },
      method_schema("__getstate__", type, {}, {returns_of(state_type)}));
  registered._def_unboxed(
      "__setstate__",
      [&cls](torch::jit::Stack& stack) {
        c10::IValue state = torch::jit::pop(stack);
        c10::IValue self = torch::jit::pop(stack);
        const auto& fields = state.toTupleRef().elements();
        TORCH_CHECK(fields.size() == cls.state.size(), "backplane::", cls.name, ".__setstate__: expected ",
                    cls.state.size(), " state fields, found ", fields.size());
        set_object(self, std::vector<c10::IValue>(fields.begin(), fields.end()));
        stack.emplace_back();
      },
      method_schema("__setstate__", type, {c10::Argument("state", state_type)}, {returns_of(c10::NoneType::get())}));

  // __obj_flatten__(self) -> ((name, value), ...): what FakeScriptObject is built from.
  std::vector<c10::TypePtr> pairs;
  for (const auto& f : cls.state) pairs.push_back(c10::TupleType::create({c10::StringType::get(), field_type(f.type)}));
  registered._def_unboxed(
      "__obj_flatten__",
      [&cls](torch::jit::Stack& stack) {
        c10::IValue self = torch::jit::pop(stack);
        const auto& state = object_of(self, cls).state;
        std::vector<c10::IValue> items;
        for (size_t i = 0; i < state.size(); ++i)
          items.emplace_back(c10::ivalue::Tuple::create({c10::IValue(cls.state[i].name), state[i]}));
        stack.emplace_back(c10::ivalue::Tuple::create(std::move(items)));
      },
      method_schema("__obj_flatten__", type, {}, {returns_of(c10::TupleType::create(std::move(pairs)))}));

  for (const MethodDef& method : cls.methods) {
    const auto schema = torch::jit::parseSchema(method.schema);
    auto full = method_schema(method.name, type, schema.arguments(), schema.returns());
    if (method.kind == MethodDef::Kind::ReturnsField) {
      const size_t index = static_cast<size_t>(cls.field(method.target) - cls.state.data());
      registered._def_unboxed(
          method.name,
          [&cls, index](torch::jit::Stack& stack) {
            c10::IValue self = torch::jit::pop(stack);
            stack.push_back(object_of(self, cls).state[index]);
          },
          std::move(full), method.doc);
    } else {
      const std::string op = std::string(kNamespace) + "::" + method.target;
      const size_t n_args = schema.arguments().size();
      registered._def_unboxed(
          method.name,
          [op, n_args](torch::jit::Stack& stack) {
            // Resolved on first call: the op is defined in the same TORCH_LIBRARY block.
            static thread_local std::unordered_map<std::string, c10::OperatorHandle> handles;
            auto it = handles.find(op);
            if (it == handles.end())
              it = handles.emplace(op, c10::Dispatcher::singleton().findSchemaOrThrow(op.c_str(), "")).first;
            stack.erase(stack.end() - static_cast<std::ptrdiff_t>(n_args) - 1);  // self
            it->second.callBoxed(stack);
          },
          std::move(full), method.doc);
    }
  }
}

}  // namespace

void define_classes(torch::Library& m, const Registry& registry) {
  for (const ClassDef& cls : registry.classes()) define_class(m, cls);
}

}  // namespace backplane::detail
