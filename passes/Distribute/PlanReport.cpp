//===- PlanReport.cpp - what a partitioned program holds per rank ---------===//
//
// The plan report (`tpc --report`, `tp-opt --tp-plan-report`): read off the
// partitioned program, not off the plan, so it shows what each rank will
// actually hold and exchange.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Distribute/PlanReport.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"
#include "tprt/AttentionKernel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

namespace mlir::tp {
#define GEN_PASS_DEF_TPPLANREPORT
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Where a collective's input is computed: the decoder layer of the op
/// that read a parameter to produce it ("layer 3"), else that parameter's
/// module ("lm_head"); through a sum, its first operand (a module's base
/// linear under LoRA).
std::string whereOf(func::FuncOp func, Value v) {
  for (int depth = 0; depth < 4; ++depth) {
    Operation *op = v.getDefiningOp();
    if (!op || op->getNumOperands() == 0)
      return "";
    for (Value operand : op->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand))
        if (auto fqn = func.getArgAttrOfType<StringAttr>(
                arg.getArgNumber(), TPDialect::kFqnAttrName)) {
          if (std::optional<int64_t> layer = decoderLayerOf(op))
            return "layer " + std::to_string(*layer);
          return fqn.getValue().rsplit('.').first.str();
        }
    v = op->getOperand(0);
  }
  return "";
}

/// A trained parameter's gradient sink in the training step, by FQN.
using GradSinks = llvm::StringMap<AccumulateGradOp>;

/// The replica class of a replicated parameter and how it was derived.
std::string describeClass(PlacementAttr placement, const GradSinks &sinks,
                          StringRef fqn, bool training) {
  AccumulateGradOp acc = sinks.lookup(fqn);
  if (acc && acc.getOwned())
    return "excluded (plan exclude: each rank's own copy, neither broadcast "
           "nor synchronized)";
  if (!acc || !acc.getReduction()) {
    if (training)
      return "replicated, frozen";
    // No training step: what the plan's style expects.
    return "replicated, grad " +
           stringifyGradReduction(placement ? placement.getGrad()
                                            : GradReduction::Mean)
               .str();
  }
  GradReduction used = *acc.getReduction();
  std::optional<GradReduction> derived = acc.getDerivedReduction();
  std::string why = derived == GradReduction::Sum
                        ? "derived: a partial sum on each rank"
                        : "derived: whole on every rank";
  if (derived != used)
    why = "plan grad_reduction overrides; " + why;
  return "replica-" + stringifyGradReduction(used).str() + " (" + why + ")";
}

/// What an uneven split costs: the largest share over the mean.
double imbalanceOf(PlacementAttr placement) {
  if (!placement || !placement.isUneven())
    return 1.0;
  int64_t total = 0;
  for (int64_t size : placement.getSizes())
    total += size;
  return static_cast<double>(placement.getUnevenExtent()) *
         placement.getSizes().size() / total;
}

/// Each rank's share of an uneven split, in rank order; a range that
/// consecutive ranks share (KV heads over groups of different sizes) once,
/// with the ranks that hold it.
std::string describeShares(PlacementAttr placement) {
  ArrayRef<int64_t> starts = placement.getStarts(),
                    sizes = placement.getSizes();
  SmallVector<std::string> parts;
  for (size_t rank = 0; rank < sizes.size();) {
    size_t end = rank + 1;
    while (end < sizes.size() && starts[end] == starts[rank] &&
           sizes[end] == sizes[rank])
      ++end;
    std::string part = std::to_string(sizes[rank]);
    if (end - rank > 1)
      part +=
          " on ranks " + std::to_string(rank) + "-" + std::to_string(end - 1);
    parts.push_back(part);
    rank = end;
  }
  return llvm::join(parts, " + ");
}

/// The largest load imbalance of the uneven splits, and its plan key.
struct Imbalance {
  int count = 0;
  double largest = 1.0;
  std::string key;
};

