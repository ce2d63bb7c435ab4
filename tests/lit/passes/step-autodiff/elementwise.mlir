// RUN: step-opt %s -split-input-file --step-autodiff | FileCheck %s

// The VJP rules of elementwise ops (dialects/step/VJPElementwise.cpp): which
// ops the backward builds, which forward values it reads (saved for the
// backward), and that nothing is computed for an operand that is an input.

// exp saves its result: the backward multiplies by the forward exp, and
// computes no second one.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4xf32> {step.kind = "param", step.name = "x"}
// CHECK: %[[E:.+]] = step.exp %[[X]]
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK-NOT: step.exp
// CHECK: %[[G:.+]] = step.mul %[[SEED]], %[[E]]
// CHECK: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %e = step.exp %x : tensor<4xf32>
  %l = step.reduce_sum %e dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Dividing by an input: only grad / b; the quotient's gradient w.r.t. b
// (a neg and a second division) is not built.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[A:[^:]+]]: tensor<4xf32> {step.kind = "param", step.name = "a"}
// CHECK-SAME: %[[B:[^:]+]]: tensor<4xf32> {step.kind = "input", step.name = "b"}
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK-NEXT: %[[G:.+]] = step.div %[[SEED]], %[[B]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%a: tensor<4xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "input", step.name = "b"}) -> tensor<f32> {
  %q = step.div %a, %b : tensor<4xf32>
  %l = step.reduce_sum %q dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The denominator's gradient -grad * (q / b) reuses the forward quotient q.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[A:[^:]+]]: tensor<4xf32> {step.kind = "input", step.name = "a"}
// CHECK-SAME: %[[B:[^:]+]]: tensor<4xf32> {step.kind = "param", step.name = "b"}
// CHECK: %[[Q:.+]] = step.div %[[A]], %[[B]]
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK-DAG: %[[NEG:.+]] = step.neg %[[SEED]]
// CHECK-DAG: %[[QB:.+]] = step.div %[[Q]], %[[B]]
// CHECK: %[[G:.+]] = step.mul %[[NEG]], %[[QB]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%a: tensor<4xf32> {step.kind = "input", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "param", step.name = "b"}) -> tensor<f32> {
  %q = step.div %a, %b : tensor<4xf32>
  %l = step.reduce_sum %q dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// tanh in f16: grad * (1 - y * y) on the saved result, all in f16, and the
// f32 cotangent is cast back to f16 at the cast.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4xf16> {step.kind = "param", step.name = "x"}
// CHECK-SAME: tensor<4xf16> {step.kind = "grad", step.name = "grad.x"}
// CHECK: %[[Y:.+]] = step.tanh %[[X]] : tensor<4xf16>
// CHECK: %[[GY:.+]] = step.cast %{{.+}} : tensor<4xf32> -> tensor<4xf16>
// CHECK-DAG: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<4xf16>
// CHECK-DAG: %[[YY:.+]] = step.mul %[[Y]], %[[Y]] : tensor<4xf16>
// CHECK: %[[D:.+]] = step.sub %[[ONE]], %[[YY]] : tensor<4xf16>
// CHECK: %[[G:.+]] = step.mul %[[GY]], %[[D]] : tensor<4xf16>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf16> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %t = step.tanh %x : tensor<4xf16>
  %c = step.cast %t : tensor<4xf16> -> tensor<4xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// relu: threshold_backward on the saved result (result <= 0 gets 0).
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[R:.+]] = step.relu
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[ZERO:.+]] = step.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[OFF:.+]] = step.compare le, %[[R]], %[[ZERO]]
// CHECK: %[[G:.+]] = step.select %[[OFF]], %[[ZERO]], %[[SEED]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %r = step.relu %x : tensor<4xf32>
  %l = step.reduce_sum %r dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// abs: grad * sign(x), sign built from two comparisons with 0.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4xf32> {step.kind = "param", step.name = "x"}
// CHECK-DAG: %[[ZERO:.+]] = step.constant dense<0.000000e+00>
// CHECK-DAG: %[[ONE:.+]] = step.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-DAG: %[[MONE:.+]] = step.constant dense<-1.000000e+00>
// CHECK: %[[POS:.+]] = step.compare gt, %[[X]], %[[ZERO]]
// CHECK: %[[NEG:.+]] = step.compare lt, %[[X]], %[[ZERO]]
// CHECK: %[[S1:.+]] = step.select %[[NEG]], %[[MONE]], %[[ZERO]]
// CHECK: %[[SIGN:.+]] = step.select %[[POS]], %[[ONE]], %[[S1]]
// CHECK: %[[G:.+]] = step.mul %{{.+}}, %[[SIGN]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %r = step.abs %x : tensor<4xf32>
  %l = step.reduce_sum %r dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// maximum with an input: the tie split (grad / 2 where a == b) and the mask
