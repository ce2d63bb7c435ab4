// RUN: step-opt %s | step-opt | FileCheck %s
// RUN: step-opt %s --mlir-print-op-generic | step-opt | FileCheck %s

// step.fusion and step.yield round-trip in custom and generic form.

// CHECK-LABEL: func.func @loop
// CHECK: %[[R:.*]] = step.fusion "loop"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xbf16> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[BB:.*]] = step.broadcast_in_dim %[[B]], dims = [1]
// CHECK-NEXT: %[[S:.*]] = step.add %[[X]], %[[BB]]
// CHECK-NEXT: %[[T:.*]] = step.relu %[[S]]
// CHECK-NEXT: %[[C:.*]] = step.cast %[[T]]
// CHECK-NEXT: step.yield %[[C]] : tensor<4x8xbf16>
// CHECK-NEXT: }
// CHECK: return %[[R]]
func.func @loop(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %r = step.fusion "loop" (%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%x: tensor<4x8xf32>, %bias: tensor<8xf32>):
    %bb = step.broadcast_in_dim %bias, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %s = step.add %x, %bb : tensor<4x8xf32>
    %t = step.relu %s : tensor<4x8xf32>
    %c = step.cast %t : tensor<4x8xf32> -> tensor<4x8xbf16>
    step.yield %c : tensor<4x8xbf16>
  }
  return %r : tensor<4x8xbf16>
}

// CHECK-LABEL: func.func @reduction_two_results
// CHECK: step.fusion "reduction"(%arg0) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: step.reduce_sum
// CHECK: step.rsqrt
// CHECK: step.yield %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>
func.func @reduction_two_results(%a: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = step.fusion "reduction" (%a) : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4x8xf32>):
    %m = step.mul %x, %x : tensor<4x8xf32>
    %s = step.reduce_sum %m dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
    %q = step.rsqrt %s : tensor<4xf32>
    step.yield %s, %q : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
