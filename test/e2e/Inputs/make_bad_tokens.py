#!/usr/bin/env python3
"""Malformed training data for train.test: float tokens, a 1-D array, too few
rows, and ids outside the vocabulary (128), written into DIR."""
import os
import sys

import numpy as np

out = sys.argv[1]
np.save(os.path.join(out, "float.npy"), np.zeros((4, 12), np.float32))
np.save(os.path.join(out, "flat.npy"), np.zeros(48, np.int64))
np.save(os.path.join(out, "three.npy"), np.zeros((3, 12), np.int64))
ids = np.ones((4, 12), np.int64)
ids[2, 5] = 500
np.save(os.path.join(out, "outside.npy"), ids)
