//===- PlanReport.h - what a partitioned program holds per rank -*- C++ -*-===//

#ifndef TPOPT_DISTRIBUTE_PLANREPORT_H
#define TPOPT_DISTRIBUTE_PLANREPORT_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::tp {

/// The plan report of a partitioned program (tp-partition's output): every
/// parameter's placement, gradient class, plan key and bytes per rank, and
/// the collectives per layer in bytes per token.
struct PlanReport {
  /// One line: parameters split and replicated, bytes per rank, collectives.
  std::string summary;
  /// The whole report in Markdown (the summary, then the two tables).
  std::string markdown;
};

/// The report of `module`'s entry function at `ranks` ranks; failure (with
/// a diagnostic) when it has none.
FailureOr<PlanReport> buildPlanReport(ModuleOp module, int64_t ranks);

/// The report's section on memory: for a training program, what each rank
/// holds besides activations (parameters, masters, gradient buffers,
/// optimizer state, the all-gather buffer), read off `module` as it will
/// run (after the fusions, which move gradient accumulations), then the
/// activation arenas (writeActivationPlan).
std::string writeMemoryPlan(ModuleOp module);

/// The report's section on activations, of `module` after
/// tp-plan-activations: each entry point's arena in bytes per token (its
/// planned results, laid out by lifetime), which a call multiplies by the
/// tokens of its input. Empty when no function has an arena.
std::string writeActivationPlan(ModuleOp module);

} // namespace mlir::tp

#endif // TPOPT_DISTRIBUTE_PLANREPORT_H
