// RUN: tp-opt %s --split-input-file --verify-diagnostics

func.func @embedding_table_rank(%ids: tensor<2x8xi64>, %t: tensor<256xf32>) {
  // expected-error @+1 {{table must be [vocab, hidden], got rank 1}}
  %0 = tp.embedding %ids, %t : (tensor<2x8xi64>, tensor<256xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_result_rank(%ids: tensor<2x8xi64>, %t: tensor<256x64xf32>) {
  // expected-error @+1 {{result rank must be the ids rank plus one (3), got 2}}
  %0 = tp.embedding %ids, %t : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x64xf32>
  return
}

// -----

func.func @embedding_hidden(%ids: tensor<2x8xi64>, %t: tensor<256x64xf32>) {
  // expected-error @+1 {{result hidden size 32 differs from the table's 64}}
  %0 = tp.embedding %ids, %t : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @embedding_batch(%ids: tensor<2x8xi64>, %t: tensor<256x64xf32>) {
  // expected-error @+1 {{dimension 1 of ids (8) and result (4) differ}}
  %0 = tp.embedding %ids, %t : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x4x64xf32>
  return
}

// -----

func.func @embedding_elem(%ids: tensor<2x8xi64>, %t: tensor<256x64xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'bf16'}}
  %0 = tp.embedding %ids, %t : (tensor<2x8xi64>, tensor<256x64xf32>) -> tensor<2x8x64xbf16>
  return
}

// -----

func.func @embedding_ids_type(%ids: tensor<2x8xf32>, %t: tensor<256x64xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = tp.embedding %ids, %t : (tensor<2x8xf32>, tensor<256x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{weight must be [out, in], got rank 1}}
  %0 = tp.linear %x, %w : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @linear_in(%x: tensor<2x8x64xf32>, %w: tensor<128x32xf32>) {
  // expected-error @+1 {{input features 64 differ from the weight's in 32}}
  %0 = tp.linear %x, %w : (tensor<2x8x64xf32>, tensor<128x32xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

func.func @linear_out(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{result features 64 differ from the weight's out 128}}
  %0 = tp.linear %x, %w : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @linear_rank(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{input and result must have the same rank >= 1, got 3 and 2}}
  %0 = tp.linear %x, %w : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @linear_lead(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{dimension 0 of input (2) and result (4) differ}}
  %0 = tp.linear %x, %w : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<4x8x128xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{bias must be [out] = [128], got 'tensor<64xf32>'}}
  %0 = tp.linear %x, %w, %b : (tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

func.func @linear_elem(%x: tensor<2x8x64xbf16>, %w: tensor<128x64xf32>) {
  // A weight of another type is fine; a result of another type is not.
  // expected-error @+1 {{element types differ: 'bf16' vs 'f32'}}
  %0 = tp.linear %x, %w : (tensor<2x8x64xbf16>, tensor<128x64xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'epsilon' must be positive and finite, got 0}}
  %0 = tp.rms_norm %x, %w {epsilon = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{weight has 32 elements but normalizes groups of 64}}
  %0 = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<2x8x64xf32>, tensor<32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rms_norm_group(%x: tensor<2x8x64xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{last dimension 64 is not a multiple of group_size 24}}
  %0 = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f64, group_size = 24 : i64} : (tensor<2x8x64xf32>, tensor<24xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rms_norm_group_sign(%x: tensor<2x8x64xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'group_size' must be positive, got -16}}
  %0 = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f64, group_size = -16 : i64} : (tensor<2x8x64xf32>, tensor<16xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rms_norm_result(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{result type 'tensor<2x8x64xbf16>' differs from the input's 'tensor<2x8x64xf32>'}}
  %0 = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xbf16>
  return
}

// -----

func.func @add_rms_norm_types(%a: tensor<2x8x64xf32>, %b: tensor<2x8x64xbf16>, %w: tensor<64xf32>) {
  // expected-error @+1 {{expects the addends and both results of one type, got 'tensor<2x8x64xf32>' and 'tensor<2x8x64xbf16>'}}
  %0:2 = tp.add_rms_norm %a, %b, %w {epsilon = 1.0e-6 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xbf16>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
  return
}

// -----

func.func @add_rms_norm_result(%a: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{expects the addends and both results of one type, got 'tensor<2x8x64xf32>' and 'tensor<2x8x32xf32>'}}
  %0:2 = tp.add_rms_norm %a, %a, %w {epsilon = 1.0e-6 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x32xf32>)
  return
}

// -----

func.func @add_rms_norm_weight(%a: tensor<2x8x64xbf16>, %w: tensor<32xf32>) {
  // expected-error @+1 {{weight has 32 elements but normalizes groups of 64}}
  %0:2 = tp.add_rms_norm %a, %a, %w {epsilon = 1.0e-6 : f64} : (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<32xf32>) -> (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>)
  return
}

// -----

func.func @add_rms_norm_eps(%a: tensor<8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'epsilon' must be positive and finite, got -1}}
  %0:2 = tp.add_rms_norm %a, %a, %w {epsilon = -1.0 : f64} : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>)
  return
}

// -----

func.func @add_rms_norm_offset(%a: tensor<8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'weight_offset' must be finite}}
  %0:2 = tp.add_rms_norm %a, %a, %w {epsilon = 1.0e-6 : f64, weight_offset = 0x7FF0000000000000 : f64} : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>)
  return
}

// -----

func.func @rms_norm_weight_rank(%x: tensor<2x8x64xf32>, %w: tensor<1x64xf32>) {
  // expected-error @+1 {{weight must be 1-D, got rank 2}}
  %0 = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f64} : (tensor<2x8x64xf32>, tensor<1x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rms_norm_offset(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'weight_offset' must be finite}}
  %0 = tp.rms_norm %x, %w {epsilon = 1.0e-6 : f64, weight_offset = 0x7FF0000000000000 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<8x64xf32>) {
  // expected-error @+1 {{input must be [batch, seq, heads * head_dim], got rank 2}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<8x64xf32>
  return
}

