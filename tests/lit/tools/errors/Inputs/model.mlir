// The model of the error tests: loss = mean((x * w)^2), w a param [3], x a
// batch [4, 3] (four rows, so it splits over 2 or 4 ranks but not 3).
func.func @forward(%w: tensor<3xf32> {step.kind = "param", step.name = "w"},
                   %x: tensor<4x3xf32> {step.kind = "input", step.name = "x"})
    -> (tensor<f32> {step.name = "loss"}) {
  %wb = step.broadcast_in_dim %w, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %p = step.mul %wb, %x : tensor<4x3xf32>
  %s = step.mul %p, %p : tensor<4x3xf32>
  %l = step.reduce_mean %s dims = [0, 1] : tensor<4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
