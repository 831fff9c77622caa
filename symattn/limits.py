"""Every cap on user input, in one place (the table in docs/limits.md lists them).

Why caps: symattn keeps every value exact, and exact arithmetic has no
natural bound on its cost.  A numeral of a million digits, a root of degree
2^64 or a 10^12 score each take minutes or gigabytes somewhere downstream
(printing, minimal polynomials, rounding).  So what the parser and the
problem loader accept is bounded so that every view and command finishes
quickly on it, and anything past a cap is refused at once with one line
that names the input, its position and the cap.

Other modules import these names; tests/test_parser_caps.py checks that
docs/limits.md shows the same numbers.
"""

from __future__ import annotations

__all__ = [
    "MAX_ALGEBRAIC_DEGREE", "MAX_ALGEBRAIC_DIGITS", "MAX_ARRAY_BYTES", "MAX_ARRAY_DIMS", "MAX_BITS",
    "MAX_DECIMAL_EXPONENT", "MAX_DEPTH", "MAX_ENTRIES", "MAX_ENTRY_MAGNITUDE", "MAX_EXACT_DIGITS",
    "MAX_FILE_BYTES", "MAX_FLOAT_ARB_ENTRIES", "MAX_FLOAT_BATCH", "MAX_FLOAT_WEIGHTS",
    "MAX_FLOAT_WORK", "MAX_HEADS", "MAX_JSON_BACKWARD_TERMS", "MAX_JSON_BYTES", "MAX_NPY_HEADER_BYTES", "MAX_NPZ_MEMBERS",
    "MAX_NUMERAL_DIGITS", "MAX_POWER_EXPONENT", "MAX_ROOT_BITS", "MAX_ROOT_INDEX",
    "MAX_SCORE_MAGNITUDE", "MAX_SIDE", "MAX_SYMBOLIC_SIDE", "MAX_TEXT_LENGTH", "MAX_VALUE_DIGITS",
    # floatref-run (symattn.floatrun)
    "MAX_DUMP_ARRAY_BYTES", "MAX_DUMP_DIMS", "MAX_DUMP_ENTRIES", "MAX_DUMP_FILE_BYTES", "MAX_FILE_ARRAYS",
    "MAX_MANIFEST_BYTES", "MAX_RESULT_BYTES", "MAX_SAFETENSORS_HEADER", "MAX_SAMPLE", "MAX_SHARDS",
    "MAX_WORKERS", "MAX_WORST",
]

# -- one expression string (symattn.exact.parser) ---------------------------------
MAX_TEXT_LENGTH = 10_000        # characters in one expression string
MAX_DEPTH = 100                 # nesting: parentheses, calls, signs, √ and powers
MAX_NUMERAL_DIGITS = 1_000      # digits written in one numeral (2.000…0e0 counts every 0)
MAX_DECIMAL_EXPONENT = 1_000    # |e| of a numeral such as 1.5e-3
MAX_POWER_EXPONENT = 10_000     # |p| of an exponent p/q; |x| of e^x and of b^x = e^(x·log b);
                                # |x| of tanh(x), cos(x), sin(x)
MAX_VALUE_DIGITS = 1_000        # digits of the numerator or denominator of any rational built
MAX_BITS = 100_000              # estimated bits of all numerals and powers in one string
MAX_ROOT_BITS = 2_000           # bits under logs and irrational powers (SymPy factors them)
# Roots: SymPy's minimal polynomial (used to decide exact ties and hidden
# rationals) is fast below these and falls off a cliff above them (measured:
# degree 16 with 20-bit radicands, or degree 8 with 1000-digit coefficients,
# runs past 30 s or 2 GB; see docs/limits.md).
MAX_ALGEBRAIC_DEGREE = 8        # product of the root indices of the distinct roots in a value
                                # (√2·∛3 is 6) and in a whole problem (√2, √3, √5 is 8)
MAX_ALGEBRAIC_DIGITS = 30       # digits of every rational in a value that has a root
MAX_ROOT_INDEX = 10_000         # root index q of a power b^(p/q) the engine builds: SymPy writes
                                # e^(c·log b) as b^c (a scale log(7)*1.00000000000000000001 made
                                # roots of index 10^20, which flint cannot enclose)

