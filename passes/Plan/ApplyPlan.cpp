//===- ApplyPlan.cpp - tensor-parallel plan to shard annotations ----------===//

#include "LoRASurgery.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"
#include "tpopt/Plan/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPAPPLYPLAN
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::plan;

namespace {

/// Where a parameter lives: split on one dimension, or replicated.
struct Placement {
  int64_t dim = -1;
  std::string key; // plan entry
  /// KV-head replication: `dim` is cut into tp / replicas blocks and each
  /// block is held by `replicas` consecutive ranks (one query group).
  int64_t replicas = 1;
  /// Replicated with partial gradients (replicated_with_grad_allreduce).
  bool gradSum = false;
  /// The plan's "grad_reduction" override of the derived replica class.
  std::string gradReduction;
  /// The plan's "exclude": neither broadcast nor synchronized.
  bool exclude = false;
  /// An uneven split (allow-uneven): each rank's first element and element
  /// count along `dim`.
  SmallVector<int64_t> starts, sizes;
  bool operator==(const Placement &o) const { return dim == o.dim; }
};

/// A `shard.shard` of `v` split over grid axis 0 on `splitDim`, or
/// replicated when it is negative, inserted at the builder's point.
shard::ShardOp annotateValue(OpBuilder &builder, Value v, int64_t splitDim,
                             bool forUsers) {
  MLIRContext *ctx = builder.getContext();
  SmallVector<shard::GridAxesAttr> split(std::max<int64_t>(splitDim, 0) + 1,
                                         DenseI16ArrayAttr::get(ctx, {}));
  if (splitDim >= 0)
    split[splitDim] = DenseI16ArrayAttr::get(ctx, {0});
  auto sharding = shard::ShardingOp::create(
      builder, v.getLoc(), FlatSymbolRefAttr::get(ctx, "tp"), split);
  return shard::ShardOp::create(builder, v.getLoc(), v, sharding.getResult(),
                                forUsers);
}

/// Ceil/floor shares of `units` units of `unit` elements over `parts`
/// ranks, the larger first, from element `base` on: appended to `starts`
/// and `sizes` in elements.
void appendShares(int64_t units, int64_t parts, int64_t unit, int64_t base,
                  SmallVectorImpl<int64_t> &starts,
                  SmallVectorImpl<int64_t> &sizes) {
  int64_t at = 0;
  for (int64_t r = 0; r < parts; ++r) {
    int64_t share = units / parts + (r < units % parts ? 1 : 0);
    starts.push_back(base + at * unit);
    sizes.push_back(share * unit);
    at += share;
  }
}

/// The parameter behind its annotation.
Value parameterOf(Value v) {
  if (auto annotated = v.getDefiningOp<shard::ShardOp>())
    return annotated.getSrc();
  return v;
}

struct TPApplyPlanPass : public tp::impl::TPApplyPlanBase<TPApplyPlanPass> {
  using Base::Base;
  using Placements = llvm::DenseMap<Value, Placement>;

  void runOnOperation() override {
    // The state below is per run: a pass manager may run this pass again.
    entries.clear();
    loraBranches.clear();
    planError.clear();
    reportedViolations.clear();
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> entry = requireEntry<func::FuncOp>(
        module, kForwardEntry,
        "tp-apply-plan: no func.func @forward (run --tp-raise-onnx first)");
    if (failed(entry))
      return signalPassFailure();
    func::FuncOp func = *entry;
    std::string planName = plan;
    if (plan == "auto") {
      // The architecture's plan: what raising recognised.
      FailureOr<ModelConfig> config = ModelConfig::read(module);
      if (failed(config))
        return signalPassFailure();
      planName = config->architecture.value_or("");
    }
    std::string root = innerModelPrefix(func);
    if (tp < 1) {
      module.emitError() << "tp must be at least 1, got "
                         << static_cast<int64_t>(tp);
      return signalPassFailure();
    }
    FailureOr<Plan> p = loadPlan(planName, root);
    if (failed(p)) {
      module.emitError() << "plan '" << planName << "': " << planError;
      return signalPassFailure();
    }
    module->setAttr(TPDialect::kPlanSourceAttrName,
                    StringAttr::get(module.getContext(), p->source));
    if (failed(apply(func, *p)))
      signalPassFailure();
  }