/// The parameters' table; counts what is split and replicated.
void writeParameters(func::FuncOp func, const GradSinks &sinks, bool training,
                     raw_ostream &os, uint64_t &localBytes,
                     uint64_t &globalBytes, int &sharded, int &replicated,
                     Imbalance &imbalance) {
  os << "| parameter | global shape | placement | class | plan key | bytes "
        "per rank |\n|---|---|---|---|---|---|\n";
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto fqn = func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
    if (!fqn)
      continue;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    auto placement =
        func.getArgAttrOfType<PlacementAttr>(i, TPDialect::kPlacementAttrName);
    bool split = placement && placement.isSplit();
    SmallVector<int64_t> global(type.getShape());
    if (split)
      global[placement.getSplitDim()] =
          placement.getGlobalSize(global[placement.getSplitDim()]);
    uint64_t elementBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
    uint64_t bytes = type.getNumElements() * elementBytes;
    localBytes += bytes;
    globalBytes +=
        split ? ShapedType::getNumElements(global) * elementBytes : bytes;
    (split ? sharded : replicated)++;
    os << "| `" << fqn.getValue() << "` | [";
    llvm::interleaveComma(global, os);
    std::string where =
        split ? "split(" + std::to_string(placement.getSplitDim()) + ")"
              : "replicated";
    if (split && placement.getReplicas() > 1)
      where += ", each block on " + std::to_string(placement.getReplicas()) +
               " ranks";
    if (split && placement.isUneven()) {
      // Each rank's share, padded to the largest.
      double cost = imbalanceOf(placement);
      where += ", uneven: " + describeShares(placement) +
               llvm::formatv(" (imbalance {0:F2})", cost).str();
      ++imbalance.count;
      if (cost > imbalance.largest) {
        imbalance.largest = cost;
        imbalance.key = placement.getKey().str();
      }
    }
    std::string gradClass =
        split ? std::string("sharded")
              : describeClass(placement, sinks, fqn.getValue(), training);
    // A parameter no plan key places is replicated by default.
    StringRef key = placement ? placement.getKey() : "";
    os << "] | " << where << " | " << gradClass << " | "
       << (key.empty() ? "(no key: replicated)" : key) << " | " << bytes
       << " |\n";
  }
}

/// The linears' multiply-adds per token on each rank: what it computes (its
/// blocks, padding included) beside its real share, the work an even split
/// of the same weights would give every rank (their mean).
void writeLinearWork(func::FuncOp func, raw_ostream &os) {
  double held = 0, real = 0;
  func.walk([&](LinearOp linear) {
    auto weight = cast<RankedTensorType>(linear.getWeight().getType());
    double elements = weight.getNumElements();
    held += elements;
    auto arg = dyn_cast<BlockArgument>(linear.getWeight());
    auto placement =
        arg ? func.getArgAttrOfType<PlacementAttr>(
                  arg.getArgNumber(), TPDialect::kPlacementAttrName)
            : PlacementAttr();
    real += elements / imbalanceOf(placement);
  });
  if (held == 0)
    return;
  os << llvm::formatv("\nLinear work per token per rank: {0:F0} multiply-adds "
                      "computed, {1:F0} for the rank's mean share ({2:F3}x)\n",
                      held, real, held / real);
}

