// The data's way onto the GPU (paralingam/search/_cuda.py, upload), compiled at run
// time by PyCUDA like the search's kernels.
//
// The user's array is row-major (one sample per row) and the search keeps one
// variable per row (X64, row stride ld samples). The host copies blocks of
// whole sample rows to the device unchanged, and these kernels transpose each
// block into X64, converting float to double on the way (exact). A transpose
// on the host reads one array against its order and cost far more than the
// copy over the bus.

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
