// RUN: step-opt %s -split-input-file -verify-diagnostics --step-offload-optimizer

// A step without an optimizer update (a forward, or step-optimizer not run).
// expected-error @+1 {{step-offload-optimizer: @train_step has no optimizer update (run step-optimizer first)}}
func.func @train_step(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}, %x: tensor<4xf32> {step.kind = "input", step.name = "x"}) -> tensor<4xf32> {
  %y = step.mul %w, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Applied twice.
// expected-error @+1 {{step-offload-optimizer: already applied}}
func.func @train_step(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}) -> tensor<4xf32> attributes {step.offload_optimizer = {}} {
  return %w : tensor<4xf32>
}

// -----

// The verifier: a host op reads host values and constants only.
func.func @train_step(%w: tensor<4xf32> {step.kind = "param", step.memory = "host", step.name = "w"}, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{runs on the host (step.host) but operand 1 is in device memory}}
  %y = step.mul %w, %x {step.host} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %h = step.offload %x : tensor<4xf32>
  // expected-error @+1 {{cannot run on the host (step.host): a copy between memories, a collective or a rank's shard runs on the device}}
  %y = step.all_reduce %h {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 1>, step.host} : tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{C2: the operand must be a host value}}
  %y = step.reload %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{C2: the host value may only be read by step.reload, step.host ops and a function's return, found a use by 'step.neg'}}
  %h = step.offload %x : tensor<4xf32>
  %y = step.neg %h : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @+1 {{step.memory of argument 0 must be "host" or "device", found "disk"}}
func.func @train_step(%x: tensor<4xf32> {step.memory = "disk"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
