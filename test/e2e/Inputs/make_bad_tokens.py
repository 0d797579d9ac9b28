#!/usr/bin/env python3
"""Training data for train.test, written into DIR: malformed (float tokens,
a 1-D array, too few rows, ids outside the vocabulary of 128) and TOKENS
(an int64 .npy) as int32.

    make_bad_tokens.py DIR TOKENS.npy"""
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
# The reference tokens as int32 (accepted: widened to int64).
tokens = np.load(sys.argv[2])
np.save(os.path.join(out, "tokens_i32.npy"), tokens.astype(np.int32))