// where a loses; the mask for b (compare gt) is not built.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[A:[^:]+]]: tensor<4xf32> {step.kind = "param", step.name = "a"}
// CHECK-SAME: %[[B:[^:]+]]: tensor<4xf32> {step.kind = "input", step.name = "b"}
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[TIE:.+]] = step.compare eq, %[[A]], %[[B]]
// CHECK: %[[HALF:.+]] = step.mul %[[SEED]], %{{.+}}
// CHECK: %[[SPLIT:.+]] = step.select %[[TIE]], %[[HALF]], %[[SEED]]
// CHECK: %[[LOSES:.+]] = step.compare lt, %[[A]], %[[B]]
// CHECK: %[[G:.+]] = step.select %[[LOSES]], %{{.+}}, %[[SPLIT]]
// CHECK-NOT: step.compare gt
// CHECK: return %{{.+}}, %[[G]]
func.func @forward(%a: tensor<4xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "input", step.name = "b"}) -> tensor<f32> {
  %m = step.max %a, %b : tensor<4xf32>
  %l = step.reduce_sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// pow: the base's e * x^(e-1) masked where e == 0; the exponent's y * log x
// (y the saved result) masked where x == 0 and e >= 0.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]+]]: tensor<4xf32> {step.kind = "param", step.name = "a"}
// CHECK-SAME: %[[E:[^:]+]]: tensor<4xf32> {step.kind = "param", step.name = "b"}
// CHECK: %[[Y:.+]] = step.pow %[[X]], %[[E]]
// CHECK: %[[ZERO:.+]] = step.constant dense<0.000000e+00>
// CHECK: %[[EM1:.+]] = step.sub %[[E]], %{{.+}}
// CHECK: %[[P:.+]] = step.pow %[[X]], %[[EM1]]
// CHECK: %[[D:.+]] = step.mul %[[E]], %[[P]]
// CHECK: %[[GD:.+]] = step.mul %{{.+}}, %[[D]]
// CHECK: %[[E0:.+]] = step.compare eq, %[[E]], %[[ZERO]]
// CHECK: %[[GX:.+]] = step.select %[[E0]], %[[ZERO]], %[[GD]]
// CHECK: %[[LOG:.+]] = step.log %[[X]]
// CHECK: %[[YLOG:.+]] = step.mul %[[Y]], %[[LOG]]
// CHECK: %[[X0:.+]] = step.compare eq, %[[X]], %[[ZERO]]
// CHECK: %[[M1:.+]] = step.select %[[X0]], %[[ZERO]], %[[YLOG]]
// CHECK: %[[EGE:.+]] = step.compare ge, %[[E]], %[[ZERO]]
// CHECK: %[[M2:.+]] = step.select %[[EGE]], %[[M1]], %[[YLOG]]
// CHECK: %[[GE:.+]] = step.mul %{{.+}}, %[[M2]]
// CHECK: return %{{.+}}, %[[GX]], %[[GE]]
func.func @forward(%a: tensor<4xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "param", step.name = "b"}) -> tensor<f32> {
  %m = step.pow %a, %b : tensor<4xf32>
  %l = step.reduce_sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// select: the forward predicate routes the gradient to the param branch;
// the input branch gets no select of its own.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[P:.+]] = step.compare lt
// CHECK: step.select %[[P]]
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[ZERO:.+]] = step.constant dense<0.000000e+00>
// CHECK: %[[G:.+]] = step.select %[[P]], %[[SEED]], %[[ZERO]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%a: tensor<4xf32> {step.kind = "param", step.name = "a"},
                   %b: tensor<4xf32> {step.kind = "input", step.name = "b"}) -> tensor<f32> {
  %p = step.compare lt, %a, %b : tensor<4xf32>
  %m = step.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
  %l = step.reduce_sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Float casts cast the gradient back (f32 -> bf16 -> f32); the path through
// i32 carries none: its forward casts are only read, never differentiated.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[I:.+]] = step.cast %{{.+}} : tensor<4xf32> -> tensor<4xi32>
// CHECK: %[[J:.+]] = step.cast %[[I]] : tensor<4xi32> -> tensor<4xbf16>
// CHECK: %[[SEED:.+]] = step.broadcast_in_dim
// CHECK: %[[GS:.+]] = step.cast %[[SEED]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK: %[[GH:.+]] = step.mul %[[GS]], %[[J]] : tensor<4xbf16>
// CHECK: %[[G:.+]] = step.cast %[[GH]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %h = step.cast %x : tensor<4xf32> -> tensor<4xbf16>
  %i = step.cast %x : tensor<4xf32> -> tensor<4xi32>
  %j = step.cast %i : tensor<4xi32> -> tensor<4xbf16>
  %s = step.mul %h, %j : tensor<4xbf16>
  %f = step.cast %s : tensor<4xbf16> -> tensor<4xf32>
  %l = step.reduce_sum %f dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gelu (erf form): one step.gelu_grad of the incoming gradient and the
// operand, as PyTorch's GeluBackward.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4xf32> {step.kind = "param", step.name = "x"}
// CHECK: step.gelu %[[X]] approximate none
// CHECK: %[[G:.+]] = step.gelu_grad %{{.+}}, %[[X]] approximate none : tensor<4xf32>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %g = step.gelu %x approximate none : tensor<4xf32>
  %l = step.reduce_sum %g dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gelu (tanh form) of bf16: step.gelu_grad of bf16 (it computes in f32 and
// rounds once, as PyTorch's GeluBackward for half types); no cast around it.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4xbf16> {step.kind = "param", step.name = "x"}
// CHECK: step.gelu %[[X]] approximate tanh : tensor<4xbf16>
// CHECK: %[[G16:.+]] = step.cast %{{.+}} : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT: %[[G:.+]] = step.gelu_grad %[[G16]], %[[X]] approximate tanh : tensor<4xbf16>
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xbf16> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %g = step.gelu %x approximate tanh : tensor<4xbf16>
  %c = step.cast %g : tensor<4xbf16> -> tensor<4xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// gelu_grad (second order, tanh form, bf16): the gradient of `grad` is
// another gelu_grad; that of `x` is grad * g * d'(x) written out in f32 from
// x cast up (tanh of the inner term, never a gelu), rounded once to bf16.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[G:[^:]+]]: tensor<4xbf16> {step.kind = "param", step.name = "g"}
// CHECK-SAME: %[[X:[^:]+]]: tensor<4xbf16> {step.kind = "param", step.name = "x"}
// CHECK: step.gelu_grad %[[G]], %[[X]] approximate tanh : tensor<4xbf16>
// CHECK: %[[DG:.+]] = step.gelu_grad %{{.+}}, %[[X]] approximate tanh : tensor<4xbf16>
// CHECK: step.cast %[[X]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK: step.tanh %{{.+}} : tensor<4xf32>
// CHECK-NOT: step.gelu
// CHECK: %[[DX:.+]] = step.cast %{{.+}} : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT: return %{{.+}}, %[[DG]], %[[DX]]
func.func @forward(%g: tensor<4xbf16> {step.kind = "param", step.name = "g"},
                   %x: tensor<4xbf16> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %d = step.gelu_grad %g, %x approximate tanh : tensor<4xbf16>
  %c = step.cast %d : tensor<4xbf16> -> tensor<4xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// cos(sin(x)): each rule recomputes the other function of its operand.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:.+]]: tensor<4xf32> {step.kind = "param", step.name = "x"}
// CHECK: %[[S:.+]] = step.sin %[[X]]
// CHECK: step.cos %[[S]]
// CHECK: %[[SS:.+]] = step.sin %[[S]]
// CHECK: %[[NSS:.+]] = step.neg %[[SS]]
// CHECK: %[[GS:.+]] = step.mul %{{.+}}, %[[NSS]]
// CHECK: %[[CX:.+]] = step.cos %[[X]]
// CHECK: %[[G:.+]] = step.mul %[[GS]], %[[CX]]
// CHECK-NEXT: return %{{.+}}, %[[G]]
func.func @forward(%x: tensor<4xf32> {step.kind = "param", step.name = "x"}) -> tensor<f32> {
  %s = step.sin %x : tensor<4xf32>
  %c = step.cos %s : tensor<4xf32>
  %l = step.reduce_sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
