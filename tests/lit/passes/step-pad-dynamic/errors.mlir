// RUN: step-opt %s -split-input-file --step-pad-dynamic=sizes=T=16 -verify-diagnostics

// expected-error @+1 {{step-pad-dynamic: argument 'x' has a dynamic dim but @forward declares no symbols}}
func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x"}) -> tensor<f32> {
  %s = step.reduce_sum %x dims = [0] : tensor<?xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error @+1 {{step-pad-dynamic: bucket T=16 exceeds the symbol's maximum 8}}
func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]})
    -> tensor<f32> attributes {step.symbols = {T = 8 : i64}} {
  %s = step.reduce_sum %x dims = [0] : tensor<?xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error @+1 {{step-pad-dynamic: dim 0 of argument 'x' 'tensor<?xf32>' is dynamic but names no symbol}}
func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = [""]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  %s = step.reduce_sum %x dims = [0] : tensor<?xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]})
    -> tensor<f32> attributes {step.symbols = {T = 64 : i64}} {
  // expected-error @+1 {{step-pad-dynamic: dim 0 (T) is padded: slice, pad and concat along a padded dim would move valid data}}
  %s = step.slice %x start = [1] limit = [4] strides = [1] : tensor<?xf32> -> tensor<3xf32>
  %r = step.reduce_sum %s dims = [0] : tensor<3xf32> -> tensor<f32>
  return %r : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4x?xf32> {step.kind = "input", step.name = "x", step.dims = ["", "T"]},
                   %w: tensor<8xf32> {step.kind = "param", step.name = "w"})
    -> tensor<4x8xf32> attributes {step.symbols = {T = 64 : i64}} {
  // expected-error @+1 {{step-pad-dynamic: dim 0 of the weight is 8 but the normalized dim it scales is T}}
  %o = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x?xf32>, tensor<8xf32>, tensor<8xf32>
  return %o : tensor<4x8xf32>
}

// -----

func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]})
    -> tensor<?xf32> attributes {step.symbols = {T = 64 : i64}} {
  // expected-error @+1 {{step-pad-dynamic: dropout of a padded value would draw a different mask}}
  %o = step.dropout %x p = 1.0e-01 seed = 1 : tensor<?xf32>
  return %o : tensor<?xf32>
}

// -----

func.func @forward(%x: tensor<?xf32> {step.kind = "input", step.name = "x", step.dims = ["T"]},
                   %y: tensor<?xf32> {step.kind = "input", step.name = "y", step.dims = ["U"]})
    -> tensor<?xf32> attributes {step.symbols = {T = 64 : i64, U = 64 : i64}} {
  // expected-error @+1 {{step-pad-dynamic: operands disagree on dim 0: T vs U}}
  %o = step.add %x, %y : tensor<?xf32>
  return %o : tensor<?xf32>
}
