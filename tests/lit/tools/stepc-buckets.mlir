// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --buckets=T:4,8 --no-kernels -o %t.step
// RUN: strings %t.step | FileCheck %s
// RUN: not stepc %s --train --buckets=T:0 -o %t.bad.step 2>&1 | FileCheck --check-prefix=SIZE %s
// RUN: not stepc %s --train --buckets=T:4,32 -o %t.big.step 2>&1 | FileCheck --check-prefix=MAX %s
// RUN: not stepc %s --train --buckets=U:4 -o %t.sym.step 2>&1 | FileCheck --check-prefix=SYM %s
// RUN: not stepc %s --train --buckets=T:mult:x -o %t.mul.step 2>&1 | FileCheck --check-prefix=MULT %s
// RUN: stepc %s --train --optimizer=sgd,lr=0.1 --buckets=T:pow2:4 --no-kernels -o %t.pow2.step
// RUN: strings %t.pow2.step | FileCheck --check-prefix=POW2 %s

// One artifact, two plans: the largest bucket is the artifact's own, the
// other nests in section bucket.0. Each plan's meta gives its arena's
// size, as a one-plan artifact's does.
// CHECK-DAG: "arena_bytes":{{[1-9][0-9]*}},"bucket":{"T":8}
// CHECK-DAG: "arena_bytes":{{[1-9][0-9]*}},"bucket":{"T":4}
// CHECK-DAG: "name":"bucket.0"
// CHECK-DAG: "dynamic":{"inputs":{"x":["T",""]},"symbols":{"T":16}}

// SIZE: stepc: --buckets: bucket policy '0': '0' is not a size
// SYM: stepc: error: --buckets names symbol 'U', which @forward does not declare
// MULT: bucket policy 'mult:x': the multiple must be an integer >= 1

// pow2 from 4 up to the maximum 16: buckets 4, 8, 16.
// POW2-DAG: "bucket":{"T":16}
// POW2-DAG: "bucket":{"T":8}
// POW2-DAG: "bucket":{"T":4}
// POW2-DAG: "name":"bucket.1"
// MAX: step-pad-dynamic: bucket T=32 exceeds the symbol's maximum 16

func.func @forward(%x: tensor<?x3xf32> {step.kind = "input", step.name = "x", step.dims = ["T", ""]},
                   %w: tensor<3xf32> {step.kind = "param", step.name = "w"})
    -> tensor<f32> attributes {step.symbols = {T = 16 : i64}} {
  %b = step.broadcast_in_dim %w, dims = [1] : tensor<3xf32> -> tensor<?x3xf32>
  %y = step.mul %x, %b : tensor<?x3xf32>
  %m = step.reduce_mean %y dims = [0, 1] : tensor<?x3xf32> -> tensor<f32>
  return %m : tensor<f32>
}
