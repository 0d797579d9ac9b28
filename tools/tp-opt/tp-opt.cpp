//===- tp-opt.cpp - the tp-opt driver (mlir-opt conventions) --------------===//

#include "tpopt/Registration/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::tp::registerAllDialects(registry);
  mlir::tp::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "tp-opt: tensor-parallel transformer compiler\n", registry));
}