/// Which GPU kernel runs each kind of attention op (tprt/AttentionKernel.h,
/// the runtime's rule), for full sequences (queries == keys).
void writeAttentionKernels(func::FuncOp func, raw_ostream &os) {
  std::map<std::string, int> kinds;
  func.walk([&](AttentionOp attention) {
    Type element =
        cast<ShapedType>(attention.getQ().getType()).getElementType();
    tprt::AttentionProblem problem;
    problem.reducedPrecision = element.isBF16() || element.isF16();
    problem.headDim = attention.getHeadDim();
    problem.sq = problem.skv = 1;
    problem.causal = attention.getCausal();
    problem.window = attention.getSlidingWindow().value_or(0);
    problem.softcap = attention.getSoftcap()
                          ? attention.getSoftcap()->convertToDouble()
                          : 0.0;
    problem.keyMask = static_cast<bool>(attention.getKeyMask());
    tprt::AttentionKernelChoice choice = tprt::chooseAttentionKernel(problem);
    std::string row;
    llvm::raw_string_ostream line(row);
    line << "| " << (problem.reducedPrecision ? "bf16/f16" : "f32") << " | "
         << attention.getNumHeads() << "/" << attention.getNumKvHeads() << " | "
         << problem.headDim << " | " << (problem.causal ? "yes" : "no")
         << " | ";
    if (problem.window)
      line << problem.window;
    else
      line << "-";
    line << " | ";
    if (problem.softcap > 0)
      line << llvm::format("%g", problem.softcap);
    else
      line << "-";
    line << " | " << (problem.keyMask ? "yes" : "no") << " | "
         << (choice.kernel == tprt::AttentionKernel::CudnnFused
                 ? "cuDNN fused"
                 : "tiled: " + std::string(choice.reason))
         << " |";
    ++kinds[row];
  });
  if (kinds.empty())
    return;
  os << "\nAttention on the GPU (`--device cuda`; cuDNN fused where cuDNN is "
        "found and takes the shape, said at run time, else the tiled "
        "kernels):\n\n| ops | dtype | heads | head_dim | causal | window | "
        "softcap | key mask | kernel |\n|---|---|---|---|---|---|---|---|---|"
        "\n";
  for (const auto &[row, count] : kinds)
    os << "| " << count << " " << row << "\n";
}

/// What a training program holds per rank besides activations, as the
/// runtime allocates it (train/boundary.cpp, train/optimizer.cpp), for the
/// rank that holds the most (data-parallel rank 0 under --zero: its runs
/// are never padding).
struct MemoryPlan {
  uint64_t parameters = 0, masters = 0, gradients = 0, state = 0, gather = 0;
  /// What the GPU holds besides (--device cuda): a streamed table gathered
  /// whole by each of its readers, and its gradient in a whole buffer.
  uint64_t streamedWholeOnGpu = 0;
  uint64_t total() const {
    return parameters + masters + gradients + state + gather;
  }
};

/// The FQN and parameter a gradient accumulation adds into, fused
/// (tp-fuse-grad-accumulation and the fused loss) or not; nullopt for any
/// other op.
std::optional<std::pair<StringRef, Value>> accumulationOf(Operation *op) {
  return llvm::TypeSwitch<Operation *,
                          std::optional<std::pair<StringRef, Value>>>(op)
      .Case<AccumulateGradOp, AccumulateLinearGradWeightOp,
            AccumulateEmbeddingGradOp, AccumulateLinearCrossEntropyOp>(
          [](auto acc) {
            return std::make_pair(acc.getFqn(), Value(acc.getParam()));
          })
      .Default([](Operation *) { return std::nullopt; });
}

/// The most bytes of whole buffers of buckets reduced per micro-batch held
/// at once (--zero 2): the runtime takes a bucket's buffer at the first
/// accumulation of one of its gradients and frees it at its
/// reduce-scatter, in the training step's order.
uint64_t microBatchBucketPeak(func::FuncOp step) {
  llvm::StringMap<GradBucketReduceScatterOp> bucketOf;
  step.walk([&](GradBucketReduceScatterOp bucket) {
    for (Attribute fqn : bucket.getFqns())
      bucketOf[cast<StringAttr>(fqn).getValue()] = bucket;
  });
  DenseSet<Operation *> held;
  uint64_t now = 0, peak = 0;
  step.walk([&](Operation *op) {
    if (auto bucket = dyn_cast<GradBucketReduceScatterOp>(op)) {
      if (held.erase(op))
        now -= bucket.getPaddedBytesAttr().getInt();
      return;
    }
    auto acc = accumulationOf(op);
    auto bucket = acc ? bucketOf.lookup(acc->first) : nullptr;
    // A streamed table's gradient goes into the run a block at a time.
    if (bucket && !bucket.getStreamed() && held.insert(bucket).second) {
      now += bucket.getPaddedBytesAttr().getInt();
      peak = std::max(peak, now);
    }
  });
  return peak;
}

