// Synchronization and bulk-copy primitives of both passes: named barriers
// between warp roles (each pass numbers its own), the non-tensor bulk copy /
// reduce-add engine, and the acquire/release counters that order cross-CTA
// reductions. The barriers clobber memory: shared-memory accesses must not
// move across them (CUTLASS's NamedBarrier asm does not say so).
#pragma once

#include <cstdint>

#include <cute/arch/util.hpp>

namespace dash_attn::sm90 {

__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Global -> shared bulk copy completing on an mbarrier (transaction bytes).
// bytes and both addresses must be multiples of 16.
__device__ __forceinline__ void bulk_copy_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* mbarrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          cute::cast_smem_ptr_to_uint(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(cute::cast_smem_ptr_to_uint(mbarrier))
      : "memory");
}

// gmem[i] = smem[i] for a contiguous span (16-byte aligned, a multiple of
// 16 bytes), by the bulk engine: the first contribution of an ordered sum.
__device__ __forceinline__ void bulk_store(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(cute::cast_smem_ptr_to_uint(smem_src)), "r"(bytes)
               : "memory");
}

// gmem[i] += smem[i] (fp32) for a contiguous span, performed by the bulk
// engine in L2; each element is added atomically.
__device__ __forceinline__ void bulk_reduce_add_f32(float* gmem_dst, const float* smem_src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(cute::cast_smem_ptr_to_uint(smem_src)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// The source shared memory of every committed bulk operation may be reused.
__device__ __forceinline__ void bulk_wait_all_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

// Every committed bulk operation has completed, its writes performed in
// global memory: the condition for releasing a reduction counter.
__device__ __forceinline__ void bulk_wait_all_complete() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Orders generic-proxy global accesses against async-proxy (bulk engine) ones.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

// Shared memory written by ordinary stores, about to be read by wgmma or the bulk engine.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

__device__ __forceinline__ int load_acquire(const int* counter) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(value) : "l"(counter) : "memory");
  return value;
}

// Spins until *counter == rank. Called by one thread; its acquire orders
// everything the thread (and, through a following barrier, its CTA) does next
// after the releases that brought the counter to rank.
__device__ __forceinline__ void wait_for_rank(const int* counter, int rank) {
  while (load_acquire(counter) != rank) __nanosleep(32);
}

// Publishes this CTA's completed contribution: everything before (in causality
// order) becomes visible to the thread that acquires the incremented value.
__device__ __forceinline__ void release_increment(int* counter) {
  asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.s32 [%0], 1;" ::"l"(counter) : "memory");
}

}  // namespace dash_attn::sm90
