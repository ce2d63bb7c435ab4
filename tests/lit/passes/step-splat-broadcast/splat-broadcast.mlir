// RUN: step-opt %s --step-splat-broadcast | FileCheck %s

// Splats of more than one element become a broadcast (no dims) of one
// rank-0 constant per value and element type, at the top of the block;
// splats of one element, rank-0 constants and non-splat constants stay.
// CHECK-LABEL: func.func @f(
// CHECK-DAG: %[[HALF:.+]] = step.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG: %[[NINF:.+]] = step.constant dense<0xFF800000> : tensor<f32>
// CHECK-DAG: %[[THREE:.+]] = step.constant dense<3> : tensor<i32>
// CHECK-DAG: %[[HB:.+]] = step.constant dense<5.000000e-01> : tensor<bf16>
// CHECK: %[[A:.+]] = step.broadcast_in_dim %[[HALF]], dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[B:.+]] = step.broadcast_in_dim %[[HALF]], dims = [] : tensor<f32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[M:.+]] = step.broadcast_in_dim %[[NINF]], dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[N:.+]] = step.broadcast_in_dim %[[THREE]], dims = [] : tensor<i32> -> tensor<4x8xi32>
// CHECK-NEXT: %[[H:.+]] = step.broadcast_in_dim %[[HB]], dims = [] : tensor<bf16> -> tensor<4x8xbf16>
// CHECK-NEXT: step.constant dense<2.000000e+00> : tensor<1xf32>
// CHECK-NEXT: step.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: step.constant dense<7.000000e+00> : tensor<f32>
// CHECK: return %[[A]], %[[B]], %[[M]], %[[N]], %[[H]]
// CHECK-NOT: step.constant dense<{{.*}}> : tensor<4x8
func.func @f() -> (tensor<4x8xf32>, tensor<2x3x4xf32>, tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xbf16>, tensor<1xf32>, tensor<2xf32>, tensor<f32>) {
  %a = step.constant dense<5.000000e-01> : tensor<4x8xf32>
  %b = step.constant dense<5.000000e-01> : tensor<2x3x4xf32>
  %m = step.constant dense<0xFF800000> : tensor<4x8xf32>
  %n = step.constant dense<3> : tensor<4x8xi32>
  %h = step.constant dense<5.000000e-01> : tensor<4x8xbf16>
  %one = step.constant dense<2.000000e+00> : tensor<1xf32>
  %t = step.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %s = step.constant dense<7.000000e+00> : tensor<f32>
  return %a, %b, %m, %n, %h, %one, %t, %s : tensor<4x8xf32>, tensor<2x3x4xf32>, tensor<4x8xf32>, tensor<4x8xi32>, tensor<4x8xbf16>, tensor<1xf32>, tensor<2xf32>, tensor<f32>
}