/// The bytes of a table's rows a streamed loss or lookup holds gathered
/// while it runs (tp-stream-param-runs; the runtime's block, f32).
uint64_t streamedBlockBytes(Operation *op) {
  auto blockBytes = [](auto streamed, RankedTensorType table) -> uint64_t {
    if (!streamed.getRunsBucket())
      return 0;
    return static_cast<uint64_t>(std::min<int64_t>(*streamed.getBlockRows(),
                                                   table.getDimSize(0))) *
           table.getDimSize(1) * 4;
  };
  if (auto loss = dyn_cast<AccumulateLinearCrossEntropyOp>(op))
    return blockBytes(loss, loss.getParam().getType());
  if (auto lookup = dyn_cast<EmbeddingOp>(op))
    return blockBytes(lookup, lookup.getTable().getType());
  return 0;
}

/// The most bytes of gathered parameters held at once (--zero 3): each
/// gather's buffer from the gather to the last reader of one of its
/// results, and a streamed loss's block of rows while it runs, in the
/// training step's order.
uint64_t gatheredPeak(func::FuncOp step) {
  Block &body = step.getBody().front();
  DenseMap<Operation *, SmallVector<ParamBucketGatherOp>> freedAfter;
  for (auto gather : step.getOps<ParamBucketGatherOp>()) {
    Operation *last = gather;
    for (Operation *user : gather->getUsers())
      if (Operation *at = body.findAncestorOpInBlock(*user);
          last->isBeforeInBlock(at))
        last = at;
    freedAfter[last].push_back(gather);
  }
  uint64_t now = 0, peak = 0;
  for (Operation &op : body) {
    if (auto gather = dyn_cast<ParamBucketGatherOp>(op)) {
      now += gather.getBytes();
      peak = std::max(peak, now);
    }
    peak = std::max(peak, now + streamedBlockBytes(&op));
    for (ParamBucketGatherOp gather : freedAfter.lookup(&op))
      now -= gather.getBytes();
  }
  return peak;
}

