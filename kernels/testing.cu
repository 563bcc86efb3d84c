// Test hooks of the CUDA search: never part of the product's kernels.
//
// paralingam._testing compiles kernels/paralingam.cu (its headers inlined)
// with this file appended and the round kernels renamed on the command line
// (-Dworker_f32=pl_product_worker_f32 and so on, see PL_TESTING_RENAMED in
// paralingam/_testing.py). The names the scheduler loads then resolve to the
// kernels below, which fault: a search run with that module meets a sticky
// kernel fault in its first threshold round, and the scheduler finds it
// while it waits for the round's status, as it would a real one.
#undef worker_f32
#undef worker_f64
#undef all_pairs_f32
#undef all_pairs_f64

// Wait until the host has queued the round's update kernels and is waiting
// for the status (milliseconds, where it needs microseconds), then write to
// an illegal address (the magic number): CUDA keeps the error for the rest
// of the process.
__device__ void pl_testing_fault(PlSearch *s)
{
    pl_enter();
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < 20000000ull);  // 20 ms
    *(volatile int *)(s->magic) = 1;
}

extern "C" __global__ void worker_f32(PlSearch *s) { pl_testing_fault(s); }
extern "C" __global__ void worker_f64(PlSearch *s) { pl_testing_fault(s); }
extern "C" __global__ void all_pairs_f32(PlSearch *s) { pl_testing_fault(s); }
extern "C" __global__ void all_pairs_f64(PlSearch *s) { pl_testing_fault(s); }
