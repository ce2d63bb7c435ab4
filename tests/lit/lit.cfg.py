# lit configuration of StepJIT's FileCheck tests (tests/lit/).
import os

import lit.formats

config.name = "StepJIT"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.step_obj_root, "tests", "lit")
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
config.environment["PATH"] = os.pathsep.join(
    [config.step_tools_dir, config.llvm_tools_dir, config.environment["PATH"]])
config.substitutions.append(("%step_src", config.step_src_root))
if config.step_have_codegen:
    config.available_features.add("codegen")