MemoryPlan planMemory(ModuleOp module, func::FuncOp step, func::FuncOp update,
                      const llvm::StringMap<uint64_t> &parameterBytes) {
  MemoryPlan plan;
  for (auto &entry : parameterBytes)
    plan.parameters += entry.getValue();
  OptimizerUpdateOp optimizer;
  update.walk([&](OptimizerUpdateOp op) { optimizer = op; });
  bool masters = optimizer && optimizer.getMasterWeights();
  uint64_t perElement = optimizer && optimizer.getOptimizer() == "sgd" ? 4 : 8;
  // Each trainable parameter's elements and whether it has a master.
  llvm::StringMap<std::pair<uint64_t, bool>> trainable;
  step.walk([&](Operation *op) {
    if (auto acc = accumulationOf(op)) {
      auto type = cast<RankedTensorType>(acc->second.getType());
      trainable[acc->first] = {static_cast<uint64_t>(type.getNumElements()),
                               masters && !type.getElementType().isF32()};
    }
  });
  // Gradient buffers: each bucket's FP32 buffer (a gradient is a view of the
  // first that binds it; another bucket holding it has a slot of its own),
  // and the buffers of gradients in none. Buckets reduced per micro-batch
  // hold their runs, and their whole buffers while a micro-batch fills
  // them; the replica buckets then sum the runs in a passing buffer.
  int64_t dpRanks = gridSize(module, "dp");
  llvm::StringSet<> bucketed, sharded;
  bool perMicroBatch = false;
  module.walk([&](GradBucketReduceScatterOp bucket) {
    uint64_t elements = bucket.getBytesAttr().getInt() / 4,
             padded = bucket.getPaddedBytesAttr().getInt() / 4,
             run = padded / dpRanks, owned = std::min(run, elements);
    perMicroBatch |= bucket.getMicroBatch();
    plan.gradients += (bucket.getMicroBatch() ? run : padded) * 4;
    if (bucket.getStreamed())
      plan.streamedWholeOnGpu =
          std::max<uint64_t>(plan.streamedWholeOnGpu, 2 * padded * 4);
    plan.state += owned * perElement;
    if (masters && !bucket.getDtype().isF32())
      plan.masters += owned * 4;
    plan.gather = std::max<uint64_t>(
        plan.gather, padded * (bucket.getDtype().getIntOrFloatBitWidth() / 8));
    for (Attribute fqn : bucket.getFqns()) {
      bucketed.insert(cast<StringAttr>(fqn).getValue());
      sharded.insert(cast<StringAttr>(fqn).getValue());
    }
  });
  plan.gradients += microBatchBucketPeak(step);
  // --zero 3: a sharded bucket's parameters are this rank's run of it
  // between uses, and the gathers hold whole buckets while they are read
  // (no all-gather after the update).
  bool runs = false;
  module.walk([&](ParamBucketShardOp shard) {
    runs = true;
    plan.parameters += shard.getBytes() / dpRanks;
    for (Attribute fqn : shard.getFqns())
      plan.parameters -= parameterBytes.lookup(cast<StringAttr>(fqn));
  });
  if (runs)
    plan.gather = gatheredPeak(step);
  update.walk([&](GradBucketAllReduceOp bucket) {
    if (!perMicroBatch)
      plan.gradients += bucket.getBytesAttr().getInt();
    for (Attribute fqn : bucket.getFqns())
      bucketed.insert(cast<StringAttr>(fqn).getValue());
  });
  for (auto &entry : trainable) {
    auto [elements, master] = entry.second;
    if (!bucketed.contains(entry.getKey()))
      plan.gradients += elements * 4;
    if (sharded.contains(entry.getKey()))
      continue;
    plan.state += elements * perElement;
    if (master)
      plan.masters += elements * 4;
  }
  return plan;
}

void writeMemoryTable(const MemoryPlan &plan, bool zero, raw_ostream &os) {
  os << "\nMemory per rank besides activations (bytes; "
     << (zero ? "data-parallel rank 0, the largest runs" : "every rank")
     << "):\n\n| held | bytes |\n|---|---|\n"
     << "| parameters | " << plan.parameters << " |\n"
     << "| FP32 master weights | " << plan.masters << " |\n"
     << "| gradient buffers (FP32, with the buckets') | " << plan.gradients
     << " |\n"
     << "| optimizer state | " << plan.state << " |\n"
     << "| parameter all-gather (the largest sharded bucket while it runs; "
        "--zero 3: the most gathered at once) | "
     << plan.gather << " |\n"
     << "| total | " << plan.total() << " |\n";
  // Streaming is the host's: the GPU's calls gather the table whole.
  if (plan.streamedWholeOnGpu)
    os << "\nOn the GPU (--device cuda) a streamed table is gathered whole "
          "by each of its readers and its gradient held in a whole buffer: "
          "up to "
       << plan.streamedWholeOnGpu << " bytes more than the total.\n";
}

