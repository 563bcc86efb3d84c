// The data's way onto the GPU (paralingam/search/_cuda.py, upload), compiled at run
// time by PyCUDA like the search's kernels.
//
// The user's array is row-major (one sample per row) and the search keeps one
// variable per row (X64, row stride ld samples). The host copies blocks of
// whole sample rows to the device unchanged, and these kernels transpose each
// block into X64, converting float to double on the way (exact). A transpose
// on the host reads one array against its order and cost far more than the
// copy over the bus. Fortran-ordered data go by whole variables instead
// (variables_block, at the end).

#define TILE 32
#define TILE_ROWS 8  // threads per tile column: a block is TILE x TILE_ROWS threads

// dst[c * ld + row0 + r] = src[r * p + c] for the block of `rows` sample rows
// (r < rows, c < p). One TILE x TILE tile per block, staged in shared memory so
// that both the reads (along a sample row) and the writes (along a variable's
// row) are coalesced; the extra column avoids bank conflicts of the
// transposed reads.
//
// With `scale` (p factors, powers of two), column c is multiplied by scale[c]
// on the way: the exact rescaling of the columns (paralingam._preparation),
// rounded as the host's product rounds (IEEE double, no flush to zero), so
// that float32 input is sent as it is, at half the bytes of a float64 copy.
template <typename T>
__device__ __forceinline__ void transpose_block(const T *__restrict__ src, int rows, int p,
                                                double *__restrict__ dst, long long ld,
                                                long long row0,
                                                const double *__restrict__ scale = nullptr)
{
    __shared__ double tile[TILE][TILE + 1];
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int k = ty; k < TILE; k += TILE_ROWS) {
        const int r = r0 + k, c = c0 + tx;
        if (r < rows && c < p) {
            const double v = (double)src[(size_t)r * p + c];
            tile[k][tx] = scale ? __dmul_rn(v, scale[c]) : v;
        }
    }
    __syncthreads();
    for (int k = ty; k < TILE; k += TILE_ROWS) {
        const int c = c0 + k, r = r0 + tx;
        if (r < rows && c < p) dst[(size_t)c * ld + row0 + r] = tile[tx][k];
    }
}

extern "C" __global__ void __launch_bounds__(TILE * TILE_ROWS)
transpose_f64(const double *src, int rows, int p, double *dst, long long ld, long long row0)
{
    transpose_block(src, rows, p, dst, ld, row0);
}

extern "C" __global__ void __launch_bounds__(TILE * TILE_ROWS)
transpose_f32(const float *src, int rows, int p, double *dst, long long ld, long long row0)
{
    transpose_block(src, rows, p, dst, ld, row0);
}

extern "C" __global__ void __launch_bounds__(TILE * TILE_ROWS)
transpose_scaled_f64(const double *src, int rows, int p, double *dst, long long ld,
                     long long row0, const double *scale)
{
    transpose_block(src, rows, p, dst, ld, row0, scale);
}

extern "C" __global__ void __launch_bounds__(TILE * TILE_ROWS)
transpose_scaled_f32(const float *src, int rows, int p, double *dst, long long ld,
                     long long row0, const double *scale)
{
    transpose_block(src, rows, p, dst, ld, row0, scale);
}

// Fortran-ordered data (one variable's samples contiguous, as a pandas
// frame's values are) need no transpose: the host sends blocks of whole
// variables, and dst[(c0 + c) * ld + r] = src[c * n + r] for the block's
// `cols` variables (c = blockIdx.y), scaled by scale[c0 + c] when `scale`
// is given, rounded as transpose_block rounds. Reads and writes are both
// coalesced along the samples.
template <typename T>
__device__ __forceinline__ void variables_block(const T *__restrict__ src, long long n,
                                                double *__restrict__ dst, long long ld, int c0,
                                                const double *__restrict__ scale)
{
    const int c = blockIdx.y;
    const double f = scale ? scale[c0 + c] : 1.0;
    const T *in = src + (size_t)c * n;
    double *out = dst + (size_t)(c0 + c) * ld;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n;
         r += (long long)gridDim.x * blockDim.x) {
        const double v = (double)in[r];
        out[r] = scale ? __dmul_rn(v, f) : v;
    }
}

extern "C" __global__ void variables_f64(const double *src, long long n, double *dst,
                                        long long ld, int c0, const double *scale)
{
    variables_block(src, n, dst, ld, c0, scale);
}

extern "C" __global__ void variables_f32(const float *src, long long n, double *dst,
                                        long long ld, int c0, const double *scale)
{
    variables_block(src, n, dst, ld, c0, scale);
}

// Each variable's mean, sum of squares and sum of squared deviations over the
// first n samples of its row of X64 (row stride ld): out[j], out[p + j] and
// out[2 p + j]. These are the host's sums of the rounding noise
// (paralingam/_column_sums.pyx, noise_sums) with their bits: X64 holds the
// values those loops read, and they are added sample after sample, every
// product and sum rounded on its own (no fused multiply-add), in the host's
// order. The chain of additions is serial: one block per variable stages its
// row in shared memory by chunks (coalesced loads), and one thread adds each
// chunk while the loads of the next wait at the barrier. (One thread per
// variable reading its own row stalled on every load.)
#define SUMS_THREADS 128
#define SUMS_CHUNK 2048

extern "C" __global__ void __launch_bounds__(SUMS_THREADS)
column_sums(const double *__restrict__ x, long long ld, int n, int p, double *__restrict__ out)
{
    __shared__ double chunk[SUMS_CHUNK];
    const int j = blockIdx.x;
    const double *row = x + (size_t)j * ld;
    double sum = 0.0, mean = 0.0, sq = 0.0, dev = 0.0;
    for (int pass = 0; pass < 2; ++pass) {
        for (int i0 = 0; i0 < n; i0 += SUMS_CHUNK) {
            const int len = min(SUMS_CHUNK, n - i0);
            __syncthreads();  // the previous chunk has been added
            for (int k = threadIdx.x; k < len; k += SUMS_THREADS) chunk[k] = row[i0 + k];
            __syncthreads();
            if (threadIdx.x != 0) continue;
            if (pass == 0) {
#pragma unroll 8
                for (int k = 0; k < len; ++k) sum = __dadd_rn(sum, chunk[k]);
            } else {
#pragma unroll 8
                for (int k = 0; k < len; ++k) {
                    const double v = chunk[k];
                    sq = __dadd_rn(sq, __dmul_rn(v, v));
                    const double d = __dsub_rn(v, mean);
                    dev = __dadd_rn(dev, __dmul_rn(d, d));
                }
            }
        }
        mean = __ddiv_rn(sum, (double)n);  // (thread 0's is the one used)
    }
    if (threadIdx.x == 0) {
        out[j] = mean;
        out[p + j] = sq;
        out[2 * p + j] = dev;
    }
}
