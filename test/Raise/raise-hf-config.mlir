// tp-raise-onnx's hf-config: read for the RoPE scaling the tables cannot
// tell (yarn); an unreadable or incomplete config is an error naming it.
// RUN: split-file %s %t
// RUN: not tp-opt %t/model.mlir "--tp-raise-onnx=hf-config=%t/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: hf-config: cannot read '{{.*}}missing.json'
// RUN: not tp-opt %t/model.mlir "--tp-raise-onnx=hf-config=%t/yarn.json" 2>&1 | FileCheck %s --check-prefix=YARN
// YARN: error: hf-config '{{.*}}yarn.json': yarn needs rope_theta and original_max_position_embeddings
// A config without yarn changes nothing.
// RUN: tp-opt %t/model.mlir "--tp-raise-onnx=hf-config=%t/plain.json" | FileCheck %s --check-prefix=PLAIN
// PLAIN: tp.embedding

//--- yarn.json
{"model_type": "qwen2", "rope_parameters": {"rope_type": "yarn", "factor": 4.0}}

//--- plain.json
{"model_type": "llama", "rope_theta": 10000.0}

//--- model.mlir
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>}) -> tensor<?x?x4xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
  return %h : tensor<?x?x4xf32>
}