/// Collectives per layer of the forward, in bytes per token (f32
/// activations); returns how many there are.
int writeCollectives(func::FuncOp func, raw_ostream &os) {
  std::map<std::string, std::pair<int, uint64_t>> perLayer;
  int collectives = 0;
  func.walk([&](Operation *op) {
    StringRef kind =
        llvm::TypeSwitch<Operation *, StringRef>(op)
            .Case([](shard::AllReduceOp) { return "all_reduce"; })
            .Case([](shard::AllGatherOp) { return "all_gather"; })
            .Case([](shard::ReduceScatterOp) { return "reduce_scatter"; })
            .Default([](Operation *) { return ""; });
    if (kind.empty())
      return;
    auto type = cast<ShapedType>(op->getResult(0).getType());
    std::string layer = whereOf(func, op->getOperand(0));
    auto &entry = perLayer[kind.str() + ", " + layer];
    entry.first++;
    entry.second += type.getShape().back() * 4;
    collectives++;
  });
  os << "\n| collective, where | count | bytes per token |\n|---|---|---|\n";
  for (auto &[where, v] : perLayer)
    os << "| " << where << " | " << v.first << " | " << v.second << " |\n";
  return collectives;
}

/// The projections each rank computes as one product.
void writeSiblingProducts(func::FuncOp func, raw_ostream &os) {
  int siblingProducts = 0;
  std::string siblingRows;
  llvm::raw_string_ostream siblingOs(siblingRows);
  func.walk([&](LinearSiblingsOp op) {
    ++siblingProducts;
    siblingOs << "| ";
    int64_t total = 0;
    SmallVector<std::string> widths;
    llvm::interleaveComma(op.getWeights(), siblingOs, [&](Value weight) {
      auto arg = dyn_cast<BlockArgument>(weight);
      auto fqn = arg ? func.getArgAttrOfType<StringAttr>(
                           arg.getArgNumber(), TPDialect::kFqnAttrName)
                     : StringAttr();
      siblingOs << "`" << (fqn ? fqn.getValue() : "(computed)") << "`";
      int64_t out = cast<ShapedType>(weight.getType()).getDimSize(0);
      widths.push_back(std::to_string(out));
      total += out;
    });
    siblingOs << " | " << llvm::join(widths, " + ") << " = " << total << " |\n";
  });
  if (siblingProducts)
    os << "\nSibling projections computed as one product per rank "
          "(tp-fuse-sibling-linears): "
       << siblingProducts
       << "\n\n| parameters | output features per rank |\n|---|---|\n"
       << siblingRows;
}

/// A bucket's FQNs, quoted as code, comma-separated.
void writeFqns(ArrayAttr fqns, raw_ostream &os) {
  llvm::interleave(
      fqns, os,
      [&](Attribute fqn) {
        os << "`" << cast<StringAttr>(fqn).getValue() << "`";
      },
      ", ");
}

/// The replica gradients' buckets (one all-reduce each per optimizer step).
void writeReplicaBuckets(Operation *update, raw_ostream &os) {
  int buckets = 0;
  std::string rows;
  llvm::raw_string_ostream bucketOs(rows);
  update->walk([&](GradBucketAllReduceOp bucket) {
    ++buckets;
    bucketOs << "| " << bucket.getBucketAttr().getInt() << " | "
             << stringifyGradReduction(bucket.getReduction()) << " | "
             << bucket.getDtype() << " | ";
    writeFqns(bucket.getFqns(), bucketOs);
    bucketOs << " | " << bucket.getBytesAttr().getInt() << " |\n";
  });
  os << "\nReplica-gradient buckets (one all-reduce each per optimizer "
        "step, FP32): "
     << buckets << "\n";
  if (buckets)
    os << "\n| bucket | class | dtype | gradients | bytes |\n"
          "|---|---|---|---|---|\n"
       << rows;
}

