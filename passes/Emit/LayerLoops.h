//===- LayerLoops.h - repeated decoder layers as loops ----------*- C++ -*-===//
//
// Part of tp-to-emitc: the straight-line EmitC of a forward pass repeats one
// block of calls per decoder layer. Rolling each run of equal layers into an
// `emitc.for` over per-layer tables keeps the C++ the host compiler sees
// (and its time) independent of the depth.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PASSES_EMIT_LAYERLOOPS_H
#define TPOPT_PASSES_EMIT_LAYERLOOPS_H

namespace mlir::emitc {
class FuncOp;
} // namespace mlir::emitc

namespace mlir::tp {

/// Rolls every run of two or more consecutive decoder layers of `func` that
/// make the same calls into one `emitc.for`: per iteration it loads the
/// layer's parameters and passes the attribute values that differ between
/// layers (FQNs, file offsets, windows) from constant tables defined before
/// `func`; values one layer hands the next live in variables, values read
/// later (by a backward pass) in arrays. `func` must be straight-line calls
/// before tensors are released; layers that differ stay as they are. The
/// tables are named `tprt_layers<id>_<column>`, ids counting from
/// `firstId`. Returns the number of loops made.
unsigned rollLayerLoops(emitc::FuncOp func, unsigned firstId);

} // namespace mlir::tp

#endif // TPOPT_PASSES_EMIT_LAYERLOOPS_H
