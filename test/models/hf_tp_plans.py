#!/usr/bin/env python3
"""transformers' own tensor-parallel plans, as data: for every model_type
tp-opt accepts, the `base_model_tp_plan` its config class declares (keys
relative to the inner model; Gemma3's multimodal config carries its text
config's), and the `_tp_plan` of its causal-LM class (lm_head), with the
inner model's attribute path. Written to hf_tp_plans.json, which
tp-unittests compares with tp-opt's table (lib/Plan/HFPlans.cpp), so the
suite does not need transformers.

    .venv/bin/python test/models/hf_tp_plans.py

Needs the model tools (scripts/setup.sh --models).
"""
import json
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import transformers  # noqa: E402
from transformers import CONFIG_MAPPING  # noqa: E402
from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

MODEL_TYPES = ["llama", "mistral", "qwen2", "qwen3", "gemma3", "gemma3_text",
               "nemotron_h"]


def main():
    table = {"transformers": transformers.__version__, "model_types": {}}
    for model_type in MODEL_TYPES:
        config_cls = CONFIG_MAPPING[model_type]
        lm_cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
        plan_cls = config_cls
        if config_cls.base_model_tp_plan is None and hasattr(config_cls(), "text_config"):
            plan_cls = type(config_cls().text_config)
        table["model_types"][model_type] = {
            "config_class": plan_cls.__name__,
            "base_model_tp_plan": dict(plan_cls.base_model_tp_plan or {}),
            "causal_lm_class": lm_cls.__name__,
            "causal_lm_tp_plan": dict(getattr(lm_cls, "_tp_plan", None) or {}),
        }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "hf_tp_plans.json")
    with open(out, "w") as f:
        json.dump(table, f, indent=1)
        f.write("\n")
    print(f"{out}: {len(MODEL_TYPES)} model types (transformers "
          f"{transformers.__version__})")


if __name__ == "__main__":
    sys.exit(main())
