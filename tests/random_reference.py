"""A numpy implementation of tandem's random stream, written from docs/ops.md ("Random sampling")
and not from src/kernels/random.c: the independent reference that tests/python/test_random_sampling.py and
the JS fixture (tests/fixtures/make.py, tests/js/random-sampling.test.js) compare the runtime against, bit for
bit."""

import numpy as np

M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
MASK = np.uint64(0xFFFFFFFF)


def philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on uint64 arrays holding 32-bit words."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3, k0, k1))
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & MASK, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & MASK
    return c0, c1, c2, c3


def blocks(seed: int, calls: int, stream: int, n_blocks: int) -> np.ndarray:
    """Words [n_blocks, 4] of one op's stream."""
    seed, calls = seed % 2**64, calls % 2**64
    b = np.arange(n_blocks, dtype=np.uint64)
    out = philox(
        b,
        np.full_like(b, stream),
        np.full_like(b, calls & 0xFFFFFFFF),
        np.full_like(b, calls >> 32),
        np.uint64(seed & 0xFFFFFFFF),
        np.uint64(seed >> 32),
    )
    return np.stack(out, axis=1)


def unit24(w):
    return (w >> np.uint64(8)).astype(np.float64) * (1.0 / 16777216.0)


def ln_unit(k):
    """ln(k / 2^24), k in [1, 2^24], with +, -, *, / only."""
    k = k.astype(np.float64)
    e = np.frexp(k)[1].astype(np.int64) - 1
    m = k / np.ldexp(1.0, e)
    big = m > 1.4142135623730951
    m = np.where(big, m / 2.0, m)
    e = e + big
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    t = 1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0)))))
    return (e - 24).astype(np.float64) * 0.6931471805599453 + (2.0 * s + 2.0 * s * (s2 * t))


def cos_sin_turn(j):
    q = j >> np.uint64(22)
    x = (j & np.uint64(0x3FFFFF)).astype(np.float64) * (1.0 / 4194304.0) * 1.5707963267948966
    x2 = x * x
    s = x * (
        1.0
        + x2
        * (
            -1.0 / 6.0
            + x2
            * (
                1.0 / 120.0
                + x2
                * (
                    -1.0 / 5040.0
                    + x2 * (1.0 / 362880.0 + x2 * (-1.0 / 39916800.0 + x2 * (1.0 / 6227020800.0 + x2 * (-1.0 / 1307674368000.0))))
                )
            )
        )
    )
    c = 1.0 + x2 * (
        -1.0 / 2.0
        + x2
        * (
            1.0 / 24.0
            + x2
            * (
                -1.0 / 720.0
                + x2
                * (
                    1.0 / 40320.0
                    + x2 * (-1.0 / 3628800.0 + x2 * (1.0 / 479001600.0 + x2 * (-1.0 / 87178291200.0 + x2 * (1.0 / 20922789888000.0))))
                )
            )
        )
    )
    cos = np.select([q == 0, q == 1, q == 2], [c, -s, -c], s)
    sin = np.select([q == 0, q == 1, q == 2], [s, c, -s], -c)
    return cos, sin


def ref_uniform(n, a=0.0, b=1.0, *, seed=0, calls=0, stream=0):
    w = blocks(seed, calls, stream, (n + 3) // 4).reshape(-1)[:n]
    return (a + (b - a) * unit24(w)).astype(np.float32)


def ref_normal(n, mean=0.0, std=1.0, *, seed=0, calls=0, stream=0):
    w = blocks(seed, calls, stream, (n + 3) // 4)
    z = np.empty((len(w), 4))
    for p in (0, 1):
        r = np.sqrt(-2.0 * ln_unit((w[:, 2 * p] >> np.uint64(8)) + np.uint64(1)))
        c, s = cos_sin_turn(w[:, 2 * p + 1] >> np.uint64(8))
        z[:, 2 * p], z[:, 2 * p + 1] = r * c, r * s
    return (mean + std * z.reshape(-1)[:n]).astype(np.float32)


def ref_randint(n, lo, hi, *, seed=0, calls=0, stream=0):
    w = blocks(seed, calls, stream, (n + 1) // 2).reshape(-1, 2)
    bits = [int(a) | int(b) << 32 for a, b in w][:n]
    return np.array([lo + x % (hi - lo) for x in bits], dtype=np.int64)


def ref_multinomial(weights, k, replacement, *, seed=0, calls=0, stream=0):
    w = np.atleast_2d(np.asarray(weights, dtype=np.float32))
    words = blocks(seed, calls, stream, (w.shape[0] * k + 3) // 4).reshape(-1)
    out = np.zeros((w.shape[0], k), dtype=np.int64)
    for r, row in enumerate(w):
        taken = []
        for s in range(k):
            avail = [i for i in range(len(row)) if replacement or i not in taken]
            total = 0.0
            for i in avail:
                total += float(row[i])
            u = unit24(words[r * k + s]) * total
            acc, pick, last = 0.0, -1, -1
            for i in avail:
                if not row[i] > 0:
                    continue
                last = i
                acc += float(row[i])
                if acc > u:
                    pick = i
                    break
            out[r, s] = pick if pick >= 0 else last
            taken.append(out[r, s])
    return out if np.ndim(weights) == 2 else out[0]
