# ruff: noqa: E501  (kernel names are data, copied whole from the libraries' sources)
"""Synthetic traces made of kernel names copied from the libraries' sources (tests of the rules).

`LIBRARY_KERNELS`: (kernel name as a profiler shows it, role, MoE stage, comm family) per
library family, each name taken from the source file cited beside it (not from a trace).
`library_trace()` lays them on one rank: the comm kernels one after another on a comm stream,
the compute kernels on a compute stream, offset so that part of every comm kernel is hidden.
Times are ns.
"""

from __future__ import annotations

import polars as pl

from moetrace.trace.model import Trace

LIBRARY_KERNELS: tuple[tuple[str, str, str, str | None], ...] = (
    # NVIDIA/nccl src/device/generate.py
    (
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "comm",
        "comm",
        "nccl",
    ),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "comm", "comm", "nccl"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "comm", "comm", "nccl"),
    # NVIDIA/nccl src/device/symmetric/generate.py (kernel_cname)
    (
        "ncclSymkDevKernel_AllReduce_RSxLDMC_AGxSTMC_sum_bf16(ncclSymkDevWorkArgs4K)",
        "comm",
        "comm",
        "nccl",
    ),
    # ROCm/rccl (generic kernel)
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "comm", "comm", "nccl"),
    # deepseek-ai/DeepEP csrc/kernels/intranode.cu, internode.cu, internode_ll.cu, layout.cu
    (
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)",
        "comm",
        "dispatch",
        "deepep",
    ),
    (
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int const*)",
        "comm",
        "dispatch",
        "deepep",
    ),
    (
        "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int)",
        "comm",
        "combine",
        "deepep",
    ),
    (
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)",
        "comm",
        "combine",
        "deepep",
    ),
    # the same kernels under a fork's outer namespace
    (
        "void primus_turbo::deep_ep::internode::dispatch<true, 4, 8>(int4*, float*)",
        "comm",
        "dispatch",
        "deepep",
    ),
    ("void dualpipe_ep::internode::combine<true, 4>(int4*, float*)", "comm", "combine", "deepep"),
    (
        "void deep_ep::internode::cached_notify<false, 8192>(int, int, int, int, int*, int)",
        "comm",
        "comm",
        "deepep",
    ),  # template <bool kLowLatencyMode, int kNumTMABytesPerWarp> in internode.cu
    (
        "void deep_ep::internode_ll::dispatch<false, 3, 10, 7168>(void*, float*)",
        "comm",
        "dispatch",
        "deepep",
    ),
    (
        "void deep_ep::internode_ll::combine<3, 10, 7168, 9>(void*, void*)",
        "comm",
        "combine",
        "deepep",
    ),
    (
        "void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int, int*, int)",
        "comm",
        "comm",
        "deepep",
    ),
    ("_ZN7deep_ep9internode8dispatchILb1ELi4ELi8EEEvP4int4", "comm", "dispatch", "deepep"),
    # deepseek-ai/DeepEP V2 csrc/kernels/ep/dispatch.hpp, combine.hpp (JIT; names from the
    # __instantiate_kernel strings, template values of one instance)
    (
        "void deep_ep::ep::dispatch_impl<true, false, false, 132, 4, 28, 8, 14336, 56, 4096, 256, 8, 128, 12, 100000000000l>(void*, void*)",
        "comm",
        "dispatch",
        "deepep",
    ),
    (
        "void deep_ep::ep::combine_impl<true, false, false, 132, 4, 28, 8, 14336, 4096, 8, 12, 100000000000l>(void*, void*)",
        "comm",
        "combine",
        "deepep",
    ),
    (
        "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*)",
        "compute",
        "topk_permute",
        None,
    ),
    # Ascend: HCCL tasks (torch_npu ProcessGroupHCCL) and MC2 ops (cann-ops-adv src/mc2)
    ("hcom_allReduce__123_1_1", "comm", "comm", "hccl"),
    ("hcom_alltoallv__456_2_1", "comm", "dispatch", "hccl"),
    ("MoeDistributeDispatchV2", "comm", "dispatch", "hccl_mc2"),
    ("MoeDistributeCombineV2", "comm", "combine", "hccl_mc2"),
    ("MatmulAllReduce", "comm", "comm", "hccl_mc2"),
    ("AllGatherMatmul", "comm", "comm", "hccl_mc2"),
    ("MatmulReduceScatter", "comm", "comm", "hccl_mc2"),
    ("GroupedMatmul", "compute", "expert_gemm", None),
    ("MoeInitRoutingV2", "compute", "topk_permute", None),
    ("MoeFinalizeRouting", "compute", "topk_permute", None),
    ("MoeGatingTopK", "compute", "router", None),
    # perplexityai/pplx-kernels csrc/all_to_all/intranode_dispatch.cu, intranode_combine.cu
    # (anonymous namespace in intranode_*.cu, global scope in internode_*.cu; not namespace pplx)
    (
        "void (anonymous namespace)::dispatchKernel<16u, true, true>(int*, unsigned long, std::byte*)",
        "comm",
        "dispatch",
        "pplx",
    ),
    (
        "void combineKernel<__nv_bfloat16, __nv_bfloat16, 16ul, true, true>(__nv_bfloat16*, unsigned long)",
        "comm",
        "combine",
        "pplx",
    ),
    # ROCm/mori src/ops/dispatch_combine
    (
        "void mori::moe::EpDispatchIntraNodeKernel<hip_bfloat16>(mori::moe::EpDispatchCombineArgs<hip_bfloat16>)",
        "comm",
        "dispatch",
        "mori",
    ),
    (
        "void mori::moe::EpCombineIntraNodeKernel<hip_bfloat16>(mori::moe::EpDispatchCombineArgs<hip_bfloat16>)",
        "comm",
        "combine",
        "mori",
    ),
    # NVIDIA nvshmem: __global__ nvshmemi_proxy_rma_entrypoint<nvshmemi_op_t desc, int is_nbi>
    # (on-stream RMA entry kernel; nvshmemi_transfer_rma_nbi is a __device__ function, not a kernel)
    (
        "void nvshmemi_proxy_rma_entrypoint<(nvshmemi_op_t)0, 1>(void*, void*, rma_bytesdesc_t, int)",
        "comm",
        "comm",
        "nvshmem",
    ),
    # microsoft/mscclpp apps/nccl/src/allreduce.hpp
    (
        "void allreduce8<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, mscclpp::DeviceHandle<mscclpp::SmChannel>*, mscclpp::DeviceHandle<mscclpp::SmChannel>*, unsigned long, unsigned long, int, int, int, unsigned long)",
        "comm",
        "comm",
        "mscclpp",
    ),
    # vllm-project/vllm csrc/custom_all_reduce.cuh
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
        "comm",
        "comm",
        "custom_allreduce",
    ),
    # NVIDIA/TensorRT-LLM customAllReduceKernels.cu, allReduceFusionKernels.cu
    (
        "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8, true, false>(tensorrt_llm::kernels::AllReduceParams)",
        "comm",
        "comm",
        "custom_allreduce",
    ),
    # pytorch/pytorch c10d/symm_mem/CUDASymmetricMemoryOps.cu
    (
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
        "comm",
        "comm",
        "symm_mem",
    ),
    # NVIDIA/TensorRT-LLM trtllmGenKernels/blockScaleMoe (moe::dev) and batched GEMM cubins
    (
        "void moe::dev::routing::routingDeepSeek::routingMainKernel<KernelParams<float, __nv_bfloat16, true, false> >(KernelParams<float, __nv_bfloat16, true, false>)",
        "compute",
        "router",
        None,
    ),
    (
        "void moe::dev::activation::activationKernel<KernelParams>(KernelParams)",
        "compute",
        "activation",
        None,
    ),
    (
        "void moe::dev::finalize::finalizeKernel<KernelParams>(KernelParams)",
        "compute",
        "topk_permute",
        None,
    ),
    (
        "bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s6_et64x8_m64x8x32_cga1x1x1_16dp256b_TN_transOut_schedS_sm100a",
        "compute",
        "expert_gemm",
        None,
    ),
    # NVIDIA/TensorRT-LLM cutlass_kernels/moe_gemm/moe_kernels.cu (also in FlashInfer)
    (
        "void tensorrt_llm::kernels::cutlass_kernels::expandInputRowsKernel<__nv_bfloat16>(int)",
        "compute",
        "topk_permute",
        None,
    ),
    (
        "void tensorrt_llm::kernels::cutlass_kernels::doActivationKernel<__nv_bfloat16>(int)",
        "compute",
        "activation",
        None,
    ),
    # deepseek-ai/DeepGEMM impls/sm90_fp8_gemm_1d2d.cuh, sm100_fp8_gemm_1d1d.cuh (GemmType from common/types.cuh)
    (
        "void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 4096u, 7168u, 32u, (deep_gemm::GemmType)1>(float*)",
        "compute",
        "expert_gemm",
        None,
    ),
    (
        "void deep_gemm::sm100_fp8_gemm_1d1d_impl<0u, 4096u, 7168u, 128u, 256u, (deep_gemm::GemmType)5, false, __nv_bfloat16>(int*, unsigned int, unsigned int, unsigned int)",
        "compute",
        "expert_gemm",
        None,
    ),
    # vllm-project/vllm fused_moe (Triton), csrc/moe/moe_align_sum_kernels.cu, topk_softmax_kernels.cu
    ("fused_moe_kernel", "compute", "expert_gemm", None),
    (
        "void vllm::moe::moe_align_block_size_kernel<int>(int*, int*)",
        "compute",
        "topk_permute",
        None,
    ),
    (
        "void vllm::moe::topkGatingSoftmax<4, 128, 4, 16, 32, int>(float const*)",
        "compute",
        "router",
        None,
    ),
    (
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, c10::BFloat16 const*, int)",
        "compute",
        "activation",
        None,
    ),
    # ROCm/aiter fmoe asm kernels, csrc/kernels/moe_sorting_kernels.cu
    # (ROCm/aiter hsa/gfx942/fmoe/silu/fmoe_bf16_blockscaleFp8_g1u1_vs_silu_1tg_32x128.co: the code object stem)
    ("fmoe_bf16_blockscaleFp8_g1u1_vs_silu_1tg_32x128", "compute", "expert_gemm", None),
    (
        "void ck_tile::kentry<1, ck_tile::MoeSortingKernel<ck_tile::MoeSortingProblem<int> > >(ck_tile::MoeSortingKernel::Kargs)",
        "compute",
        "topk_permute",
        None,
    ),
)
"""(name, role, stage, comm family) per library kernel; the comment above each group cites the
source of its names."""

