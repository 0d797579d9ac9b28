//===- InitAll.h - register what the tp-opt tools use -----------*- C++ -*-===//
//
// One place registers the dialects, external interface models and passes of
// the pipeline, so that the heavy upstream headers are compiled once.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_REGISTRATION_INITALL_H
#define TPOPT_REGISTRATION_INITALL_H

namespace mlir {
class DialectRegistry;

namespace tp {

/// Inserts the tp dialect, the upstream dialects the pipeline produces or
/// consumes (func, arith, tensor, linalg, scf, memref, math, shard, emitc,
/// ml_program, bufferization) and their sharding and convert-to-emitc
/// external models. Without the models, sharding propagation and
/// convert-to-emitc silently skip those ops.
void registerAllDialects(DialectRegistry &registry);

/// Registers the project's passes and the upstream passes tp-opt exposes.
void registerAllPasses();

} // namespace tp
} // namespace mlir

#endif // TPOPT_REGISTRATION_INITALL_H