/// The data-parallel sharded buckets (--zero 1 and 2).
void writeShardedBuckets(ModuleOp module, raw_ostream &os) {
  std::string rows;
  llvm::raw_string_ostream shardedOs(rows);
  int64_t dpRanks = gridSize(module, "dp");
  module.walk([&](GradBucketReduceScatterOp bucket) {
    int64_t padded = bucket.getPaddedBytesAttr().getInt();
    std::optional<int64_t> layer = decoderLayerOf(bucket);
    std::string when =
        !bucket.getMicroBatch() ? "optimizer step"
        : layer ? "micro-batch, after layer " + std::to_string(*layer)
                : std::string("micro-batch, outside the layers");
    shardedOs << "| " << bucket.getBucketAttr().getInt() << " | " << when
              << " | " << bucket.getDtype() << " | ";
    writeFqns(bucket.getFqns(), shardedOs);
    shardedOs << " | " << bucket.getBytesAttr().getInt() << " | " << padded
              << " | " << padded / dpRanks << " |\n";
  });
  bool runs = false;
  module.walk([&](ParamBucketShardOp) { runs = true; });
  if (!rows.empty())
    os << "\nData-parallel sharded buckets (--zero 1: one reduce-scatter of "
          "the gradients per optimizer step; --zero 2: one per micro-batch, "
          "after the bucket's last gradient; "
       << (runs ? "--zero 3: the parameters are held as the runs too, each "
                  "bucket all-gathered where it is read (a layer's before "
                  "its forward and before its backward, the one outside the "
                  "layers once per micro-batch), nothing after the update"
                : "then one all-gather of the parameters per optimizer step")
       << "; each rank updates, and holds the optimizer state of, its "
          "run):\n\n"
          "| bucket | reduced per | dtype | gradients | bytes (FP32) | padded "
          "| run per rank |\n|---|---|---|---|---|---|---|\n"
       << rows;
}

} // namespace

FailureOr<PlanReport> mlir::tp::buildPlanReport(ModuleOp module,
                                                int64_t ranks) {
  FailureOr<func::FuncOp> entry = requireEntry<func::FuncOp>(
      module, kForwardEntry, "plan report: no func.func @forward");
  if (failed(entry))
    return failure();
  func::FuncOp func = *entry;
  std::string table;
  llvm::raw_string_ostream os(table);
  uint64_t localBytes = 0, globalBytes = 0;
  int sharded = 0, replicated = 0;
  // A training program: the replica classes partition derived, and the
  // buckets that synchronize them.
  FailureOr<FunctionOpInterface> step = lookupEntry(module, kTrainStepEntry);
  FailureOr<FunctionOpInterface> update =
      lookupEntry(module, kOptimizerStepEntry);
  if (failed(step) || failed(update))
    return failure();
  GradSinks sinks;
  if (*step)
    step->getOperation()->walk(
        [&](AccumulateGradOp acc) { sinks[acc.getFqn()] = acc; });
  Imbalance imbalance;
  writeParameters(func, sinks, static_cast<bool>(*step), os, localBytes,
                  globalBytes, sharded, replicated, imbalance);
  writeLinearWork(func, os);
  writeAttentionKernels(func, os);

  int collectives = writeCollectives(func, os);
  writeSiblingProducts(func, os);
  if (*update) {
    writeReplicaBuckets(update->getOperation(), os);
    writeShardedBuckets(module, os);
  }

  PlanReport report;
  report.summary =
      llvm::formatv("tp={0}: {1} parameters split, {2} replicated; "
                    "{3:F3} MiB of {4:F3} MiB of parameters per rank; "
                    "{5} collectives per forward pass",
                    ranks, sharded, replicated, localBytes / 1048576.0,
                    globalBytes / 1048576.0, collectives)
          .str();
  if (imbalance.count)
    report.summary +=
        llvm::formatv("; {0} split unevenly, load imbalance up "
                      "to {1:F2} ('{2}')",
                      imbalance.count, imbalance.largest, imbalance.key)
            .str();
  std::string source = "(no plan applied)";
  if (auto attr =
          module->getAttrOfType<StringAttr>(TPDialect::kPlanSourceAttrName))
    source = attr.getValue().str();
  // What raising read off the graph that the plan does not show: the RoPE
  // scaling the tables carry.
  std::string rope;
  if (auto dict = module->getAttrOfType<DictionaryAttr>(ModelConfig::kAttrName);
      dict && succeeded(ModelConfig::verify(
                  dict, [&] { return module.emitError(); }))) {
    ModelConfig config = ModelConfig::fromAttr(dict);
    // LongRoPE has per-pair factors (on tp.rotary), no single one.
    if (config.ropeType && config.ropeFactor)
      llvm::raw_string_ostream(rope) << llvm::format(
          "RoPE: %s, factor %g, theta %g\n\n", config.ropeType->c_str(),
          *config.ropeFactor, config.ropeTheta.value_or(0.0));
    else if (config.ropeType)
      llvm::raw_string_ostream(rope)
          << llvm::format("RoPE: %s, theta %g\n\n", config.ropeType->c_str(),
                          config.ropeTheta.value_or(0.0));
  }
  report.markdown = "# Plan report\n\n" + report.summary +
                    "\n\nPlan: " + source + "\n\n" + rope + table;
  return report;
}

