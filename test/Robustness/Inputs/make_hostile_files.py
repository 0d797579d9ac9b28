#!/usr/bin/env python3
"""Writes hostile files for test/Robustness/hostile-files.test: JSON nested
far deeper than any reader's stack allows, a JSON file larger than a config
can be, fields of the wrong JSON type, and a safetensors file whose header
is such a JSON.

    make_hostile_files.py OUT_DIR LLAMA_CONFIG_JSON
"""
import json
import struct
import sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
config = json.loads(Path(sys.argv[2]).read_text())

DEPTH = 200_000
# Arrays and objects nested DEPTH levels deep: a recursive parser's stack
# overflows long before the end.
deep_arrays = "[" * DEPTH + "]" * DEPTH
deep_objects = '{"a":' * DEPTH + "1" + "}" * DEPTH
(out / "deep_arrays.json").write_text(deep_arrays)
(out / "deep_objects.json").write_text(deep_objects)
# Deep inside a real config, after valid fields.
(out / "deep_config.json").write_text(
    json.dumps(config)[:-1] + ', "extra": ' + deep_arrays + "}")
# A PEFT adapter directory whose adapter_config.json is deep.
adapter = out / "deep_adapter"
adapter.mkdir(exist_ok=True)
(adapter / "adapter_config.json").write_text(deep_objects)
# A 17 MiB JSON object (a config is kilobytes).
(out / "huge.json").write_text('{"pad": "' + "x" * (17 << 20) + '"}')
# A safetensors file whose header is the deep JSON.
header = deep_arrays.encode()
(out / "deep.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)

# Fields of the wrong JSON type, each in a copy of the real config.
def wrong(name, change):
    c = json.loads(json.dumps(config))
    change(c)
    (out / f"{name}.json").write_text(json.dumps(c))

wrong("vocab_string", lambda c: c.__setitem__("vocab_size", str(c["vocab_size"])))
wrong("tie_string", lambda c: c.__setitem__("tie_word_embeddings", "false"))
wrong("eps_list", lambda c: c.__setitem__("rms_norm_eps", [1e-6]))
wrong("rope_factor_string", lambda c: c.__setitem__(
    "rope_parameters", {"rope_type": "linear", "rope_theta": 10000.0,
                        "factor": "4"}))
wrong("layer_types_int", lambda c: c.__setitem__("layer_types", [1, 2]))
wrong("text_config_vocab", lambda c: c.__setitem__(
    "text_config", {"vocab_size": 12.5}))
