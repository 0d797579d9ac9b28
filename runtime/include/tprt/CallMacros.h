//===- CallMacros.h - reading the entries of Calls.def ----------*- C++ -*-===//
//
// What an includer of tprt/Calls.def expands an entry's parameter list
// `(Kind, name)(Kind, name)...` with: the C++ parameters, the argument
// names, or one TPRT_EACH_PARAM(Kind, name) per parameter. Each walks the
// list by two macros that call each other in turn (a macro may not expand
// itself) and ends by pasting _END onto the last one's name.
//
// Only macros and type names: the compiler includes it too.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CALLMACROS_H
#define TPRT_CALLMACROS_H

#define TPRT_STRINGIZE(...) TPRT_STRINGIZE_I(__VA_ARGS__)
#define TPRT_STRINGIZE_I(...) #__VA_ARGS__

#define TPRT_SEQ_END(...) TPRT_SEQ_END_I(__VA_ARGS__)
#define TPRT_SEQ_END_I(...) __VA_ARGS__##_END

/// `, type name` per parameter, a Slot defaulted to -1: a declaration.
#define TPRT_DECLARED_PARAMS(seq) TPRT_SEQ_END(TPRT_DECLARED_A seq)
#define TPRT_DECLARED_A(kind, name)                                            \
  , TPRT_TYPE_##kind name TPRT_DEFAULT_##kind TPRT_DECLARED_B
#define TPRT_DECLARED_B(kind, name)                                            \
  , TPRT_TYPE_##kind name TPRT_DEFAULT_##kind TPRT_DECLARED_A
#define TPRT_DECLARED_A_END
#define TPRT_DECLARED_B_END

/// `, type name` per parameter: a definition.
#define TPRT_PARAMS(seq) TPRT_SEQ_END(TPRT_PARAMS_A seq)
#define TPRT_PARAMS_A(kind, name) , TPRT_TYPE_##kind name TPRT_PARAMS_B
#define TPRT_PARAMS_B(kind, name) , TPRT_TYPE_##kind name TPRT_PARAMS_A
#define TPRT_PARAMS_A_END
#define TPRT_PARAMS_B_END

/// `, name` per parameter: the arguments of a call that passes them on.
#define TPRT_ARGS(seq) TPRT_SEQ_END(TPRT_ARGS_A seq)
#define TPRT_ARGS_A(kind, name) , name TPRT_ARGS_B
#define TPRT_ARGS_B(kind, name) , name TPRT_ARGS_A
#define TPRT_ARGS_A_END
#define TPRT_ARGS_B_END

/// The first parameter's name.
#define TPRT_FIRST_PARAM(seq) TPRT_SEQ_END(TPRT_FIRST_I seq)
#define TPRT_FIRST_I(kind, name) name TPRT_SKIP_A
#define TPRT_SKIP_A(kind, name) TPRT_SKIP_B
#define TPRT_SKIP_B(kind, name) TPRT_SKIP_A
#define TPRT_SKIP_A_END
#define TPRT_SKIP_B_END

/// `, argument` per parameter for the call's f32 form (KernelsInF32 in
/// Calls.def): each Tensor widened to f32 (an optional one, a key mask, as
/// it is), no activation slot (the f32 result is not the planned one).
#define TPRT_ARGS_IN_F32(seq) TPRT_SEQ_END(TPRT_IN_F32_A seq)
#define TPRT_IN_F32_A(kind, name) , TPRT_IN_F32_##kind(name) TPRT_IN_F32_B
#define TPRT_IN_F32_B(kind, name) , TPRT_IN_F32_##kind(name) TPRT_IN_F32_A
#define TPRT_IN_F32_A_END
#define TPRT_IN_F32_B_END
#define TPRT_IN_F32_Tensor(name) tprt::widened(name)
#define TPRT_IN_F32_OptionalTensor(name) name
#define TPRT_IN_F32_I64(name) name
#define TPRT_IN_F32_I32(name) name
#define TPRT_IN_F32_F64(name) name
#define TPRT_IN_F32_Bool(name) name
#define TPRT_IN_F32_Shape(name) name
#define TPRT_IN_F32_Slot(name) -1

/// TPRT_EACH_PARAM(kind, name) per parameter, as the includer defines it.
#define TPRT_FOR_EACH_PARAM(seq) TPRT_SEQ_END(TPRT_EACH_A seq)
#define TPRT_EACH_A(kind, name) TPRT_EACH_PARAM(kind, name) TPRT_EACH_B
#define TPRT_EACH_B(kind, name) TPRT_EACH_PARAM(kind, name) TPRT_EACH_A
#define TPRT_EACH_A_END
#define TPRT_EACH_B_END

/// The C++ type of each parameter kind (mlir::tp::RuntimeArg's), as
/// generated code spells it (getRuntimeArgCppType reads these).
#define TPRT_TYPE_Tensor const tprt::Tensor &
#define TPRT_TYPE_OptionalTensor const tprt::Tensor &
#define TPRT_TYPE_ConsumedTensor tprt::Tensor &
#define TPRT_TYPE_I64 int64_t
#define TPRT_TYPE_I32 int
#define TPRT_TYPE_F64 double
#define TPRT_TYPE_Bool bool
#define TPRT_TYPE_U64 uint64_t
#define TPRT_TYPE_CString const char *
#define TPRT_TYPE_DType tprt::DType
#define TPRT_TYPE_Shape std::vector<int64_t>
#define TPRT_TYPE_Reals std::vector<double>
#define TPRT_TYPE_Strings std::vector<std::string>
#define TPRT_TYPE_LinearForm tprt::LinearForm
#define TPRT_TYPE_LinearEpilogue tprt::LinearEpilogue
#define TPRT_TYPE_Slot int64_t

#define TPRT_DEFAULT_Tensor
#define TPRT_DEFAULT_OptionalTensor
#define TPRT_DEFAULT_ConsumedTensor
#define TPRT_DEFAULT_I64
#define TPRT_DEFAULT_I32
#define TPRT_DEFAULT_F64
#define TPRT_DEFAULT_Bool
#define TPRT_DEFAULT_U64
#define TPRT_DEFAULT_CString
#define TPRT_DEFAULT_DType
#define TPRT_DEFAULT_Shape
#define TPRT_DEFAULT_Reals
#define TPRT_DEFAULT_Strings
#define TPRT_DEFAULT_LinearForm
#define TPRT_DEFAULT_LinearEpilogue
#define TPRT_DEFAULT_Slot = -1

/// The C++ result of each result kind.
#define TPRT_RESULT_Tensor tprt::Tensor
#define TPRT_RESULT_Void void
#define TPRT_RESULT_Tensors2 tprt::Tensors
#define TPRT_RESULT_Tensors3 tprt::Tensors
#define TPRT_RESULT_Tensors9 tprt::Tensors
#define TPRT_RESULT_TensorsN tprt::Tensors

#endif // TPRT_CALLMACROS_H