  /// The inner model's path, where the decoder layers live: "model",
  /// "backbone" (NemotronH's remote code), "model.language_model" (Gemma3
  /// inside Gemma3ForConditionalGeneration).
  static std::string innerModelPrefix(func::FuncOp func) {
    for (BlockArgument arg : func.getArguments())
      if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       TPDialect::kFqnAttrName))
        if (size_t at = fqn.getValue().find(".layers."); at != StringRef::npos)
          return fqn.getValue().take_front(at).str();
    return "model";
  }

  /// The plan named `planName` (built-in, hf: or file:); failure with
  /// `planError` set.
  FailureOr<Plan> loadPlan(StringRef planName, StringRef root) {
    auto fail = [&](const Twine &why) -> FailureOr<Plan> {
      planError = why.str();
      return failure();
    };
    llvm::Expected<Plan> p = llvm::createStringError("no plan");
    StringRef name = planName;
    if (name.consume_front("hf:")) {
      if (sp)
        return fail("transformers' base_model_tp_plan has no sequence-"
                    "parallel form (use a built-in plan, or a JSON plan with "
                    "shard(1) layouts)");
      p = loadHFPlan(name, root);
    } else if (name.consume_front("file:")) {
      p = loadJSONPlan(name);
      if (p && sp && !p->isSequenceParallel())
        return fail("sp=true, but the JSON plan has no sequence_parallel "
                    "module nor shard(1) layout (a JSON plan is used "
                    "verbatim)");
    } else {
      p = getBuiltinPlan(planName, root, sp);
    }
    if (!p)
      return fail(llvm::toString(p.takeError()));
    return std::move(*p);
  }

  /// The placement one use of a parameter asks for.
  FailureOr<Placement> placementFor(Value param, OpOperand &use, StringRef fqn,
                                    const Plan &plan) {
    Operation *user = use.getOwner();
    std::string module = moduleOf(fqn);
    // A tied table read by the output projection (soft-capped or not) is
    // lm_head's parameter.
    if (auto linear = dyn_cast<LinearOp>(user))
      if (llvm::any_of(param.getUsers(),
                       [](Operation *u) { return isa<EmbeddingOp>(u); }) &&
          reachesReturn(linear))
        module = "lm_head";
    const PlanEntry *entry = plan.lookup(module);
    Placement placement;
    if (!entry)
      return placement;
    if (!entry->unsupported.empty())
      return user->emitError() << "plan key '" << entry->pattern << "': style '"
                               << entry->styleName << "' ("
                               << entry->unsupported << ") is not supported";
    entries[user] = entry;
    placement.key = entry->pattern;
    placement.gradReduction = entry->gradReduction;
    placement.exclude = entry->exclude;
    if (entry->style == ParallelStyle::Replicate)
      return placement;
    // Replicated, but each rank sees part of the heads or of the sequence:
    // the gradients are partial sums.
    if (entry->style == ParallelStyle::ReplicatedWithGradAllreduce ||
        entry->style == ParallelStyle::SequenceParallel) {
      placement.gradSum = true;
      return placement;
    }
    bool colwise = entry->style == ParallelStyle::Colwise ||
                   entry->style == ParallelStyle::ColwiseGatherOutput;
    // A row-split module's bias is added after the reduction: replicated,
    // and under sequence parallelism (reduce-scatter onto the sequence) it
    // meets only this rank's positions, so its gradient is a partial sum.
    bool sequenceShardedBias = !colwise && entry->outputSequenceSharded;
    if (fqn.ends_with(".lora_B.bias")) {
      // Placed as the bias of the linear it adapts.
      placement.dim = colwise ? 0 : -1;
      placement.gradSum = sequenceShardedBias;
      return placement;
    }
    if (auto emb = dyn_cast<EmbeddingOp>(user)) {
      placement.dim = colwise ? 1 : 0;
      return placement;
    }
    if (auto linear = dyn_cast<LinearOp>(user)) {
      if (use.get() == linear.getWeight()) {
        placement.dim = colwise ? 0 : 1;
      } else {
        placement.dim = colwise ? 0 : -1; // Rowwise bias: replicated
        placement.gradSum = sequenceShardedBias;
      }
      return placement;
    }
    return user->emitError() << "plan key '" << entry->pattern << "' ("
                             << stringifyParallelStyle(entry->style)
                             << ") places parameter '" << fqn
                             << "', which is not a linear or embedding "
                                "parameter";
  }

  /// The activations at style boundaries. Each planned module's output
  /// gets a result annotation with its output layout: Rowwise replicated
  /// (its partial sum all-reduced) or, with output_layouts=Shard(1),
  /// sequence-split (reduce-scattered); Colwise split on its last dimension,
  /// or replicated when gathered. Under sequence parallelism the input of
  /// every column-split linear is annotated replicated for its users
  /// (all-gathered when it arrives sequence-split), once per value as AM's
  /// SPAG norms do.
  void annotateBoundaries(func::FuncOp func,
                          const llvm::DenseMap<Value, Placement> &placements,
                          bool sequenceParallel) {
    OpBuilder builder(func.getContext());
    llvm::DenseMap<Value, Value> gathered;
    func.walk([&](Operation *op) {
      // transformers' sequence_parallel norm takes its input onto the
      // sequence shards (a replicated one is sliced; built-in and JSON SP
      // plans bring it there by their reduce-scatters).
      if (auto norm = dyn_cast<RmsNormOp>(op)) {
        const PlanEntry *entry = entries.lookup(op);
        if (entry && entry->shardsInput &&
            norm.getX().getType().getRank() == 3) {
          builder.setInsertionPoint(op);
          norm.getXMutable().assign(
              annotateValue(builder, norm.getX(), 1, /*forUsers=*/true));
        }
        return;
      }
      if (!isa<EmbeddingOp, LinearOp>(op) || loraBranches.isFactor(op))
        return;
      if (const PlanEntry *entry = entries.lookup(op)) {
        // The module's output: with LoRA, base plus LoRA.
        auto lora = loraBranches.byBase.find(op);
        Value result = lora == loraBranches.byBase.end()
                           ? Value(op->getResult(0))
                           : Value(lora->second.sum.getResult());
        int64_t rank = cast<RankedTensorType>(result.getType()).getRank();
        std::optional<int64_t> splitDim;
        if (entry->style == ParallelStyle::Rowwise)
          splitDim = entry->outputSequenceSharded ? 1 : -1;
        else if (entry->style == ParallelStyle::Colwise)
          splitDim = rank - 1;
        else if (entry->style == ParallelStyle::ColwiseGatherOutput)
          splitDim = -1;
        if (splitDim) {
          builder.setInsertionPointAfterValue(result);
          auto annotated =
              annotateValue(builder, result, *splitDim, /*forUsers=*/false);
          result.replaceAllUsesExcept(annotated.getResult(), annotated);
        }
        // Rowwise with a replicated input (transformers' rowwise_rep,
        // rowwise_split_input): each rank takes its block of the input.
        if (auto linear = dyn_cast<LinearOp>(op);
            linear && entry->inputReplicated) {
          builder.setInsertionPoint(op);
          auto xType = cast<RankedTensorType>(linear.getX().getType());
          auto split = annotateValue(builder, linear.getX(),
                                     xType.getRank() - 1, /*forUsers=*/true);
          linear.getXMutable().assign(split);
          if (auto lora = loraBranches.byBase.find(op);
              lora != loraBranches.byBase.end())
            lora->second.a.getXMutable().assign(split);
        }
      }
      auto linear = dyn_cast<LinearOp>(op);
      if (!sequenceParallel || !linear)
        return;
      auto it = placements.find(parameterOf(linear.getWeight()));
      if (it == placements.end() || it->second.dim != 0)
        return;
      // LoRA's A reads the module input too: one gather serves both.
      Value &replicated = gathered[linear.getX()];
      if (!replicated) {
        builder.setInsertionPoint(op);
        replicated =
            annotateValue(builder, linear.getX(), -1, /*forUsers=*/true);
      }
      linear.getXMutable().assign(replicated);
      if (auto lora = loraBranches.byBase.find(op);
          lora != loraBranches.byBase.end())
        lora->second.a.getXMutable().assign(replicated);
    });
  }

  /// The linear whose module output `v` is: its result, or with LoRA the
  /// sum of base and LoRA.
  LinearOp moduleLinear(Value v) {
    if (auto biased = v.getDefiningOp<BiasAddOp>())
      v = biased.getX();
    if (Operation *base = loraBranches.baseOfSum.lookup(v.getDefiningOp()))
      return cast<LinearOp>(base);
    return v.getDefiningOp<LinearOp>();
  }

  /// Between A and B: under Colwise, x A^T is split over the rank and is
  /// gathered whole for B; under Rowwise it is a partial sum, reduce-
  /// scattered over the rank for B (whose rank dimension is split).
  void
  annotateLoRABranches(const llvm::DenseMap<Value, Placement> &placements) {
    OpBuilder builder(&getContext());
    for (auto &[base, branch] : loraBranches.byBase) {
      auto it = placements.find(parameterOf(cast<LinearOp>(base).getWeight()));
      if (it == placements.end() || it->second.dim < 0)
        continue;
      Value down = branch.a.getResult();
      int64_t rank = cast<RankedTensorType>(down.getType()).getRank();
      builder.setInsertionPointAfter(branch.a);
      auto annotated =
          annotateValue(builder, down, it->second.dim == 0 ? -1 : rank - 1,
                        /*forUsers=*/it->second.dim == 0);
      down.replaceAllUsesExcept(annotated.getResult(), annotated);
    }
  }

  /// Whether `size` divides by tp; a violation is reported once per plan
  /// key and cut (not once per layer), and every distinct one is reported.
  LogicalResult checkDivisible(Operation *op, StringRef key, StringRef what,
                               int64_t size) {
    if (size % static_cast<int64_t>(tp) == 0)
      return success();
    std::string message =
        ("plan key '" + key + "': " + Twine(size) + " " + what +
         " are not divisible by tp " + Twine(static_cast<int64_t>(tp)))
            .str();
    if (reportedViolations.insert(message).second)
      op->emitError() << message << unevenHint();
    return failure();
  }

  /// Where an even split is what the user asked for: the flag that lifts
  /// it.
  StringRef unevenHint() const {
    return allowUneven ? "" : " (--allow-uneven splits it unevenly)";
  }

  /// Each rank's range of `units` units of `unit` elements (ceil/floor
  /// shares) on every parameter of `proj` (weight, bias, LoRA B and its
  /// bias), all split on dim 0.
  LogicalResult setRanges(Operation *at, StringRef key, LinearOp proj,
                          ArrayRef<int64_t> starts, ArrayRef<int64_t> sizes,
                          Placements &placements) {
    auto lora = loraBranches.byBase.find(proj);
    Value loraB, loraBias;
    if (lora != loraBranches.byBase.end()) {
      loraB = lora->second.b.getWeight();
      loraBias = lora->second.bias;
    }
    for (Value param :
         {Value(proj.getWeight()), Value(proj.getBias()), loraB, loraBias}) {
      if (!param)
        continue;
      auto it = placements.find(parameterOf(param));
      if (it == placements.end() || it->second.dim != 0)
        return at->emitError()
               << "plan key '" << key << "': heads split unevenly need "
               << "every parameter of the q, k and v projections split on "
                  "their output features";
      it->second.starts.assign(starts.begin(), starts.end());
      it->second.sizes.assign(sizes.begin(), sizes.end());
    }
    return success();
  }

  /// Heads that do not divide by tp (allow-uneven): each rank gets whole
  /// KV heads with their query groups when tp does not exceed the KV
  /// heads; otherwise the ranks are shared out over the KV heads (a KV
  /// head replicated on its ranks) and each KV head's query group over its
  /// ranks. The output projection's input features follow the query
  /// heads.
  LogicalResult splitHeadsUnevenly(AttentionOp att, StringRef key, LinearOp q,
                                   LinearOp k, LinearOp v,
                                   Placements &placements) {
    int64_t heads = att.getNumHeadsAttr().getInt(),
            kv = att.getNumKvHeadsAttr().getInt(), d = att.getHeadDim();
    int64_t ranks = tp, group = heads / kv;
    if (heads < ranks)
      return att.emitError() << "plan key '" << key << "': " << heads
                             << " attention heads cannot give each of " << ranks
                             << " ranks a head";
    SmallVector<int64_t> qStarts, qSizes, kvStarts, kvSizes;
    if (ranks <= kv) {
      appendShares(kv, ranks, d, 0, kvStarts, kvSizes);
      for (auto [start, size] : llvm::zip_equal(kvStarts, kvSizes)) {
        qStarts.push_back(start * group);
        qSizes.push_back(size * group);
      }
    } else {
      SmallVector<int64_t> unusedStarts, ranksOf;
      appendShares(ranks, kv, 1, 0, unusedStarts, ranksOf);
      // With no more ranks than heads, no KV head has more ranks than
      // query heads.
      for (auto [j, shared] : llvm::enumerate(ranksOf)) {
        appendShares(group, shared, d, j * group * d, qStarts, qSizes);
        for (int64_t r = 0; r < shared; ++r) {
          kvStarts.push_back(j * d);
          kvSizes.push_back(d);
        }
      }
    }
    if (q && failed(setRanges(att, key, q, qStarts, qSizes, placements)))
      return failure();
    for (LinearOp proj : {k, v})
      if (proj &&
          failed(setRanges(att, key, proj, kvStarts, kvSizes, placements)))
        return failure();
    // The output projection (and its LoRA A) reads the heads as input
    // features.
    for (Operation *user : att.getResult().getUsers()) {
      auto out = dyn_cast<LinearOp>(user);
      auto it = out ? placements.find(parameterOf(out.getWeight()))
                    : placements.end();
      if (it == placements.end() || it->second.dim != 1)
        return att.emitError()
               << "plan key '" << key << "': heads split unevenly need the "
               << "attention output read by row-split projections only";
      it->second.starts = qStarts;
      it->second.sizes = qSizes;
    }
    return success();
  }

  LogicalResult apply(func::FuncOp func, const Plan &plan) {
    OpBuilder builder(func.getContext());
    builder.setInsertionPointToStart(getOperation().getBody());
    shard::GridOp::create(builder, func.getLoc(), "tp", ArrayRef<int64_t>{tp});
    if (loraRank != 0 || !loraAdapter.empty()) {
      LoRAOptions options{loraAdapter, loraWeights, loraRank, loraAlpha,
                          loraTargets};
      if (failed(insertLoRA(func, options, loraBranches)))
        return failure();
    }
    Placements placements;
    if (failed(choosePlacements(func, plan, placements)))
      return failure();
    // Every violation is reported, heads and splits alike.
    bool headsOk = succeeded(checkHeads(func, placements));
    if (!headsOk | failed(checkSplits(func, placements)))
      return failure();
    annotateParams(func, placements);
    annotateLoRABranches(placements);
    annotateBoundaries(func, placements, plan.isSequenceParallel());
    return success();
  }

  /// Each parameter's placement: the one every use of it asks for (a tied
  /// parameter's uses must agree); keys that place nothing are a warning.
  LogicalResult choosePlacements(func::FuncOp func, const Plan &plan,
                                 Placements &placements) {
    llvm::StringSet<> usedKeys;
    for (BlockArgument arg : func.getArguments()) {
      auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   TPDialect::kFqnAttrName);
      if (!fqn)
        continue;
      std::optional<Placement> chosen;
      Operation *chosenBy = nullptr;
      for (OpOperand &use : arg.getUses()) {
        FailureOr<Placement> p = placementFor(arg, use, fqn.getValue(), plan);
        if (failed(p))
          return failure();
        // "split on dim 0 by plan key 'lm_head' (tp.linear)", or
        // "replicated, no plan key places its tp.embedding".
        auto describe = [](const Placement &placement, Operation *user) {
          std::string opName = user->getName().getStringRef().str();
          std::string where =
              placement.dim < 0
                  ? "replicated"
                  : "split on dim " + std::to_string(placement.dim);
          if (placement.key.empty())
            return where + " (no plan key places its " + opName + ")";
          return where + " by plan key '" + placement.key + "' (" + opName +
                 ")";
        };
        if (chosen && !(*chosen == *p))
          return func.emitError() << "tied parameter '" << fqn.getValue()
                                  << "' is " << describe(*chosen, chosenBy)
                                  << " and " << describe(*p, use.getOwner());
        chosen = *p;
        chosenBy = use.getOwner();
        if (!p->key.empty())
          usedKeys.insert(p->key);
      }
      if (chosen && chosen->dim >= 0 &&
          (!chosen->gradReduction.empty() || chosen->exclude))
        return func.emitError()
               << "plan key '" << chosen->key
               << "': " << (chosen->exclude ? "exclude" : "grad_reduction")
               << " is for replicated parameters; '" << fqn.getValue()
               << "' is split on dim " << chosen->dim;
      placements[arg] = chosen.value_or(Placement());
    }
    // A key on a module that only holds others (transformers' local_params
    // and all_reduce on an attention or MLP block, MoE expert containers)
    // names no parameter's own module.
    llvm::StringSet<> modules;
    for (BlockArgument arg : func.getArguments())
      if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       TPDialect::kFqnAttrName))
        modules.insert(moduleOf(fqn.getValue()));
    auto holdsModules = [&](StringRef pattern) {
      size_t depth = llvm::count(pattern, '.') + 1;
      return llvm::any_of(modules.keys(), [&](StringRef module) {
        SmallVector<StringRef> parts;
        module.split(parts, '.');
        return parts.size() > depth &&
               matchesModulePattern(
                   pattern, llvm::join(ArrayRef(parts).take_front(depth), "."));
      });
    };
    for (const PlanEntry &entry : plan.entries) {
      if (usedKeys.contains(entry.pattern))
        continue;
      if (!holdsModules(entry.pattern)) {
        func.emitWarning() << "plan key '" << entry.pattern
                           << "' matches no module";
        continue;
      }
      if (!entry.unsupported.empty())
        return func.emitError() << "plan key '" << entry.pattern << "': style '"
                                << entry.styleName << "' (" << entry.unsupported
                                << ") is not supported";
    }

    return success();
  }

  /// The split of `v`, if a parameter split on some dimension.
  static std::optional<Placement> splitOf(const Placements &placements,
                                          Value v) {
    auto it = placements.find(v);
    if (it == placements.end() || it->second.dim < 0)
      return std::nullopt;
    return it->second;
  }

  /// Attention heads divide by tp; with fewer KV heads than ranks, each KV
  /// head is held by the ranks of its query group (replicas).
  LogicalResult checkHeads(func::FuncOp func, Placements &placements) {
    auto splitOf = [&](Value v) {
      return TPApplyPlanPass::splitOf(placements, v);
    };
    // Heads first: they decide KV-head replication, which changes what the
    // k and v projections cut.
    bool violated = false;
    WalkResult walk = func.walk([&](AttentionOp att) {
      Operation *op = att;
      {
        // Through rotary and q/k norms to the projection. A part of a
        // fused projection (qkv_proj) has none of its own: the slice
        // reads whole rows, so the fused output is gathered, not cut by
        // heads.
        auto projOf = [](Value v) -> LinearOp {
          while (v.getDefiningOp() && !v.getDefiningOp<LinearOp>() &&
                 !v.getDefiningOp<FeatureSliceOp>() &&
                 v.getDefiningOp()->getNumOperands() > 0)
            v = v.getDefiningOp()->getOperand(0);
          return v.getDefiningOp<LinearOp>();
        };
        LinearOp q = projOf(att.getQ()), k = projOf(att.getK()),
                 v = projOf(att.getV());
        if (allowUneven) {
          int64_t heads = att.getNumHeadsAttr().getInt(),
                  kv = att.getNumKvHeadsAttr().getInt();
          std::optional<Placement> p;
          for (LinearOp proj : {q, k, v})
            if (proj && !p)
              p = splitOf(proj.getWeight());
          if (p && (heads % tp || (kv % tp && tp % kv))) {
            violated |=
                failed(splitHeadsUnevenly(att, p->key, q, k, v, placements));
            return WalkResult::advance();
          }
        }
        if (q)
          if (auto p = splitOf(q.getWeight()))
            violated |= failed(checkDivisible(op, p->key, "attention heads",
                                              att.getNumHeadsAttr().getInt()));
        if (k)
          if (auto p = splitOf(k.getWeight())) {
            int64_t kv = att.getNumKvHeadsAttr().getInt();
            if (kv % tp != 0) {
              if (tp % kv != 0) {
                std::string message =
                    ("plan key '" + p->key + "': " + Twine(kv) +
                     " KV heads are not divisible by tp " +
                     Twine(static_cast<int64_t>(tp)) + " (nor tp by them)")
                        .str();
                if (reportedViolations.insert(message).second)
                  op->emitError() << message << unevenHint();
                violated = true;
                return WalkResult::advance();
              }
              // Fewer KV heads than ranks: every rank of a query group
              // holds that group's KV head.
              LinearOp v = projOf(att.getV());
              for (LinearOp proj : {k, v}) {
                if (!proj)
                  continue;
                auto lora = loraBranches.byBase.find(proj);
                Value loraB, loraBias;
                if (lora != loraBranches.byBase.end()) {
                  loraB = lora->second.b.getWeight();
                  loraBias = lora->second.bias;
                }
                for (Value param : {Value(proj.getWeight()),
                                    Value(proj.getBias()), loraB, loraBias}) {
                  if (!param)
                    continue;
                  auto it = placements.find(param);
                  if (it == placements.end() || it->second.dim != 0) {
                    op->emitError()
                        << "plan key '" << p->key << "': " << kv
                        << " KV heads on " << static_cast<int64_t>(tp)
                        << " ranks need the k and v projections split on "
                           "their output features";
                    return WalkResult::interrupt();
                  }
                  it->second.replicas = tp / kv;
                }
              }
            }
          }
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted() || violated);
  }

  /// What each split cuts (features, vocabulary rows, LoRA ranks) divides
  /// by tp.
  LogicalResult checkSplits(func::FuncOp func, Placements &placements) {
    auto splitOf = [&](Value v) {
      return TPApplyPlanPass::splitOf(placements, v);
    };
    // Ceil/floor single elements where allowed.
    auto divides = [&](Operation *op, Value param, const Placement &p,
                       StringRef what, int64_t size) {
      if (!p.sizes.empty())
        return success(); // split by heads
      if (size % tp == 0 || !allowUneven)
        return checkDivisible(op, p.key, what, size);
      Placement &placed = placements[parameterOf(param)];
      placed.starts.clear();
      placed.sizes.clear();
      appendShares(size, tp, 1, 0, placed.starts, placed.sizes);
      return success();
    };
    bool violated = false;
    func.walk([&](Operation *op) {
      if (auto linear = dyn_cast<LinearOp>(op)) {
        auto p = splitOf(linear.getWeight());
        if (p && p->replicas == 1) {
          auto w = linear.getWeight().getType();
          StringRef what = p->dim == 0 ? "output features" : "input features";
          auto arg = dyn_cast<BlockArgument>(parameterOf(linear.getWeight()));
          auto fqn = arg ? func.getArgAttrOfType<StringAttr>(
                               arg.getArgNumber(), TPDialect::kFqnAttrName)
                         : StringAttr();
          // A is [rank, in], B [out, rank]: the split cuts the rank.
          bool loraRank =
              fqn && isLoRAFactor(fqn.getValue()) &&
              (p->dim == 0) == fqn.getValue().ends_with(".lora_A.weight");
          if (loraRank)
            what = "LoRA rank dimensions";
          violated |= failed(
              divides(op, linear.getWeight(), *p, what, w.getDimSize(p->dim)));
          // Its bias follows its output features.
          if (Value bias = linear.getBias(); bias && p->dim == 0)
            if (auto b = splitOf(bias); b && b->sizes.empty())
              (void)divides(op, bias, *b, what, w.getDimSize(0));
        }
      } else if (auto biased = dyn_cast<BiasAddOp>(op)) {
        // A bias added after the product (PEFT's lora_B bias) follows the
        // features it is added to.
        if (auto p = splitOf(biased.getBias()); p && p->sizes.empty())
          violated |=
              failed(divides(op, biased.getBias(), *p, "output features",
                             biased.getBias().getType().getDimSize(0)));
      } else if (auto emb = dyn_cast<EmbeddingOp>(op)) {
        if (auto p = splitOf(emb.getTable())) {
          StringRef what = p->dim == 0 ? "vocabulary rows" : "hidden features";
          violated |=
              failed(divides(op, emb.getTable(), *p, what,
                             emb.getTable().getType().getDimSize(p->dim)));
        }
      }
    });
    return failure(violated);
  }

  /// A shard.shard per parameter, and the placement attributes.
  void annotateParams(func::FuncOp func, const Placements &placements) {
    OpBuilder builder(func.getContext());
    builder.setInsertionPointToStart(&func.getBody().front());
    for (BlockArgument arg : func.getArguments()) {
      auto it = placements.find(arg);
      if (it == placements.end())
        continue;
      const Placement &p = it->second;
      auto annotated = annotateValue(builder, arg, p.dim, /*forUsers=*/true);
      arg.replaceAllUsesExcept(annotated.getResult(), annotated);
      MLIRContext *ctx = func.getContext();
      PlacementAttr placement =
          !p.sizes.empty()
              ? PlacementAttr::getUneven(ctx, p.dim, p.starts, p.sizes, p.key)
          : p.dim >= 0 ? PlacementAttr::getSplit(ctx, p.dim, p.replicas, p.key)
                       : PlacementAttr::getReplicated(
                             ctx,
                             p.gradSum || readsHeadShards(annotated, placements)
                                 ? GradReduction::Sum
                                 : GradReduction::Mean,
                             p.key);
      func.setArgAttr(arg.getArgNumber(), TPDialect::kPlacementAttrName,
                      placement);
      if (p.exclude)
        func.setArgAttr(arg.getArgNumber(), TPDialect::kExcludeAttrName,
                        UnitAttr::get(ctx));
      if (!p.gradReduction.empty())
        func.setArgAttr(arg.getArgNumber(), TPDialect::kGradReductionAttrName,
                        GradReductionAttr::get(
                            ctx, *symbolizeGradReduction(p.gradReduction)));
    }
  }

  /// A replicated norm weight applied per head to a column-split
  /// projection's output sees only this rank's heads: its gradient is a
  /// partial sum (HF's replicated_with_grad_allreduce).
  bool readsHeadShards(shard::ShardOp param,
                       const llvm::DenseMap<Value, Placement> &placements) {
    for (Operation *user : param->getUsers())
      if (auto norm = dyn_cast<RmsNormOp>(user))
        if (norm.getGroupSizeAttr())
          if (LinearOp linear = moduleLinear(norm.getX())) {
            auto it = placements.find(parameterOf(linear.getWeight()));
            if (it != placements.end() && it->second.dim == 0)
              return true;
          }
    return false;
  }

  /// The plan entry that placed each linear, embedding and norm.
  llvm::DenseMap<Operation *, const PlanEntry *> entries;
  /// LoRA branches by the linear they adapt, and their A and B linears.
  LoRABranches loraBranches;
  /// Why the plan could not be loaded.
  std::string planError;
  /// Divisibility violations already reported (once per key and cut).
  llvm::StringSet<> reportedViolations;
};

} // namespace