// -----

func.func @rotary_heads(%x: tensor<2x8x60xf32>) {
  // expected-error @+1 {{features 60 are not a multiple of head_dim 16}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64} : tensor<2x8x60xf32>
  return
}

// -----

func.func @rotary_dim(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rotary_dim 32 exceeds head_dim 16}}
  %0 = tp.rotary %x {head_dim = 16 : i64, rotary_dim = 32 : i64, theta = 1.0e4 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_odd(%x: tensor<2x8x60xf32>) {
  // expected-error @+1 {{the rotated width must be even, got 5}}
  %0 = tp.rotary %x {head_dim = 6 : i64, rotary_dim = 5 : i64, theta = 1.0e4 : f64} : tensor<2x8x60xf32>
  return
}

// -----

func.func @rotary_theta(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'theta' must be positive and finite, got -1}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = -1.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_proportional(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rope_type 'proportional' is not one tp-opt implements (linear, llama3, yarn, dynamic, longrope)}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64, rope_type = "proportional", factor = 4.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_longrope_factors(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{long_factor has 2 factors for 8 rotated pairs}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64, rope_type = "longrope", original_max_position_embeddings = 8 : i64, attention_factor = 1.0 : f64, short_factor = array<f64: 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0>, long_factor = array<f64: 1.0, 2.0>} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_stray_long_factor(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{short_factor without a rope_type that takes it}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64, short_factor = array<f64: 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0>} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_dynamic_params(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rope_type 'dynamic' needs original_max_position_embeddings}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64, rope_type = "dynamic", factor = 2.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_llama3_params(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rope_type 'llama3' needs low_freq_factor}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 5.0e5 : f64, rope_type = "llama3", factor = 8.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_yarn_params(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{rope_type 'yarn' needs beta_fast}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64, rope_type = "yarn", factor = 4.0 : f64, original_max_position_embeddings = 4096 : i64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_stray_factor(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{factor without a rope_type that takes it}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 1.0e4 : f64, factor = 8.0 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_bands(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{low_freq_factor must be below high_freq_factor}}
  %0 = tp.rotary %x {head_dim = 16 : i64, theta = 5.0e5 : f64, rope_type = "llama3", factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 1.0 : f64, original_max_position_embeddings = 8192 : i64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @rotary_head_dim(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'head_dim' must be positive, got 0}}
  %0 = tp.rotary %x {head_dim = 0 : i64, theta = 1.0e4 : f64} : tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<2x8x48xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{num_heads 3 is not a multiple of num_kv_heads 2}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 3 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x48xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x48xf32>
  return
}

// -----

func.func @attention_q_features(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{q has 64 features, expected num_heads * head_dim = 128}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 8 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_kv_features(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{v has 16 features, expected num_kv_heads * head_dim = 32}}
  %0 = tp.attention %q, %k, %v {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x8x64xf32>, %k: tensor<3x8x32xf32>) {
  // expected-error @+1 {{q, k and v have different batch sizes}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<3x8x32xf32>, tensor<3x8x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_kv_seq(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x4x32xf32>) {
  // expected-error @+1 {{k and v have different sequence lengths}}
  %0 = tp.attention %q, %k, %v {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x4x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_mask(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %m: tensor<2x4xi64>) {
  // expected-error @+1 {{key mask must be [batch, seq_kv], got 'tensor<2x4xi64>'}}
  %0 = tp.attention %q, %k, %k mask %m {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x4xi64>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_window(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{'sliding_window' must be positive, got 0}}
  %0 = tp.attention %q, %k, %k {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64, sliding_window = 0 : i64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_softcap(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{'softcap' must be positive and finite, got -5}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64, softcap = -5.0 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{'scale' must be positive and finite, got 0}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{result type 'tensor<2x8x32xf32>' differs from q's 'tensor<2x8x64xf32>'}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @attention_elem(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xbf16>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'bf16'}}
  %0 = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @add_types(%a: tensor<2x8x64xf32>, %b: tensor<2x8x32xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tp.add"(%a, %b) : (tensor<2x8x64xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @mul_types(%a: tensor<2x8x64xf32>, %b: tensor<2x8x64xbf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tp.mul"(%a, %b) : (tensor<2x8x64xf32>, tensor<2x8x64xbf16>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @silu_types(%a: tensor<2x8x64xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tp.silu"(%a) : (tensor<2x8x64xf32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @relu_squared_elem(%a: tensor<2x8x64xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %0 = "tp.relu_squared"(%a) : (tensor<2x8x64xi64>) -> tensor<2x8x64xi64>
  return
}

// -----

func.func @gelu_keyword(%a: tensor<2x8x64xf32>) {
  // expected-error @+1 {{expected 'none' or 'tanh', got 'sigmoid'}}
  %0 = tp.gelu %a sigmoid : tensor<2x8x64xf32>
  return
}

// -----

func.func @gelu_types(%a: tensor<2x8x64xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "tp.gelu"(%a) {approximate = #tp<gelu_approximation tanh>} : (tensor<2x8x64xf32>) -> tensor<2x8x64xbf16>
  return
}

// -----

func.func @scale_factor(%a: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'factor' must be finite}}
  %0 = tp.scale %a by 0x7FF8000000000000 : tensor<2x8x64xf32>
  return
}

// -----

func.func @mamba_in_proj(%x: tensor<2x5x64xf32>, %in: tensor<160x64xf32>, %cw: tensor<96x1x4xf32>, %cb: tensor<96xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>, %nw: tensor<64xf32>, %out: tensor<64x64xf32>) {
  // expected-error @+1 {{in_proj_weight must be [164, 64], got 'tensor<160x64xf32>'}}
  %y = tp.mamba2_mixer %x, %in, %cw, %cb, %dt, %a, %d, %nw, %out {conv_kernel = 4 : i64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<2x5x64xf32>, tensor<160x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<2x5x64xf32>
  return
}

// -----

func.func @mamba_groups(%x: tensor<2x5x64xf32>, %in: tensor<164x64xf32>, %cw: tensor<96x1x4xf32>, %cb: tensor<96xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>, %nw: tensor<64xf32>, %out: tensor<64x64xf32>) {
  // expected-error @+1 {{num_heads 4 is not a multiple of n_groups 3}}
  %y = tp.mamba2_mixer %x, %in, %cw, %cb, %dt, %a, %d, %nw, %out {conv_kernel = 4 : i64, head_dim = 16 : i64, n_groups = 3 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<2x5x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<2x5x64xf32>
  return
}

// -----

func.func @mamba_conv(%x: tensor<2x5x64xf32>, %in: tensor<164x64xf32>, %cw: tensor<96x4xf32>, %cb: tensor<96xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>, %nw: tensor<64xf32>, %out: tensor<64x64xf32>) {
  // expected-error @+1 {{conv_weight must be [96, 1, 4], got 'tensor<96x4xf32>'}}
  %y = tp.mamba2_mixer %x, %in, %cw, %cb, %dt, %a, %d, %nw, %out {conv_kernel = 4 : i64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<2x5x64xf32>, tensor<164x64xf32>, tensor<96x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<2x5x64xf32>
  return
}

// -----

func.func @mamba_eps(%x: tensor<2x5x64xf32>, %in: tensor<164x64xf32>, %cw: tensor<96x1x4xf32>, %cb: tensor<96xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>, %nw: tensor<64xf32>, %out: tensor<64x64xf32>) {
  // expected-error @+1 {{'norm_eps' must be positive and finite, got 0}}
  %y = tp.mamba2_mixer %x, %in, %cw, %cb, %dt, %a, %d, %nw, %out {conv_kernel = 4 : i64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 0.0 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<2x5x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<2x5x64xf32>
  return
}

// -----

func.func @linear_bmm_rank(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{the bmm form needs a 3-D input, got rank 2}}
  %0 = tp.linear %x, %w {form = #tp<linear_form bmm>} : (tensor<4x64xf32>, tensor<32x64xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_mm_rank(%x: tensor<2x4x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{the mm form needs a 2-D input, got rank 3}}
  %0 = tp.linear %x, %w {form = #tp<linear_form mm>} : (tensor<2x4x64xf32>, tensor<32x64xf32>) -> tensor<2x4x32xf32>
  return
}

// -----

func.func @bias_add_features(%x: tensor<2x4x32xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{bias 'tensor<16xf32>' must be 1-D with the features of 'tensor<2x4x32xf32>'}}
  %0 = tp.bias_add %x, %b : tensor<2x4x32xf32>, tensor<16xf32>
  return
}

// -----

func.func @softcap_cap(%a: tensor<2x8x64xf32>) {
  // expected-error @+1 {{'cap' must be positive and finite, got 0}}
  %0 = tp.softcap %a cap 0.0 : tensor<2x8x64xf32>
  return
}

// -----

func.func @cross_entropy_shapes(%l: tensor<2x8x16xf32>, %ids: tensor<2x7xi64>, %m: tensor<2x8xi64>) {
  // expected-error @+1 {{dimension 1 of logits, ids, mask and lse differ}}
  %loss, %lse = tp.cross_entropy %l, %ids, %m : (tensor<2x8x16xf32>, tensor<2x7xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_grad_input_weight(%dy: tensor<2x8x16xf32>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{dy 'tensor<2x8x16xf32>' and result 'tensor<2x8x4xf32>' do not match weight 'tensor<8x4xf32>'}}
  %0 = tp.linear_grad_input %dy, %w : (tensor<2x8x16xf32>, tensor<8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @linear_grad_weight_shape(%dy: tensor<2x8x16xf32>, %x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{result 'tensor<4x16xf32>' is not [dy's last, x's last] of 'tensor<2x8x16xf32>', 'tensor<2x8x4xf32>'}}
  %0 = tp.linear_grad_weight %dy, %x : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @sum_leading_shape(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{result 'tensor<8xf32>' is not the last dimension of 'tensor<2x8x16xf32>'}}
  %0 = tp.sum_leading %x : (tensor<2x8x16xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @rms_norm_grad_types(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %dy: tensor<2x8x8xf32>) {
  // expected-error @+1 {{x, dy and dx must have one type}}
  %dx, %dw = tp.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-6 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @attention_grad_heads(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{num_heads 4 is not a multiple of num_kv_heads 3}}
  %dq, %dk, %dv = tp.attention_grad %q, %k, %k, %q {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 3 : i64, scale = 2.5e-01 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  return
}

// -----

func.func @attention_lse_heads(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{lse must be [batch, seq_q, num_heads] of q 'tensor<2x8x64xf32>', got 'tensor<2x4x8xf32>'}}
  %o, %lse = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x64xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_lse_type(%q: tensor<2x8x64xbf16>, %k: tensor<2x8x32xbf16>) {
  // expected-error @+1 {{result #1 must be ranked tensor of 32-bit float values, but got 'tensor<2x8x4xbf16>'}}
  %o, %lse = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) -> (tensor<2x8x64xbf16>, tensor<2x8x4xbf16>)
  return
}

// -----

func.func @attention_grad_saved_out(%q: tensor<2x8x64xbf16>, %k: tensor<2x8x32xbf16>, %o: tensor<2x8x64xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+1 {{the forward's out must have q's type 'tensor<2x8x64xbf16>', got 'tensor<2x8x64xf32>'}}
  %dq, %dk, %dv = tp.attention_grad %q, %k, %k, %q saved %o, %lse {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>, tensor<2x8x64xbf16>, tensor<2x8x64xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>)
  return
}

// -----

func.func @attention_grad_saved_lse(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %lse: tensor<2x8x2xf32>) {
  // expected-error @+1 {{lse must be [batch, seq_q, num_heads] of q 'tensor<2x8x64xf32>', got 'tensor<2x8x2xf32>'}}
  %dq, %dk, %dv = tp.attention_grad %q, %k, %k, %q saved %q, %lse {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x2xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  return
}

// -----

func.func @attention_grad_saved_alone(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>) {
  // expected-error @+1 {{takes the forward's out and lse together}}
  %dq, %dk, %dv = "tp.attention_grad"(%q, %k, %k, %q, %q) <{head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0, 1, 0>}> : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  return
}

// -----

func.func @accumulate_grad_fqn(%g: tensor<4xf32>, %w: tensor<4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{the parameter must be the argument of the function whose tp.fqn is 'b.weight'}}
  tp.accumulate_grad %g into %w {fqn = "b.weight"} : tensor<4xf32>
  return
}

// -----

func.func @accumulate_grad_split_class(%g: tensor<4xf32>, %w: tensor<4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{a split parameter's gradient has no replica class}}
  tp.accumulate_grad %g into %w {fqn = "a.weight", split_dim = 0 : i64, reduction = #tp.grad_reduction<sum>} : tensor<4xf32>
  return
}

// -----

func.func @grad_bucket_empty() {
  // expected-error @+1 {{a bucket holds at least one gradient}}
  tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = [], reduction = #tp.grad_reduction<mean>}
  return
}

// -----

func.func @grad_bucket_bytes() {
  // expected-error @+1 {{bucket must be at least 0 and bytes positive, got 0 and 0}}
  tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 0 : i64, dtype = f32, fqns = ["a"], reduction = #tp.grad_reduction<mean>}
  return
}

// -----

func.func @grad_bucket_twice() {
  // expected-error @+1 {{gradient 'a' is in the bucket twice}}
  tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a", "a"], reduction = #tp.grad_reduction<sum>}
  return
}

// -----

func.func @reduce_scatter_no_grid() {
  // expected-error @+1 {{needs a one-dimensional shard.grid @dp of at least 2 ranks}}
  tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a"], padded_bytes = 1024 : i64}
  return
}

// -----

module {
  shard.grid @dp(shape = 3)
  func.func @reduce_scatter_runs() {
    // expected-error @+1 {{padded_bytes must split into 3 equal runs of FP32 elements, got 1024}}
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a"], padded_bytes = 1024 : i64}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @reduce_scatter_padding() {
    // expected-error @+1 {{bucket must be at least 0, bytes (FP32) positive and padded_bytes at least as many, both multiples of 4; got 0, 2048 and 1024}}
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 2048 : i64, dtype = f32, fqns = ["a"], padded_bytes = 1024 : i64}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @reduce_scatter_twice() {
    // expected-error @+1 {{gradient 'a' is in the bucket twice}}
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a", "a"], padded_bytes = 1024 : i64}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @streamed_pair() {
    // expected-error @+1 {{streamed needs micro_batch and one parameter, got 2}}
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 32 : i64, dtype = f32, fqns = ["a", "b"], micro_batch, padded_bytes = 1024 : i64, streamed}
    return
  }
}

// -----

func.func @runs_without_block_rows(%h: tensor<?x?x4xf32>, %ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{runs_bucket (at least 0) and block_rows (at least 1) go together}}
  %loss, %dx = tp.accumulate_linear_cross_entropy %h, %ids, %mask into %w {fqn = "lm_head.weight", runs_bucket = 0 : i64} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<8x4xf32>) -> (tensor<f32>, tensor<?x?x4xf32>)
  return
}

// -----

func.func @lookup_runs_without_block_rows(%ids: tensor<?x?xi64>, %w: tensor<8x4xf32>) {
  // expected-error @+1 {{runs_bucket (at least 0) and block_rows (at least 1) go together}}
  %h = tp.embedding %ids, %w {runs_bucket = 0 : i64} : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  return
}

// -----

func.func @runs_of_a_computed_table(%ids: tensor<?x?xi64>, %dy: tensor<?x?x4xf32>, %w: tensor<8x4xf32>) {
  %t = tp.add %w, %w : tensor<8x4xf32>
  // expected-error @+1 {{with runs_bucket reads the parameter as the function's argument, which the runtime holds as runs; got a value computed in the function}}
  tp.accumulate_embedding_grad %ids, %dy into %t {block_rows = 2 : i64, fqn = "model.embed_tokens.weight", runs_bucket = 0 : i64} : tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>
  return
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @micro_batch_in_update() attributes {tp.entry = "optimizer_step"} {
    // expected-error @+1 {{with micro_batch must be in the training step (tp.entry = "train_step"), not in "optimizer_step"}}
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a"], micro_batch, padded_bytes = 1024 : i64}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @boundary_bucket_in_step() attributes {tp.entry = "train_step"} {
    // expected-error @+1 {{without micro_batch must be in the optimizer step (tp.entry = "optimizer_step"), not in "train_step"}}
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a"], padded_bytes = 1024 : i64}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @all_gather_runs() {
    // expected-error @+1 {{bytes must split into 2 equal runs of 'bf16' elements, got 6}}
    tp.param_bucket_all_gather {bucket = 0 : i64, bytes = 6 : i64, dtype = bf16, fqns = ["a"]}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @all_gather_empty() {
    // expected-error @+1 {{a bucket holds at least one gradient}}
    tp.param_bucket_all_gather {bucket = 0 : i64, bytes = 8 : i64, dtype = f32, fqns = []}
    return
  }
}

// -----

func.func @optimizer_name() {
  // expected-error @+1 {{optimizer must be adamw or sgd, got 'adam'}}
  tp.optimizer_update {optimizer = "adam"}
  return
}

// -----

func.func @broadcast_replica_fqn(%w: tensor<4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{the parameter must be the argument of the function whose tp.fqn is 'b.weight'}}
  tp.broadcast_replica %w {fqn = "b.weight"} : tensor<4xf32>
  return
}

// -----

func.func @accumulate_grad_owned_class(%g: tensor<4xf32>, %w: tensor<4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{an owned (excluded) parameter's gradient has no replica class}}
  tp.accumulate_grad %g into %w {fqn = "a.weight", owned, reduction = #tp.grad_reduction<mean>} : tensor<4xf32>
  return
}

// -----

func.func @silu_mul_grad_types(%g: tensor<4x16xf32>, %u: tensor<4x16xf32>, %dy: tensor<4x16xbf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0:2 = "tp.silu_mul_grad"(%g, %u, %dy) : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xbf16>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @silu_mul_grad_shapes(%g: tensor<4x16xf32>, %u: tensor<4x8xf32>, %dy: tensor<4x16xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0:2 = "tp.silu_mul_grad"(%g, %u, %dy) : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @silu_mul_grad_integer(%g: tensor<4x16xi64>) {
  // expected-error @+1 {{operand #0 must be}}
  %0:2 = tp.silu_mul_grad %g, %g, %g : tensor<4x16xi64>
  return
}

// -----

func.func @accumulate_linear_grad_weight_shape(%dy: tensor<2x3x8xf32>, %x: tensor<2x3x4xf32>, %w: tensor<4x8xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{parameter 'tensor<4x8xf32>' is not [dy's last, x's last] of 'tensor<2x3x8xf32>', 'tensor<2x3x4xf32>'}}
  tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "a.weight"} : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @accumulate_linear_grad_weight_rows(%dy: tensor<2x3x8xf32>, %x: tensor<2x5x4xf32>, %w: tensor<8x4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{dimension 1 of dy (3) and x (5) differ}}
  tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "a.weight"} : tensor<2x3x8xf32>, tensor<2x5x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_linear_grad_weight_types(%dy: tensor<2x3x8xbf16>, %x: tensor<2x3x4xf32>, %w: tensor<8x4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{dy, x and the parameter must have one element type}}
  tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "a.weight"} : tensor<2x3x8xbf16>, tensor<2x3x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_embedding_grad_rows(%ids: tensor<2x3xi64>, %dy: tensor<2x5x4xf32>, %t: tensor<8x4xf32> {tp.fqn = "e.weight"}) {
  // expected-error @+1 {{dy must be [ids..., hidden] for 'tensor<2x3xi64>' and a table of 'tensor<8x4xf32>'}}
  tp.accumulate_embedding_grad %ids, %dy into %t {fqn = "e.weight"} : tensor<2x3xi64>, tensor<2x5x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_embedding_grad_hidden(%ids: tensor<2x3xi64>, %dy: tensor<2x3x6xf32>, %t: tensor<8x4xf32> {tp.fqn = "e.weight"}) {
  // expected-error @+1 {{dy must be [ids..., hidden]}}
  tp.accumulate_embedding_grad %ids, %dy into %t {fqn = "e.weight"} : tensor<2x3xi64>, tensor<2x3x6xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_embedding_grad_fqn(%ids: tensor<2x3xi64>, %dy: tensor<2x3x4xf32>, %t: tensor<8x4xf32> {tp.fqn = "e.weight"}) {
  // expected-error @+1 {{'other.weight'}}
  tp.accumulate_embedding_grad %ids, %dy into %t {fqn = "other.weight"} : tensor<2x3xi64>, tensor<2x3x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_embedding_grad_split_class(%ids: tensor<2x3xi64>, %dy: tensor<2x3x4xf32>, %t: tensor<8x4xf32> {tp.fqn = "e.weight"}) {
  // expected-error @+1 {{a split parameter's gradient has no replica class}}
  tp.accumulate_embedding_grad %ids, %dy into %t {fqn = "e.weight", split_dim = 0 : i64, reduction = #tp.grad_reduction<sum>} : tensor<2x3xi64>, tensor<2x3x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_linear_cross_entropy_weight(%x: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>, %w: tensor<8x6xf32> {tp.fqn = "lm_head.weight"}) {
  // expected-error @+1 {{weight must be [vocab, 4], got 'tensor<8x6xf32>'}}
  %loss, %dx = tp.accumulate_linear_cross_entropy %x, %ids, %ids into %w {fqn = "lm_head.weight"} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<8x6xf32>) -> (tensor<f32>, tensor<2x3x4xf32>)
  return
}

// -----

func.func @accumulate_linear_cross_entropy_types(%x: tensor<2x3x4xbf16>, %ids: tensor<2x3xi64>, %w: tensor<8x4xf32> {tp.fqn = "lm_head.weight"}) {
  // expected-error @+1 {{x and the parameter must have one element type}}
  %loss, %dx = tp.accumulate_linear_cross_entropy %x, %ids, %ids into %w {fqn = "lm_head.weight"} : (tensor<2x3x4xbf16>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<8x4xf32>) -> (tensor<f32>, tensor<2x3x4xbf16>)
  return
}

// -----

func.func @accumulate_linear_cross_entropy_owned_class(%x: tensor<2x3x4xf32>, %ids: tensor<2x3xi64>, %w: tensor<8x4xf32> {tp.fqn = "lm_head.weight"}) {
  // expected-error @+1 {{an owned (excluded) parameter's gradient has no replica class}}
  %loss, %dx = tp.accumulate_linear_cross_entropy %x, %ids, %ids into %w {fqn = "lm_head.weight", owned, reduction = #tp.grad_reduction<mean>} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<8x4xf32>) -> (tensor<f32>, tensor<2x3x4xf32>)
  return
}

// -----

func.func @accumulate_linear_grad_weight_fqn(%dy: tensor<2x3x8xf32>, %x: tensor<2x3x4xf32>, %w: tensor<8x4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{the parameter must be the argument of the function whose tp.fqn is 'b.weight'}}
  tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "b.weight"} : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @accumulate_linear_grad_weight_class(%dy: tensor<2x3x8xf32>, %x: tensor<2x3x4xf32>, %w: tensor<8x4xf32> {tp.fqn = "a.weight"}) {
  // expected-error @+1 {{a split parameter's gradient has no replica class}}
  tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "a.weight", split_dim = 0 : i64, derived_reduction = #tp.grad_reduction<sum>} : tensor<2x3x8xf32>, tensor<2x3x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @grad_bucket_group() {
  // expected-error @+1 {{group must be "tp" or "dp", got 'ep'}}
  tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 16 : i64, dtype = f32, fqns = ["a"], group = "ep", reduction = #tp.grad_reduction<sum>}
  return
}

// -----

func.func @linear_epilogue_in(%x: tensor<2x8x64xf32>, %w: tensor<128x32xf32>, %r: tensor<2x8x128xf32>) {
  // expected-error @+1 {{input features 64 differ from the weight's in 32}}
  %0 = tp.linear_epilogue add %x, %w, %r : (tensor<2x8x64xf32>, tensor<128x32xf32>, tensor<2x8x128xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

func.func @linear_epilogue_other(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>, %r: tensor<2x8x64xf32>) {
  // expected-error @+1 {{all of {other, result} have same type}}
  %0 = tp.linear_epilogue silu_mul %x, %w, %r : (tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x128xf32>
  return
}

// -----

func.func @linear_epilogue_form(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %r: tensor<16x128xf32>) {
  // expected-error @+1 {{the bmm form needs a 3-D input, got rank 2}}
  %0 = tp.linear_epilogue add %x, %w, %r {form = #tp<linear_form bmm>} : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @linear_epilogue_kind(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %r: tensor<16x128xf32>) {
  // expected-error @+1 {{expected 'add' or 'silu_mul', got 'gelu_mul'}}
  %0 = tp.linear_epilogue gelu_mul %x, %w, %r : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return
}

// -----

func.func @linear_cross_entropy_rank(%x: tensor<16x64xf32>, %w: tensor<128x64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{expected x [batch, seq, hidden], ids and mask [batch, seq]}}
  %0:3 = tp.linear_cross_entropy %x, %w, %ids, %ids : (tensor<16x64xf32>, tensor<128x64xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<16x64xf32>, tensor<128x64xf32>)
  return
}

// -----

func.func @linear_cross_entropy_ids(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>, %ids: tensor<2x9xi64>) {
  // expected-error @+1 {{dimension 1 of x, ids and mask differ}}
  %0:3 = tp.linear_cross_entropy %x, %w, %ids, %ids : (tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x9xi64>, tensor<2x9xi64>) -> (tensor<f32>, tensor<2x8x64xf32>, tensor<128x64xf32>)
  return
}

// -----

func.func @linear_cross_entropy_weight(%x: tensor<2x8x64xf32>, %w: tensor<128x32xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{weight must be [vocab, 64], got 'tensor<128x32xf32>'}}
  %0:3 = tp.linear_cross_entropy %x, %w, %ids, %ids : (tensor<2x8x64xf32>, tensor<128x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8x64xf32>, tensor<128x32xf32>)
  return
}

// -----

func.func @linear_cross_entropy_dx(%x: tensor<2x8x64xf32>, %w: tensor<128x64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{all of {x, dx} have same type}}
  %0:3 = tp.linear_cross_entropy %x, %w, %ids, %ids : (tensor<2x8x64xf32>, tensor<128x64xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8x32xf32>, tensor<128x64xf32>)
  return
}

// -----

func.func @linear_siblings_count(%x: tensor<16x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{expects two or three weights, got 1}}
  %0 = tp.linear_siblings %x, %w : (tensor<16x64xf32>, tensor<32x64xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @linear_siblings_results(%x: tensor<16x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{expects one result per weight, got 1 results for 2 weights}}
  %0 = tp.linear_siblings %x, %w, %w : (tensor<16x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @linear_siblings_element(%x: tensor<16x64xf32>, %a: tensor<32x64xf32>, %b: tensor<8x64xbf16>) {
  // expected-error @+1 {{weights must share one element type, got 'f32' and 'bf16'}}
  %0:2 = tp.linear_siblings %x, %a, %b : (tensor<16x64xf32>, tensor<32x64xf32>, tensor<8x64xbf16>) -> (tensor<16x32xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @linear_siblings_features(%x: tensor<16x64xf32>, %a: tensor<32x64xf32>, %b: tensor<8x64xf32>) {
  // expected-error @+1 {{result features 32 differ from the weight's out 8}}
  %0:2 = tp.linear_siblings %x, %a, %b : (tensor<16x64xf32>, tensor<32x64xf32>, tensor<8x64xf32>) -> (tensor<16x32xf32>, tensor<16x32xf32>)
  return
}

// -----

func.func @linear_siblings_form(%x: tensor<16x64xf32>, %a: tensor<32x64xf32>, %b: tensor<8x64xf32>) {
  // expected-error @+1 {{the bmm form needs a 3-D input, got rank 2}}
  %0:2 = tp.linear_siblings %x, %a, %b {form = #tp<linear_form bmm>} : (tensor<16x64xf32>, tensor<32x64xf32>, tensor<8x64xf32>) -> (tensor<16x32xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @linear_swiglu_weights(%x: tensor<16x64xf32>, %g: tensor<32x64xf32>, %u: tensor<16x64xf32>) {
  // expected-error @+1 {{gate and up weights differ: 'tensor<32x64xf32>' and 'tensor<16x64xf32>'}}
  %0 = tp.linear_swiglu %x, %g, %u : (tensor<16x64xf32>, tensor<32x64xf32>, tensor<16x64xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @linear_swiglu_features(%x: tensor<16x64xf32>, %g: tensor<32x64xf32>) {
  // expected-error @+1 {{result features 16 differ from the weight's out 32}}
  %0 = tp.linear_swiglu %x, %g, %g : (tensor<16x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<16x16xf32>
  return
}

// -----

func.func @mamba_dt_min_nan(%x: tensor<2x5x64xf32>, %in: tensor<164x64xf32>, %cw: tensor<96x1x4xf32>, %cb: tensor<96xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>, %nw: tensor<64xf32>, %out: tensor<64x64xf32>) {
  // expected-error @+1 {{'dt_min' must be a number or -inf, got nan}}
  %y = tp.mamba2_mixer %x, %in, %cw, %cb, %dt, %a, %d, %nw, %out {conv_kernel = 4 : i64, dt_min = 0x7FF8000000000000 : f64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<2x5x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<2x5x64xf32>
  return
}

// -----

func.func @rotary_factor_inf(%x: tensor<2x5x64xf32>) {
  // expected-error @+1 {{factor must be positive and finite, got INF}}
  %y = tp.rotary %x {factor = 0x7FF0000000000000 : f64, head_dim = 16 : i64, rope_type = "linear", theta = 1.0e+04 : f64} : tensor<2x5x64xf32>
  return
}

// -----

func.func @feature_slice_past_row(%x: tensor<2x5x96xf32>) {
  // expected-error @+1 {{features [64, 128) are not within the 96 of 'tensor<2x5x96xf32>'}}
  %y = tp.feature_slice %x [64, 64] : tensor<2x5x96xf32> -> tensor<2x5x64xf32>
  return
}

// -----

func.func @feature_slice_size(%x: tensor<2x5x96xf32>) {
  // expected-error @+1 {{the part's last dimension (32) is not the size 64}}
  %y = tp.feature_slice %x [0, 64] : tensor<2x5x96xf32> -> tensor<2x5x32xf32>
  return
}

// -----

func.func @feature_slice_dynamic_row(%x: tensor<2x5x?xf32>) {
  // expected-error @+1 {{the last dimension of 'tensor<2x5x?xf32>' must be static}}
  %y = tp.feature_slice %x [0, 8] : tensor<2x5x?xf32> -> tensor<2x5x8xf32>
  return
}

// -----

func.func @feature_slice_leading(%x: tensor<2x5x96xf32>) {
  // expected-error @+1 {{dimension 1 of whole (5) and part (6) differ}}
  %y = tp.feature_slice %x [0, 8] : tensor<2x5x96xf32> -> tensor<2x6x8xf32>
  return
}

// -----

func.func @feature_slice_type(%x: tensor<2x5x96xf32>) {
  // expected-error @+1 {{element types differ: 'f32' vs 'bf16'}}
  %y = tp.feature_slice %x [0, 8] : tensor<2x5x96xf32> -> tensor<2x5x8xbf16>
  return
}

// -----

func.func @feature_slice_grad_width(%dy: tensor<2x5x32xf32>) {
  // expected-error @+1 {{the result's last dimension is not the width 128}}
  %y = tp.feature_slice_grad %dy [0] width 128 : tensor<2x5x32xf32> -> tensor<2x5x96xf32>
  return
}

// -----

func.func @feature_slice_grad_offset(%dy: tensor<2x5x32xf32>) {
  // expected-error @+1 {{features [-1, 31) are not within the 96 of 'tensor<2x5x96xf32>'}}
  %y = tp.feature_slice_grad %dy [-1] width 96 : tensor<2x5x32xf32> -> tensor<2x5x96xf32>
  return
}

// -----

func.func @layer_negative(%x: tensor<2x5x8xf32>) {
  // expected-error @+1 {{'tp.layer' must be a non-negative i64 (a decoder layer), got -1 : i64}}
  %y = tp.silu %x {tp.layer = -1 : i64} : tensor<2x5x8xf32>
  return
}

// -----

func.func @layer_not_integer(%x: tensor<2x5x8xf32>) {
  // expected-error @+1 {{'tp.layer' must be a non-negative i64 (a decoder layer), got "0"}}
  %y = tp.silu %x {tp.layer = "0"} : tensor<2x5x8xf32>
  return
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @gather_results() {
    // expected-error @+1 {{has one result per parameter: 2 parameters, 1 results}}
    %w = tp.param_bucket_gather {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["a", "b"]} : tensor<4xf32>
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @gather_dtype() {
    // expected-error @+1 {{parameter 'a' is 'tensor<4xbf16>', the bucket holds 'f32'}}
    %w = tp.param_bucket_gather {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["a"]} : tensor<4xbf16>
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @gather_runs() {
    // expected-error @+1 {{bytes must split into 2 equal runs of 'f32' elements, got 1020}}
    %w = tp.param_bucket_gather {bucket = 0 : i64, bytes = 1020 : i64, dtype = f32, fqns = ["a"]} : tensor<4xf32>
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @gathered_other(%g: tensor<4xf32>) {
    %w:2 = tp.param_bucket_gather {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["a", "b"]} : tensor<4xf32>, tensor<4xf32>
    // expected-error @+1 {{the parameter is gathered as 'a', not 'b'}}
    tp.accumulate_grad %g into %w#0 {fqn = "b"} : tensor<4xf32>
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  func.func @shard_outside_init() attributes {tp.entry = "train_step"} {
    // expected-error @+1 {{must be in the init (tp.entry = "init"), not in "train_step"}}
    tp.param_bucket_shard {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["a"]}
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 4)
  func.func @shard_runs() attributes {tp.entry = "init"} {
    // expected-error @+1 {{bytes must split into 4 equal runs of 'bf16' elements, got 1022}}
    tp.param_bucket_shard {bucket = 0 : i64, bytes = 1022 : i64, dtype = bf16, fqns = ["a"]}
    return
  }
}

// -----

func.func @embedding_vocab_ranges_alone(%ids: tensor<2x8xi64>, %t: tensor<3x4xf32>) {
  // expected-error @+1 {{vocab_starts and vocab_sizes come together, one entry per rank, on a vocab_parallel op}}
  %0 = tp.embedding %ids, %t {vocab_starts = array<i64: 0, 3, 5>, vocab_sizes = array<i64: 3, 2, 2>} : (tensor<2x8xi64>, tensor<3x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @embedding_vocab_ranges_rows(%ids: tensor<2x8xi64>, %t: tensor<2x4xf32>) {
  // expected-error @+1 {{the table's rows (2) are not the largest of vocab_sizes (3)}}
  %0 = tp.embedding %ids, %t {vocab_parallel, vocab_starts = array<i64: 0, 3, 5>, vocab_sizes = array<i64: 3, 2, 2>} : (tensor<2x8xi64>, tensor<2x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @all_gather_uneven_input(%x: tensor<2x8x2xf32>) {
  // expected-error @+1 {{input axis 2 is not the largest size (3)}}
  %0 = tp.all_gather_uneven %x on @tp grid_axes = [0] gather_axis = 2 sizes = [3, 2, 2] : tensor<2x8x2xf32> -> tensor<2x8x7xf32>
  return
}

// -----

func.func @all_gather_uneven_result(%x: tensor<2x8x3xf32>) {
  // expected-error @+1 {{result axis 9 is not the sizes' sum (7)}}
  %0 = tp.all_gather_uneven %x on @tp grid_axes = [0] gather_axis = 2 sizes = [3, 2, 2] : tensor<2x8x3xf32> -> tensor<2x8x9xf32>
  return
}

// -----

func.func @all_gather_uneven_sizes(%x: tensor<2x8x3xf32>) {
  // expected-error @+1 {{needs a size of at least 1 for each rank}}
  %0 = tp.all_gather_uneven %x on @tp grid_axes = [0] gather_axis = 2 sizes = [3, 0, 2] : tensor<2x8x3xf32> -> tensor<2x8x5xf32>
  return
}

// -----

func.func @reduce_scatter_uneven_input(%x: tensor<2x8x6xf32>) {
  // expected-error @+1 {{input axis 6 is not the sizes' sum (7)}}
  %0 = tp.reduce_scatter_uneven %x on @tp grid_axes = [0] scatter_axis = 2 sizes = [3, 2, 2] : tensor<2x8x6xf32> -> tensor<2x8x3xf32>
  return
}

// -----

func.func @reduce_scatter_uneven_result(%x: tensor<2x8x7xf32>) {
  // expected-error @+1 {{result axis 2 is not the largest size (3)}}
  %0 = tp.reduce_scatter_uneven %x on @tp grid_axes = [0] scatter_axis = 2 sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x2xf32>
  return
}

// -----

func.func @reduce_scatter_uneven_axis(%x: tensor<2x8x7xf32>) {
  // expected-error @+1 {{axis 3 does not relate 'tensor<2x8x3xf32>' and 'tensor<2x8x7xf32>'}}
  %0 = tp.reduce_scatter_uneven %x on @tp grid_axes = [0] scatter_axis = 3 sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
  return
}

// -----

func.func @all_slice_uneven_range(%x: tensor<2x8x7xf32>) {
  // expected-error @+1 {{range [5, 8) is not in input axis 7}}
  %0 = tp.all_slice_uneven %x on @tp grid_axes = [0] slice_axis = 2 starts = [0, 3, 5] sizes = [3, 2, 3] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
  return
}

// -----

func.func @all_slice_uneven_counts(%x: tensor<2x8x7xf32>) {
  // expected-error @+1 {{needs a start and a size for each rank}}
  %0 = tp.all_slice_uneven %x on @tp grid_axes = [0] slice_axis = 2 starts = [0, 3] sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
  return
}

// -----

func.func @replica_sum_numbering(%g: tensor<4x4xf32>) {
  // expected-error @+1 {{blocks must number the ranks' blocks from 0 in the order they first appear, got array<i64: 0, 2, 2>}}
  %0 = tp.replica_sum %g {blocks = array<i64: 0, 2, 2>} : tensor<4x4xf32>
  return
}

// -----

func.func @replica_sum_unshared(%g: tensor<4x4xf32>) {
  // expected-error @+1 {{no block is held by more than one rank: nothing to sum}}
  %0 = tp.replica_sum %g {blocks = array<i64: 0, 1, 2>} : tensor<4x4xf32>
  return
}

// -----

func.func @cross_entropy_ranges_alone(%l: tensor<2x8x3xf32>, %ids: tensor<2x8xi64>, %m: tensor<2x8xi64>) {
  // expected-error @+1 {{vocab_starts and vocab_sizes come together, one entry per rank, on a vocab_parallel op}}
  %loss, %lse = tp.cross_entropy %l, %ids, %m {vocab_starts = array<i64: 0, 3, 5>, vocab_sizes = array<i64: 3, 2, 2>} : (tensor<2x8x3xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  return
}

// -----

func.func @cross_entropy_grad_ranges(%l: tensor<2x8x2xf32>, %ids: tensor<2x8xi64>, %m: tensor<2x8xi64>, %lse: tensor<2x8xf32>) {
  // expected-error @+1 {{the logits' vocabulary entries (2) are not the largest of vocab_sizes (3)}}
  %0 = tp.cross_entropy_grad %l, %ids, %m, %lse {vocab_parallel, vocab_starts = array<i64: 0, 3, 5>, vocab_sizes = array<i64: 3, 2, 2>} : (tensor<2x8x2xf32>, tensor<2x8xi64>, tensor<2x8xi64>, tensor<2x8xf32>) -> tensor<2x8x2xf32>
  return
}

// -----

func.func @embedding_grad_ranges(%ids: tensor<2x8xi64>, %dy: tensor<2x8x4xf32>, %t: tensor<3x4xf32>) {
  // expected-error @+1 {{a rank's vocabulary rows need a start of at least 0 and a size of at least 1}}
  %0 = tp.embedding_grad %ids, %dy, %t {vocab_parallel, vocab_starts = array<i64: 0, 3, 6>, vocab_sizes = array<i64: 3, 3, 0>} : (tensor<2x8xi64>, tensor<2x8x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  return
}
