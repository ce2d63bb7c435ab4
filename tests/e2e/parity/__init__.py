"""Modules of the PyTorch parity tests of the step dialect (tests/e2e).

The entry point is tests/e2e/op_parity.py; it runs the cases the modules
here build:

  harness.py             dtypes and storage conversions, torch references
                         (opmath), tolerances (Tol), comparison, the Case
                         class, input generation, running step-interp
  cases_elementwise.py   unary, binary, compare, select, broadcasting; casts
  cases_shape.py         broadcast_in_dim, reshape, transpose, slice, pad,
                         concat, iota; dynamic dims
  cases_reduce_linalg.py reductions, matmul
  cases_nn.py            softmax, log_softmax, layer_norm, embedding,
                         cross_entropy, attention; dropout
  cases_errors.py        error cases (exit status 1 and the culprit named)
  cases_train.py         stop_gradient, embedding_grad, cross_entropy_grad;
                         check_finite; sgd_update, adamw_update, lamb_update
  selftest.py            the harness's self-test of its comparator
"""
