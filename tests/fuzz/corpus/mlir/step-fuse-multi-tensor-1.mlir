func.func @not_norms(%a: tensor<16xi32>, %g: tensor<16xf32>) -> (tensor<i32>, tensor<f32>) {
  %ra = step.reduce_sum %a dims = [0] : tensor<16xi32> -> tensor<i32>
  %sq = step.mul %g, %g : tensor<16xf32>
  %s1 = step.reduce_sum %sq dims = [0] : tensor<16xf32> -> tensor<f32>
  %n = step.sqrt %s1 : tensor<f32>
  %b = step.broadcast_in_dim %n, dims = [] : tensor<f32> -> tensor<16xf32>
  %h = step.mul %g, %b : tensor<16xf32>
  %h2 = step.mul %h, %h : tensor<16xf32>
  %s2 = step.reduce_sum %h2 dims = [0] : tensor<16xf32> -> tensor<f32>
  %z = step.add %s1, %s2 : tensor<f32>
  return %ra, %z : tensor<i32>, tensor<f32>
}
