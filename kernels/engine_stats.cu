// Diagnostic sums of the search's threshold-round engines: never part of the
// product's kernels. The diagnostic build (benchmarks/bench_multi_gpu.py
// --mode engine-stats) prepends this file to kernels/paralingam.cu, whose
// worker kernels call the macros below (without this file they are empty).
//
// Each device sums what its engines did in its own module's memory (no link
// traffic in a search over several devices), read by the host through the
// module's global pl_engine_stats (paralingam._testing.module_global):
// [0] pairs compared, [1] clock cycles finding and claiming work that was
// found (on one device also finalizing the workers an engine finished,
// which several devices leave to select_root), [2] comparing, [3] recording
// the result, [4] engines that left, [5] their cycles from the engine's
// start (after the kernel's first reads of the round's state) to leaving,
// [6] pairs of all-pairs rounds, [7] cycles of the last search for work,
// which found none, [8] nanoseconds (%globaltimer) from the first block's
// start to the last block's end of each threshold-round worker launch,
// summed, [9] those launches.
#define PL_ENGINE_STATS 1

__device__ unsigned long long pl_engine_stats[10];
__device__ unsigned long long pl_launch_first = ~0ull, pl_launch_last = 0;
__device__ unsigned pl_launch_blocks = 0;

__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// A worker launch's span (thread 0 of each block; the last block to end
// adds it to [8] and resets for the next launch, which the stream orders
// after this one).
__device__ void launch_begin() { if (threadIdx.x == 0) atomicMin(&pl_launch_first, global_ns()); }
__device__ void launch_end()
{
    __syncthreads();  // every engine of the block has left
    if (threadIdx.x != 0) return;
    atomicMax(&pl_launch_last, global_ns());
    __threadfence();
    if (atomicAdd(&pl_launch_blocks, 1u) + 1 == gridDim.x) {
        __threadfence();
        const unsigned long long first = atomicExch(&pl_launch_first, ~0ull);
        const unsigned long long last = atomicExch(&pl_launch_last, 0ull);
        atomicAdd(&pl_engine_stats[8], last - first);
        atomicAdd(&pl_engine_stats[9], 1ull);
        atomicExch(&pl_launch_blocks, 0u);
    }
}

struct EngineClock {
    long long t, begin, last, part[3];
    __device__ EngineClock() : t(clock64()), begin(t), last(0), part{0, 0, 0} {}
    __device__ void lap(int k)
    {
        const long long now = clock64();
        last = now - t;
        part[k] += last;
        t = now;
    }
    __device__ void leave(unsigned long long pairs)  // after lap(0) found no work
    {
        part[0] -= last;
        atomicAdd(&pl_engine_stats[0], pairs);
        for (int k = 0; k < 3; ++k) atomicAdd(&pl_engine_stats[1 + k], (unsigned long long)part[k]);
        atomicAdd(&pl_engine_stats[4], 1ull);
        atomicAdd(&pl_engine_stats[5], (unsigned long long)(clock64() - begin));
        atomicAdd(&pl_engine_stats[7], (unsigned long long)last);
    }
};
#define PL_ENGINE_CLOCK EngineClock engine_clock
#define PL_LAP(k) engine_clock.lap(k)
#define PL_ENGINE_LEAVE(pairs) engine_clock.leave(pairs)
#define PL_ALL_PAIRS_STAT(pairs) atomicAdd(&pl_engine_stats[6], (unsigned long long)(pairs))
#define PL_LAUNCH_BEGIN() launch_begin()
#define PL_LAUNCH_END() launch_end()