COMM_NS = 1_000
COMPUTE_NS = 600
"""Duration of every synthetic comm kernel and of the compute kernel beside it (ns)."""


def library_trace() -> Trace:
    """One rank: every comm kernel of LIBRARY_KERNELS in turn on stream 1 (COMM_NS each, a
    gap of 200 ns between), every compute kernel on stream 0, each starting 300 ns into the
    comm kernel of the same position (so 600 of its 1000 ns overlap when one exists)."""
    comm = [k for k in LIBRARY_KERNELS if k[1] == "comm"]
    compute = [k for k in LIBRARY_KERNELS if k[1] != "comm"]
    rows: dict[str, list[object]] = {k: [] for k in ("id", "track", "name", "kind", "ts", "dur")}
    for i, (name, *_rest) in enumerate(comm):
        rows["id"].append(len(rows["id"]))
        rows["track"].append(1)
        rows["name"].append(name)
        rows["kind"].append("compute")  # what a reader that knows no names says
        rows["ts"].append(i * (COMM_NS + 200))
        rows["dur"].append(COMM_NS)
    for i, (name, *_rest) in enumerate(compute):
        rows["id"].append(len(rows["id"]))
        rows["track"].append(0)
        rows["name"].append(name)
        rows["kind"].append("compute")
        rows["ts"].append(i * (COMM_NS + 200) + 300)
        rows["dur"].append(COMPUTE_NS)
    tracks = pl.DataFrame(
        {"track": [0, 1], "rank": [0, 0], "pid": ["0", "0"], "tid": ["7", "8"],
         "unit": ["stream", "stream"]}
    )  # fmt: skip
    return Trace.from_frames(pl.DataFrame(rows), tracks, compute_depth=True)
