func.func @clip_sgd(%p0: tensor<8xf32>, %p1: tensor<4x4xf32>, %p2: tensor<3xf32>,
                    %g0: tensor<8xf32>, %g1: tensor<4x4xf32>, %g2: tensor<3xf32>,
                    %t: tensor<i64>, %lr: tensor<f32>) -> (tensor<8xf32>, tensor<4x4xf32>, tensor<3xf32>) {
  %zero = step.constant dense<0.0> : tensor<f32>
  %eps = step.constant dense<1.0e-6> : tensor<f32>
  %clip = step.constant dense<1.0> : tensor<f32>
  %q0 = step.mul %g0, %g0 : tensor<8xf32>
  %r0 = step.reduce_sum %q0 dims = [0] : tensor<8xf32> -> tensor<f32>
  %s0 = step.add %zero, %r0 : tensor<f32>
  %q1 = step.mul %g1, %g1 : tensor<4x4xf32>
  %r1 = step.reduce_sum %q1 dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %s1 = step.add %s0, %r1 : tensor<f32>
  %q2 = step.mul %g2, %g2 : tensor<3xf32>
  %r2 = step.reduce_sum %q2 dims = [0] : tensor<3xf32> -> tensor<f32>
  %s2 = step.add %s1, %r2 : tensor<f32>
  %n = step.sqrt %s2 : tensor<f32>
  %d = step.add %n, %eps : tensor<f32>
  %c = step.div %clip, %d : tensor<f32>
  %c0 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<8xf32>
  %h0 = step.mul %g0, %c0 : tensor<8xf32>
  %c1 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<4x4xf32>
  %h1 = step.mul %g1, %c1 : tensor<4x4xf32>
  %c2 = step.broadcast_in_dim %c, dims = [] : tensor<f32> -> tensor<3xf32>
  %h2 = step.mul %g2, %c2 : tensor<3xf32>
  %u0 = step.sgd_update %p0, %h0, %t, %lr : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> tensor<8xf32>
  %u1 = step.sgd_update %p1, %h1, %t, %lr : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<i64>, tensor<f32>) -> tensor<4x4xf32>
  %u2 = step.sgd_update %p2, %h2, %t, %lr : (tensor<3xf32>, tensor<3xf32>, tensor<i64>, tensor<f32>) -> tensor<3xf32>
  return %u0, %u1, %u2 : tensor<8xf32>, tensor<4x4xf32>, tensor<3xf32>
}
