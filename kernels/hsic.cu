// Kernels of the HSIC p-values (paralingam/lingam/hsic.py, _sums_cuda), double precision.
//
//   hsic_row_sums    row sums of each variable's Gaussian-kernel Gram matrix
//   hsic_pair_sums   for each pair (i, j) of variables, over the strict upper
//                    triangle b > a of the centred Gram matrices:
//                        sum Kc_i[a, b] Kc_j[a, b]   and   sum (Kc_i[a, b] Kc_j[a, b])^2
//
// No Gram matrix is stored: every kernel value is recomputed where it is used,
// K[a, b] = exp(-(z[a] - z[b])^2) with z = x / (sqrt(2) width) scaled on the
// host. The centring is lingam's Kc = K - (u[a] + u[b]) + c, with u = row
// sums / n and c = (sum of all entries) / n^2, evaluated in that order, as the
// CPU path evaluates it. The host adds the diagonal and counts each sum twice
// (Kc is symmetric).
//
// Layout: z and u are (q, n), row-major, one variable per row; c is (q,).
// Each block handles one row a (blockIdx.x, offset by row0) and one variable
// (row sums) or one pair (pair sums, blockIdx.y); its threads stride over the
// columns and reduce in shared memory in a fixed order, and each block writes
// its own partial sum (no atomics): results do not depend on scheduling.
// Everything is double: p-values must agree with lingam's to 1e-8.

#define TPB 256

// Tree reduction of one double per thread; the result in s[0].
__device__ __forceinline__ void block_reduce(double* s)
{
    __syncthreads();
#pragma unroll
    for (int w = TPB / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
}

// grid (rows, q): rowsum[i * n + row0 + blockIdx.x] = sum_b K_i[a, b].
extern "C" __global__ void __launch_bounds__(TPB)
hsic_row_sums(const double* __restrict__ z, int n, int row0, double* __restrict__ rowsum)
{
    __shared__ double s[TPB];
    const int a = row0 + blockIdx.x;
    const int i = blockIdx.y;
    if (a >= n) return;  // uniform over the block
    const double* zi = z + (size_t)i * n;
    const double za = zi[a];
    double acc = 0.0;
    for (int b = threadIdx.x; b < n; b += TPB) {
        const double d = za - zi[b];
        acc += exp(-(d * d));
    }
    s[threadIdx.x] = acc;
    block_reduce(s);
    if (threadIdx.x == 0) rowsum[(size_t)i * n + a] = s[0];
}

// grid (rows, pairs): for pair k = (pair_i[k], pair_j[k]) and row a = row0 + blockIdx.x,
// out1[k * rows + blockIdx.x] = sum_{b > a} Kc_i[a, b] Kc_j[a, b],
// out2[k * rows + blockIdx.x] = sum_{b > a} (Kc_i[a, b] Kc_j[a, b])^2.
extern "C" __global__ void __launch_bounds__(TPB)
hsic_pair_sums(const double* __restrict__ z, const double* __restrict__ u,
               const double* __restrict__ c, int n, const int* __restrict__ pair_i,
               const int* __restrict__ pair_j, int row0, int rows,
               double* __restrict__ out1, double* __restrict__ out2)
{
    __shared__ double s[TPB];
    const int a = row0 + blockIdx.x;
    const int k = blockIdx.y;
    if (a >= n) return;  // uniform over the block
    const int i = pair_i[k];
    const int j = pair_j[k];
    const double* zi = z + (size_t)i * n;
    const double* zj = z + (size_t)j * n;
    const double* ui = u + (size_t)i * n;
    const double* uj = u + (size_t)j * n;
    const double zia = zi[a], zja = zj[a], uia = ui[a], uja = uj[a];
    const double ci = c[i], cj = c[j];
    double acc1 = 0.0, acc2 = 0.0;
    for (int b = a + 1 + threadIdx.x; b < n; b += TPB) {
        const double di = zia - zi[b];
        const double dj = zja - zj[b];
        const double ki = (exp(-(di * di)) - (uia + ui[b])) + ci;
        const double kj = (exp(-(dj * dj)) - (uja + uj[b])) + cj;
        const double t = ki * kj;
        acc1 += t;
        acc2 += t * t;
    }
    const size_t slot = (size_t)k * rows + blockIdx.x;
    s[threadIdx.x] = acc1;
    block_reduce(s);
    if (threadIdx.x == 0) out1[slot] = s[0];
    __syncthreads();  // s is reused: thread 0 has read s[0]
    s[threadIdx.x] = acc2;
    block_reduce(s);
    if (threadIdx.x == 0) out2[slot] = s[0];
}
