"""External-data f32 initializers laid end to end in one sparse file that is
extended to its full size and never written (bench/compile's graphs)."""
import os

import numpy as np
from onnx import TensorProto


class SparseWeights:
    def __init__(self, location="weights.bin"):
        self.location, self.offset = location, 0

    def tensor(self, name, shape):
        """A TensorProto for the next byte range of the file."""
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(shape)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(shape)) * 4
        for key, value in (("location", self.location), ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.offset += length
        return t

    def write(self, directory):
        with open(os.path.join(directory, self.location), "wb") as data:
            data.truncate(self.offset)
