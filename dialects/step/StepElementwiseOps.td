//===- StepElementwiseOps.td - Elementwise step ops -----------*- tablegen -*-===//
//
// Elementwise ops take operands of exactly one type (shape and element type)
// and compute in f32 for f16/bf16, rounding each result to nearest even.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

class Step_UnaryOp<string mnemonic, Type T, string torchName,
                   list<Trait> traits = []>
    : Step_Op<mnemonic, !listconcat([Pure, InferTypeOpInterface], traits)>,
      Step_SameAsFirstOperandInference {
  let summary = "elementwise " # torchName;
  let description = "Elementwise `" # torchName # "` (PyTorch semantics). "
    # "The result has the operand's type.\n\n"
    # "C1: the result type equals the operand type.\n\n"
    # "```mlir\n%r = step." # mnemonic # " %x : tensor<4x?xf32>\n```";
  let arguments = (ins T:$operand);
  let results = (outs T:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let extraClassDeclaration = inferDecl;
}

def Step_NegOp : Step_UnaryOp<"neg", Step_NumTensor, "torch.neg"> {
  let hasFolder = 1;
}
def Step_AbsOp : Step_UnaryOp<"abs", Step_NumTensor, "torch.abs">;
def Step_ReluOp : Step_UnaryOp<"relu", Step_NumTensor, "torch.relu">;
def Step_ExpOp : Step_UnaryOp<"exp", Step_FloatTensor, "torch.exp">;
def Step_LogOp : Step_UnaryOp<"log", Step_FloatTensor, "torch.log">;
def Step_TanhOp : Step_UnaryOp<"tanh", Step_FloatTensor, "torch.tanh">;
def Step_SigmoidOp : Step_UnaryOp<"sigmoid", Step_FloatTensor, "torch.sigmoid">;
def Step_SqrtOp : Step_UnaryOp<"sqrt", Step_FloatTensor, "torch.sqrt">;
def Step_RsqrtOp : Step_UnaryOp<"rsqrt", Step_FloatTensor, "torch.rsqrt">;
def Step_ErfOp : Step_UnaryOp<"erf", Step_FloatTensor, "torch.erf">;
def Step_SinOp : Step_UnaryOp<"sin", Step_FloatTensor, "torch.sin">;
def Step_CosOp : Step_UnaryOp<"cos", Step_FloatTensor, "torch.cos">;

def Step_GeluOp : Step_Op<"gelu", [Pure, InferTypeOpInterface]>,
                  Step_SameAsFirstOperandInference {
  let summary = "elementwise GELU";
  let description = [{
    `torch.nn.functional.gelu(x, approximate=...)`: with `none`,
    `0.5 * x * (1 + erf(x / sqrt(2)))`; with `tanh`,
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.

    C1: the result type equals the operand type.

    ```mlir
    %r = step.gelu %x approximate tanh : tensor<8x16xbf16>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$operand,
                       Step_GeluApproximation:$approximate);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
      "$operand `approximate` $approximate attr-dict `:` type($operand)";
  let extraClassDeclaration = inferDecl;
}

def Step_GeluGradOp : Step_Op<"gelu_grad", [Pure, InferTypeOpInterface]> {
  let summary = "the gradient of step.gelu";
  let description = [{
    `torch.ops.aten.gelu_backward(grad, x, approximate=...)`: `grad` times
    the derivative of `gelu(x)` with the same `approximate`; with `none`,
    `0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)`; with
    `tanh`, the derivative of `0.5 x (1 + tanh(u))`,
    `u = sqrt(2 / pi) (x + 0.044715 x^3)`. f16/bf16 compute in f32 and round
    once (PyTorch's GeluBackward). The VJP of `step.gelu` emits it, and
    `step-fuse` folds one into the matmul that computes its `grad` as
    cuBLASLt's DGELU epilogue (docs/fusion.md).

    C1: `grad` and `x` have the same element type and rank.
    C2: each dimension is equal, or dynamic in one of them; the result
        takes the static size.

    ```mlir
    %dx = step.gelu_grad %g, %x approximate tanh : tensor<8x16xbf16>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$grad, Step_FloatTensor:$x,
                       Step_GeluApproximation:$approximate);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $x `approximate` $approximate attr-dict `:` "
                       "custom<SameTypes>(type($grad), type($x))";
  let extraClassDeclaration = [{
    static ::mlir::LogicalResult inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::mlir::step::inferElementwiseType(
          loc, getOperationName(), operands[0].getType(),
          operands[1].getType(), /*resultElement=*/nullptr, inferred,
          "grad", "x");
    }
  }];
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

class Step_BinaryOp<string mnemonic, Type T, string torchName,
                    list<Trait> traits = []>
    : Step_Op<mnemonic, !listconcat([Pure, InferTypeOpInterface], traits)> {
  let summary = "elementwise " # torchName;
  let description = "Elementwise `" # torchName # "(lhs, rhs)` on operands of "
    # "one type; no implicit broadcasting (use `step.broadcast_in_dim`).\n\n"
    # "C1: `lhs` and `rhs` have the same element type and rank.\n"
    # "C2: each dimension is equal, or dynamic in one of them; the result "
    # "takes the static size.\n\n"
    # "```mlir\n%r = step." # mnemonic # " %a, %b : tensor<2x3xf32>\n```";
  let arguments = (ins T:$lhs, T:$rhs);
  let results = (outs T:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` custom<SameTypes>(type($lhs), type($rhs))";
  let extraClassDeclaration = [{
    static ::mlir::LogicalResult inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::mlir::step::inferElementwiseType(
          loc, getOperationName(), operands[0].getType(),
          operands[1].getType(), /*resultElement=*/nullptr, inferred);
    }
  }];
}

def Step_AddOp : Step_BinaryOp<"add", Step_NumTensor, "torch.add",
                               [Commutative]> {
  let hasFolder = 1;
}
def Step_SubOp : Step_BinaryOp<"sub", Step_NumTensor, "torch.sub"> {
  let hasFolder = 1;
}
def Step_MulOp : Step_BinaryOp<"mul", Step_NumTensor, "torch.mul",
                               [Commutative]> {
  let hasFolder = 1;
}
def Step_DivOp : Step_BinaryOp<"div", Step_NumTensor,
                               "torch.div (integers: rounding_mode='trunc')"> {
  let hasFolder = 1;
}
def Step_MaxOp : Step_BinaryOp<"max", Step_NumTensor, "torch.maximum",
                               [Commutative]>;
def Step_MinOp : Step_BinaryOp<"min", Step_NumTensor, "torch.minimum",
                               [Commutative]>;
def Step_PowOp : Step_BinaryOp<"pow", Step_FloatTensor, "torch.pow">;

def Step_CompareOp : Step_Op<"compare", [Pure, InferTypeOpInterface]> {
  let summary = "elementwise comparison";
  let description = [{
    `torch.eq/ne/lt/le/gt/ge(lhs, rhs)`; the result is `i1` of the operands'
    shape. Comparisons with NaN are false except `ne`. Integers compare as
    signed values; for `i1`, false < true (as PyTorch's bool).

    C1: `lhs` and `rhs` have the same element type and rank.
    C2: each dimension is equal, or dynamic in one of them.

    ```mlir
    %m = step.compare lt, %a, %b : tensor<4xf32>
    ```
  }];
  let arguments = (ins Step_ComparisonDirection:$direction, Step_Tensor:$lhs,
                       Step_Tensor:$rhs);
  let results = (outs Step_BoolTensor:$result);
  let assemblyFormat = "$direction `,` $lhs `,` $rhs attr-dict `:` "
                       "custom<SameTypes>(type($lhs), type($rhs))";
  let extraClassDeclaration = [{
    static ::mlir::LogicalResult inferReturnTypes(
        ::mlir::MLIRContext *ctx, std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::mlir::step::inferElementwiseType(
          loc, getOperationName(), operands[0].getType(),
          operands[1].getType(), ::mlir::IntegerType::get(ctx, 1), inferred);
    }
  }];
}

def Step_SelectOp : Step_Op<"select", [Pure, InferTypeOpInterface]> {
  let summary = "elementwise choice";
  let description = [{
    `torch.where(pred, on_true, on_false)` without broadcasting.

    C1: `on_true` and `on_false` have the same element type and rank.
    C2: each dimension of `pred`, `on_true` and `on_false` agrees (equal or
        dynamic in one).

    ```mlir
    %r = step.select %m, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Step_BoolTensor:$pred, Step_Tensor:$on_true,
                       Step_Tensor:$on_false);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$pred `,` $on_true `,` $on_false attr-dict `:` "
      "type($pred) `,` custom<SameTypes>(type($on_true), type($on_false))";
  let extraClassDeclaration = [{
    static ::mlir::LogicalResult inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr,
        ::mlir::OpaqueProperties, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      return ::mlir::step::inferSelectType(loc, operands[0].getType(),
          operands[1].getType(), operands[2].getType(), inferred);
    }
  }];
}

def Step_CastOp : Step_Op<"cast", [Pure]> {
  let summary = "element type conversion";
  let description = [{
    `x.to(dtype)`: float -> integer truncates toward zero (saturating, NaN ->
    0), x -> i1 is `x != 0`, i1 -> x is 0/1, float -> float rounds to nearest
    even.

    C1: the operand and result shapes are equal (dynamic dims must match).

    ```mlir
    %h = step.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat =
      "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}
