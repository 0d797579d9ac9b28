#!/usr/bin/env python3
"""tp-export: the ONNX graph of an HF model directory, without its weights.

    tp-export HF_DIR -o graph.onnx [--dtype auto|float32|bfloat16|float16]
              [--attn eager|sdpa] [--opset N]

Builds the model transformers would build from HF_DIR/config.json with every
parameter on the meta device (nothing is allocated or read: the checkpoint's
shards are never opened) and only the buffers real (RoPE's inverse
frequencies), exports it with torch.onnx.export(dynamo=True) with a dynamic
batch and sequence, and writes a graph whose parameters are graph inputs
named as transformers saves them (the checkpoint's FQNs: a tied lm_head
under the embedding's name, NemotronH's under `backbone.`). The file is marked as a graph-only export; tpc binds
its parameters to a checkpoint:

    tpc graph.onnx --weights HF_DIR --tp 2 -o out
    mpirun -np 2 out/model --input ids.npy --output logits.npy

The graph's parameters have the checkpoint's type (config.json's dtype,
--dtype to override)."""
import argparse
import ast
import contextlib
import io
import logging
import os
import sys
import warnings

GRAPH_ONLY_KEY = "tp.graph_only"


def fail(message):
    sys.exit(f"tp-export: error: {message}")


