// RUN: tp-opt %s --split-input-file --verify-diagnostics

// tp.config is the typed configuration of a raised model: every field has
// one type, and a field that is not one is an error.

// expected-error @+1 {{'builtin.module' op 'tp.config' field 'hidden_size' must be a 64-bit integer, got "64"}}
module attributes {tp.config = {architecture = "llama", hidden_size = "64"}} {
}

// -----

// expected-error @+1 {{'builtin.module' op 'tp.config' has an unknown field 'hiden_size'}}
module attributes {tp.config = {hiden_size = 64 : i64}} {
}

// -----

// expected-error @+1 {{'builtin.module' op 'tp.config' field 'layer_types' must be a list of strings, got [1]}}
module attributes {tp.config = {layer_types = [1 : i64]}} {
}

// -----

// expected-error @+1 {{'builtin.module' op 'tp.config' must be a dictionary}}
module attributes {tp.config = "llama"} {
}

// -----

// Every kind of field, well typed.
module attributes {tp.config = {architecture = "gemma3", layer_types = ["sliding_attention", "full_attention"], qk_norm = true, rms_norm_eps = 1.000000e-06 : f64, sliding_window = 4 : i64}} {
}