namespace {

struct TPPlanReportPass : public tp::impl::TPPlanReportBase<TPPlanReportPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grid = module.lookupSymbol<shard::GridOp>("tp");
    int64_t ranks =
        grid && grid.getShape().size() == 1 ? grid.getShape()[0] : 1;
    FailureOr<PlanReport> report = buildPlanReport(module, ranks);
    if (failed(report))
      return signalPassFailure();
    llvm::outs() << report->markdown << writeMemoryPlan(module);
    markAllAnalysesPreserved();
  }
};

} // namespace

std::string mlir::tp::writeMemoryPlan(ModuleOp module) {
  std::string held;
  llvm::raw_string_ostream heldOs(held);
  FailureOr<FunctionOpInterface> forward = lookupEntry(module, kForwardEntry);
  FailureOr<FunctionOpInterface> step = lookupEntry(module, kTrainStepEntry);
  FailureOr<FunctionOpInterface> update =
      lookupEntry(module, kOptimizerStepEntry);
  auto forwardFunc =
      succeeded(forward)
          ? dyn_cast_or_null<func::FuncOp>(forward->getOperation())
          : func::FuncOp();
  auto stepFunc = succeeded(step)
                      ? dyn_cast_or_null<func::FuncOp>(step->getOperation())
                      : func::FuncOp();
  auto updateFunc = succeeded(update)
                        ? dyn_cast_or_null<func::FuncOp>(update->getOperation())
                        : func::FuncOp();
  if (forwardFunc && stepFunc && updateFunc) {
    llvm::StringMap<uint64_t> parameterBytes;
    for (unsigned i = 0; i < forwardFunc.getNumArguments(); ++i)
      if (auto fqn = forwardFunc.getArgAttrOfType<StringAttr>(
              i, TPDialect::kFqnAttrName)) {
        auto type =
            cast<RankedTensorType>(forwardFunc.getArgument(i).getType());
        parameterBytes[fqn.getValue()] =
            type.getNumElements() *
            (type.getElementType().getIntOrFloatBitWidth() / 8);
      }
    bool zero = false;
    module.walk([&](GradBucketReduceScatterOp) { zero = true; });
    writeMemoryTable(planMemory(module, stepFunc, updateFunc, parameterBytes),
                     zero, heldOs);
  }
  return held + writeActivationPlan(module);
}

std::string mlir::tp::writeActivationPlan(ModuleOp module) {
  std::string rows;
  llvm::raw_string_ostream os(rows);
  for (auto func : module.getOps<func::FuncOp>())
    if (auto bytes = func->getAttrOfType<IntegerAttr>(
            TPDialect::kActivationBytesAttrName))
      os << "| " << func.getSymName() << " | " << bytes.getInt() << " |\n";
  if (rows.empty())
    return rows;
  return "\nActivation arenas per rank (tp-plan-activations: each entry "
         "point's results laid out by lifetime in one buffer; a call's arena "
         "is the bytes per token times the tokens of its input, micro-batch x "
         "sequence. Training holds the memory above plus the training step's "
         "arena; kernels' scratch and results larger than their slot are "
         "outside it):\n\n| function | bytes per token |\n|---|---|\n" +
         rows;
}