@contextlib.contextmanager
def parameters_on_meta(torch):
    """Every parameter registered inside is moved to the meta device as it
    is registered (its CPU tensor, never written, is dropped at once);
    buffers stay real."""
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        if param is not None and param.device.type != "meta":
            param = torch.nn.Parameter(param.to("meta"),
                                       requires_grad=param.requires_grad)
        register(module, name, param)

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def saved_namer(hf):
    """How transformers' save_pretrained names the model's parameters: the
    renamings of its checkpoint conversion, reversed (NemotronH's `model.`
    is saved, as NVIDIA's checkpoints name it, `backbone.`), as a function
    of an FQN or a module path. Weight converters (merged MoE experts) are
    not renamings and leave names as they are."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (PrefixChange,
                                                     WeightRenaming,
                                                     apply_renamings)
    except ImportError:  # a transformers without conversions
        return lambda name: name
    conversions = [c for c in get_model_conversion_mapping(hf, add_legacy=False)
                   if isinstance(c, WeightRenaming)
                   and not isinstance(c, PrefixChange)]
    renamings = [c.reverse_transform() for c in conversions[::-1]]
    # A module path renamed as the FQNs under it are.
    return lambda name: apply_renamings(name + ".", renamings)[:-1]


def main():
    p = argparse.ArgumentParser(
        prog="tp-export", description=__doc__.split("\n\n")[0])
    p.add_argument("model", metavar="HF_DIR",
                   help="an HF model directory (its config.json is read)")
    p.add_argument("-o", dest="output", required=True, metavar="graph.onnx")
    p.add_argument("--dtype", default="auto",
                   choices=["auto", "float32", "bfloat16", "float16"],
                   help="the parameters' type (auto: config.json's dtype, "
                        "float32 when it names none)")
    p.add_argument("--attn", default="eager", choices=["eager", "sdpa"],
                   help="transformers' attention implementation")
    p.add_argument("--opset", type=int, default=None,
                   help="the ONNX opset (default: the exporter's)")
    args = p.parse_args()

    config_path = os.path.join(args.model, "config.json")
    if not os.path.isfile(config_path):
        fail(f"'{args.model}' has no config.json")

    # The exporter's notes (torchvision absent, axis names merged) are not
    # the user's concern; errors still surface.
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import onnx
    import onnxscript
    import torch
    import transformers
    from onnx import helper, numpy_helper

    try:
        config = transformers.AutoConfig.from_pretrained(
            args.model, local_files_only=True)
    except Exception as e:  # transformers' own message names the field
        fail(f"'{config_path}': {e}")
    config._attn_implementation = args.attn
    dtype = args.dtype
    if dtype == "auto":
        stated = getattr(config, "dtype", None)
        dtype = str(stated).replace("torch.", "") if stated else "float32"
    if dtype not in ("float32", "bfloat16", "float16"):
        fail(f"'{config_path}': dtype '{dtype}' is not float32, bfloat16 "
             "or float16")
    torch_dtype = getattr(torch, dtype)

    with parameters_on_meta(torch):
        try:
            hf = transformers.AutoModelForCausalLM.from_config(
                config, dtype=torch_dtype)
        except Exception as e:
            fail(f"'{config_path}': transformers cannot build the model: {e}")
    hf.eval()

    class LogitsOnly(torch.nn.Module):
        """(input_ids, attention_mask) -> logits, with the HF model's
        children registered directly so that FQNs stay the HF ones."""

        def __init__(self, model):
            super().__init__()
            for name, child in model.named_children():
                self.add_module(name, child)
            object.__setattr__(self, "hf", model)

        def forward(self, input_ids, attention_mask):
            return self.hf(input_ids=input_ids, attention_mask=attention_mask,
                           use_cache=False).logits

    model = LogitsOnly(hf).eval()
    # Traced on the meta device throughout (a model that makes tensors on
    # its input's device would mix devices otherwise); the buffers' values
    # are kept to be written as initializers.
    real = {id(t): t.detach().clone()
            for _, t in model.named_buffers(remove_duplicate=False)}
    names_of_buffers = {}
    for module in model.modules():
        for name, t in module._buffers.items():
            if t is not None:
                names_of_buffers[(id(module), name)] = real[id(t)]
    model.to("meta")
    buffer_values = {}
    for module in model.modules():
        for name, t in module._buffers.items():
            if t is not None and (id(module), name) in names_of_buffers:
                buffer_values[id(t)] = names_of_buffers[(id(module), name)]
    ids = torch.zeros((2, 16), dtype=torch.int64, device="meta")
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    extra = {} if args.opset is None else {"opset_version": args.opset}
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            program = torch.onnx.export(
                model, (ids, torch.ones_like(ids)), dynamo=True,
                optimize=False,
                dynamic_shapes={"input_ids": {0: batch, 1: seq},
                                "attention_mask": {0: batch, 1: seq}},
                input_names=["input_ids", "attention_mask"],
                output_names=["logits"], **extra)
    except Exception as e:
        fail(f"the exporter failed on '{args.model}': {e}\n{log.getvalue()}")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    temp = args.output + ".tmp"
    program.save(temp, include_initializers=False)
    proto = onnx.load(temp)
    os.remove(temp)

    # The tensors the graph reads but does not define: parameters (meta)
    # become graph inputs under their first FQN (tied weights are one
    # tensor with several names), buffers initializers.
    graph = proto.graph
    defined = {i.name for i in graph.input} | {
        o for n in graph.node for o in n.output}
    every = dict(model.named_parameters(remove_duplicate=False)) | dict(
        model.named_buffers(remove_duplicate=False))
    first = {}
    for name, t in list(model.named_parameters()) + list(
            model.named_buffers()):
        first.setdefault(id(t), name)
    saved = saved_namer(hf)
    renamed, parameters = {}, {}
    for name in dict.fromkeys(x for n in graph.node for x in n.input
                              if x and x not in defined):
        t = every.get(name)
        if t is None:
            fail(f"the exported graph reads '{name}', which is neither a "
                 "parameter nor a buffer of the model")
        fqn = saved(first[id(t)])
        renamed[name] = fqn
        if id(t) not in buffer_values:
            parameters[fqn] = t
        elif fqn not in {i.name for i in graph.initializer}:
            value = buffer_values[id(t)]
            if value.dtype == torch.bfloat16:  # numpy has no bfloat16
                graph.initializer.append(helper.make_tensor(
                    fqn, onnx.TensorProto.BFLOAT16, list(value.shape),
                    value.view(torch.int16).numpy().tobytes(), raw=True))
            else:
                graph.initializer.append(
                    numpy_helper.from_array(value.numpy(), fqn))
    for node in graph.node:
        for i, x in enumerate(node.input):
            if x in renamed:
                node.input[i] = renamed[x]
    elem = {torch.float32: onnx.TensorProto.FLOAT,
            torch.bfloat16: onnx.TensorProto.BFLOAT16,
            torch.float16: onnx.TensorProto.FLOAT16}
    for fqn, t in parameters.items():
        if t.dtype not in elem:
            fail(f"parameter '{fqn}' is {t.dtype}; float32, bfloat16 and "
                 "float16 parameters are exported")
        graph.input.append(helper.make_tensor_value_info(
            fqn, elem[t.dtype], list(t.shape)))
    # onnxscript's optimizer folds constants and removes what is unused;
    # the parameters, being inputs, are never folded.
    proto = onnxscript.optimizer.optimize(proto)
    # Of the exporter's node metadata only the module scopes are kept (tpc
    # names parameters and diagnostics by them); the stack traces and
    # class hierarchies would be most of the file.
    # The scopes are renamed as the parameters are: tpc names a parameter
    # by the scope of the node that reads it, and the checkpoint by its
    # saved name.
    for node in proto.graph.node:
        kept = [(p.key, p.value) for p in node.metadata_props
                if p.key == "pkg.torch.onnx.name_scopes"]
        kept = [(key, repr([saved(x) for x in scopes[:-1]] + scopes[-1:]))
                for key, scopes in ((k, ast.literal_eval(v)) for k, v in kept)]
        del node.metadata_props[:]
        for key, value in kept:
            entry = node.metadata_props.add()
            entry.key, entry.value = key, value
    entry = proto.metadata_props.add()
    entry.key = GRAPH_ONLY_KEY
    entry.value = ("parameters are graph inputs named by their HF FQNs; "
                   "tpc --weights CHECKPOINT binds them")
    onnx.save(proto, temp)
    os.replace(temp, args.output)
    total = sum(t.numel() for t in parameters.values())
    print(f"{args.output}: {type(hf).__name__}, {len(parameters)} parameters "
          f"({total / 1e6:.1f} M, {dtype}) as graph inputs, "
          f"{len(proto.graph.node)} nodes")


if __name__ == "__main__":
    main()
