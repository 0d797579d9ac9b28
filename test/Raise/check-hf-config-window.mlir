// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 2}' > %t/window.json
// RUN: not tp-opt %s "--tp-check-hf-config=path=%t/window.json" 2>&1 | FileCheck %s
// RUN: echo '{"layer_types": ["full_attention", "full_attention"], "sliding_window": 3}' > %t/full.json
// RUN: not tp-opt %s "--tp-check-hf-config=path=%t/full.json" 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: echo '{"layer_types": ["sliding_attention"], "sliding_window": 3}' > %t/count.json
// RUN: not tp-opt %s "--tp-check-hf-config=path=%t/count.json" 2>&1 | FileCheck %s --check-prefix=COUNT
// CHECK: error: hf-config '{{.*}}window.json': sliding_window is 2 in the config but 3 in the graph (layer 0)
// FULL: error: hf-config '{{.*}}full.json': layer 0 is full_attention in the config but the graph has a sliding window of 3
// COUNT: error: hf-config '{{.*}}count.json': 1 attention layers in layer_types but 2 in the graph


// A window the graph shows must agree with the config.
module attributes {tp.config = {architecture = "gemma3", hidden_size = 8 : i64}} {
  func.func @forward(%q: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    %a = tp.attention %q, %q, %q {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, sliding_window = 3 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %b = tp.attention %a, %a, %a {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %b : tensor<?x?x8xf32>
  }
}