# -- one problem (symattn.problem.problem, symattn.problem.matrix) --------------------------
MAX_ENTRY_MAGNITUDE = 10**6     # |x| of the entries that make the scores (X, W_q, W_k, X_kv, Q, K), |scale|
MAX_SCORE_MAGNITUDE = 10**12    # |scaled score| bound: d_k·max|q|·max|k|·|scale|
MAX_EXACT_DIGITS = 1_000        # digits of an exact scaled score (bound): what a view can show
MAX_SIDE = 1_024                # rows or columns of one matrix (n, m, d_model, d_k, d_v)
MAX_ENTRIES = 262_144           # entries of one matrix, and queries × keys (512 × 512)
MAX_SYMBOLIC_SIDE = 16          # n, m, d_model, d_k, d_v when an input entry is not rational
                                # (surds, e^x, π, symbols: worked by SymPy, ~n·m² cost)
MAX_HEADS = 256                 # query heads of one multi-head problem (each is a whole problem)

# -- outputs (symattn.document.trace_json) -----------------------------------------
MAX_JSON_BYTES = 32 * 1024 * 1024   # the JSON view (explain --format json), estimated before it is
                                    # built: exact weights grow like n·m² (n = 512: 2.4 GB, 11 GiB)
MAX_JSON_BACKWARD_TERMS = 131_072   # exponential terms the backward steps' exact strings would spell in
                                    # the JSON view, counted from the shapes before any gradient is built:
                                    # they grow like n·m²·d (16 × 16, d = 4: 98,560 terms, 1.1 MB, 11 s;
                                    # d = 16: 295,168 terms, 39 s, on the shared machine)

# -- input files (symattn.problem.tomlfile.read_text) -------------------------------
MAX_FILE_BYTES = 8 * 1024 * 1024   # one TOML file: a 512×512 Q, K and V of 3-digit decimals fit
# The CSV caps of grading live in symattn.check.grading.grade (MAX_ROWS, MAX_BYTES, ...).

# -- float arrays (symattn.floatref.arrays, symattn.floatref.sdpa) -------------------
# Measured on the shared 2-core machine (docs/limits.md): the fast path does about 5·10^8
# multiply-adds a second, costs ~20 bytes per weight and ~0.2-0.5 ms per head, and the
# exact (arb) path ~30-90 µs per entry it decides.
MAX_ARRAY_BYTES = 128 * 1024 * 1024   # the data of one .npy array or .npz member, from its header
MAX_ARRAY_DIMS = 8              # dimensions of one array ((batch, heads, rows, columns) is 4)
MAX_NPY_HEADER_BYTES = 10_000   # the .npy header dict (numpy's own max_header_size)
MAX_NPZ_MEMBERS = 64            # members listed in one .npz archive
MAX_FLOAT_BATCH = 4_096         # heads: the product of the broadcast batch dimensions
MAX_FLOAT_WEIGHTS = 1 << 24     # batch × L × S: the weights computed (4096 × 4096 in one head,
                                # the benchmark's (1, 1, 4096, 128): 3 s CPU, 0.6 GB; docs/benchmarks.md)
MAX_FLOAT_WORK = 1 << 32        # batch × L × S × (E + Ev): the multiply-adds of the scores and output
MAX_FLOAT_ARB_ENTRIES = 1 << 15  # entries too near a rounding boundary for float64, decided by arb

# -- a dump and a report folder (symattn.floatrun: files, dump, sampling, runner) ----------
MAX_DUMP_FILE_BYTES = 4 << 30   # one dump file (a layer's .safetensors may hold every head)
MAX_SAFETENSORS_HEADER = 1 << 20  # the JSON header of one .safetensors file
MAX_FILE_ARRAYS = 4_096         # arrays listed in one .safetensors file or .npz archive of a dump
MAX_DUMP_ARRAY_BYTES = MAX_ARRAY_BYTES  # the data of one array of a dump (the .npy reader's cap)
MAX_DUMP_DIMS = 4               # dimensions of one array of a dump ((1, 1, L, E) or (L, E))
MAX_MANIFEST_BYTES = 64 << 10   # one manifest.toml: a few lines
MAX_DUMP_ENTRIES = 100_000      # entries (files and folders) listed in a dump folder
MAX_SHARDS = 65_536             # shards of one run: layers × heads × row blocks
MAX_SAMPLE = 1 << 20            # N of --rows sample:N
MAX_RESULT_BYTES = 16 << 20     # one shard's result file read back from the report folder
MAX_WORST = 1_000               # --worst K: entries certified per tensor per shard (~3 ms each, measured)
MAX_WORKERS = 256               # --workers N: local Dask worker processes (each imports symattn, ~150 MB)
