"""Properties where cuda.core 1.2 has properties: every public cucore class
that cuda.core also has is walked against the way cuda.core declares each
name — a property (a data descriptor), a classmethod/staticmethod (callable
on the class, no instance), a plain method, or a dataclass/namedtuple field —
and a method where a property should be (or the other way round) fails. The
values read through the properties that need a GPU (Kernel.attributes per
device, the memory pools' attributes, occupancy) are checked on the GPU to be
plain int/bool. The names cucore lacks are listed, not failed."""
import dataclasses
import inspect

import pytest

import cucore
import cucore._core
import cucore._layout
import cucore._memory_views
import cucore._options
import cucore._resources
import cucore._tensor_map
from cucore import DeviceMemoryResource, DeviceMemoryResourceOptions, Linker

from conftest import require_gpu

# How cuda.core 1.2 declares each public name of the classes cucore mirrors:
# read from NVIDIA's cuda-core 1.2.2 wheel (its .pyi type stubs, and its classes
# introspected: a Cython @property is a getset_descriptor, a cdef dataclass
# field a member descriptor) and found the same in 1.2.0. Keys are where the
# class lives in cuda.core ("graph.", "system.", "texture.", "utils.",
# "checkpoint." for the submodules); names starting with "_" and dunders are
# left out (test_conformance_protocols.py checks the protocols). "fields" are
# dataclass / namedtuple fields, read on an instance either way. An empty
# entry is a class with no such names (listed so that a class cucore lacks is
# reported).
CUDA_CORE = {
    "_MemPoolAttributes": {
        "properties": (
            "release_threshold reserved_mem_current reserved_mem_high reuse_allow_internal_dependencies "
            "reuse_allow_opportunistic reuse_follow_event_dependencies used_mem_current used_mem_high"
        ),
    },
    "_StridedLayout": {
        "properties": (
            "is_contiguous_any is_contiguous_c is_contiguous_f is_dense is_unique itemsize max_offset min_offset ndim "
            "offset_bounds shape slice_offset slice_offset_in_bytes stride_order strides strides_in_bytes volume"
        ),
        "classmethods": "dense dense_like",
        "methods": (
            "broadcast_to flattened flattened_axis_mask max_compatible_itemsize permuted repacked "
            "required_size_in_bytes reshaped sliced squeezed to_dense unsqueezed"
        ),
    },
    "AccessedBySetProxy": {"methods": "add discard"},
    "Buffer": {
        "properties": (
            "device_id handle ipc_descriptor is_closed is_device_accessible is_host_accessible is_managed is_mapped "
            "memory_resource owner size"
        ),
        "classmethods": "from_ipc_descriptor",
        "staticmethods": "from_handle",
        "methods": "close copy_from copy_to fill set_deallocation_stream",
    },
    "ComputeCapability": {"fields": "major minor"},
    "Context": {"properties": "handle is_closed is_green resources", "methods": "close create_stream"},
    "ContextOptions": {"fields": "resources"},
    "Device": {
        "properties": (
            "arch compute_capability context default_stream device_id memory_resource name pci_bus_id properties "
            "resources uuid"
        ),
        "classmethods": "get_all_devices",
        "methods": (
            "allocate can_access_peer create_context create_event create_graph_builder create_mipmapped_array "
            "create_opaque_array create_stream create_surface_object create_texture_object set_current sync "
            "to_system_device"
        ),
    },
    "DeviceMemoryResource": {
        "properties": (
            "allocation_handle attributes device_id handle is_closed is_device_accessible is_handle_owned "
            "is_host_accessible is_ipc_enabled is_managed is_mapped peer_accessible_by uuid"
        ),
        "classmethods": "from_allocation_handle",
        "staticmethods": "from_registry",
        "methods": "allocate close deallocate register",
    },
    "DeviceMemoryResourceOptions": {"fields": "ipc_enabled max_size"},
    "DeviceProperties": {
        "properties": (
            "async_engine_count can_flush_remote_writes can_map_host_memory can_tex2d_gather "
            "can_use_64_bit_stream_mem_ops can_use_host_pointer_for_registered_mem can_use_stream_wait_value_nor "
            "clock_rate cluster_launch compute_capability_major compute_capability_minor compute_mode "
            "compute_preemption_supported concurrent_kernels concurrent_managed_access cooperative_launch "
            "d3d12_cig_supported deferred_mapping_cuda_array_supported direct_managed_mem_access_from_host "
            "dma_buf_supported ecc_enabled generic_compression_supported global_l1_cache_supported "
            "global_memory_bus_width gpu_direct_rdma_flush_writes_options gpu_direct_rdma_supported "
            "gpu_direct_rdma_with_cuda_vmm_supported gpu_direct_rdma_writes_ordering gpu_overlap gpu_pci_device_id "
            "gpu_pci_subsystem_id handle_type_fabric_supported handle_type_posix_file_descriptor_supported "
            "handle_type_win32_handle_supported handle_type_win32_kmt_handle_supported host_alloc_dma_buf_supported "
            "host_memory_pools_supported host_native_atomic_supported host_numa_id host_numa_memory_pools_supported "
            "host_numa_multinode_ipc_supported host_numa_virtual_memory_management_supported host_register_supported "
            "host_virtual_memory_management_supported integrated ipc_event_supported kernel_exec_timeout l2_cache_size "
            "local_l1_cache_supported managed_memory max_access_policy_window_size max_block_dim_x max_block_dim_y "
            "max_block_dim_z max_blocks_per_multiprocessor max_grid_dim_x max_grid_dim_y max_grid_dim_z "
            "max_persisting_l2_cache_size max_pitch max_registers_per_block max_registers_per_multiprocessor "
            "max_shared_memory_per_block max_shared_memory_per_block_optin max_shared_memory_per_multiprocessor "
            "max_threads_per_block max_threads_per_multiprocessor maximum_surface1d_layered_layers "
            "maximum_surface1d_layered_width maximum_surface1d_width maximum_surface2d_height "
            "maximum_surface2d_layered_height maximum_surface2d_layered_layers maximum_surface2d_layered_width "
            "maximum_surface2d_width maximum_surface3d_depth maximum_surface3d_height maximum_surface3d_width "
            "maximum_surfacecubemap_layered_layers maximum_surfacecubemap_layered_width maximum_surfacecubemap_width "
            "maximum_texture1d_layered_layers maximum_texture1d_layered_width maximum_texture1d_linear_width "
            "maximum_texture1d_mipmapped_width maximum_texture1d_width maximum_texture2d_gather_height "
            "maximum_texture2d_gather_width maximum_texture2d_height maximum_texture2d_layered_height "
            "maximum_texture2d_layered_layers maximum_texture2d_layered_width maximum_texture2d_linear_height "
            "maximum_texture2d_linear_pitch maximum_texture2d_linear_width maximum_texture2d_mipmapped_height "
            "maximum_texture2d_mipmapped_width maximum_texture2d_width maximum_texture3d_depth "
            "maximum_texture3d_depth_alternate maximum_texture3d_height maximum_texture3d_height_alternate "
            "maximum_texture3d_width maximum_texture3d_width_alternate maximum_texturecubemap_layered_layers "
            "maximum_texturecubemap_layered_width maximum_texturecubemap_width mem_decompress_algorithm_mask "
            "mem_decompress_maximum_length mem_sync_domain_count memory_clock_rate memory_pools_supported "
            "mempool_supported_handle_types mps_enabled multi_gpu_board multi_gpu_board_group_id multicast_supported "
            "multiprocessor_count numa_config numa_id only_partial_host_native_atomic_supported pageable_memory_access "
            "pageable_memory_access_uses_host_page_tables pci_bus_id pci_device_id pci_domain_id "
            "read_only_host_register_supported reserved_shared_memory_per_block single_to_double_precision_perf_ratio "
            "sparse_cuda_array_supported stream_priorities_supported surface_alignment tcc_driver "
            "tensor_map_access_supported texture_alignment texture_pitch_alignment "
            "timeline_semaphore_interop_supported total_constant_memory unified_addressing unified_function_pointers "
            "virtual_memory_management_supported vulkan_cig_supported warp_size"
        ),
    },
    "DeviceResources": {"properties": "sm workqueue"},
    "Event": {
        "properties": (
            "context device handle ipc_descriptor is_blocking_sync is_closed is_done is_ipc_enabled is_timing_enabled"
        ),
        "classmethods": "from_ipc_descriptor",
        "methods": "close sync",
    },
    "EventOptions": {"fields": "blocking_sync ipc_enabled timing_enabled"},
    "GraphicsResource": {
        "properties": "handle is_closed is_mapped resource_handle",
        "classmethods": "from_gl_buffer from_gl_image",
        "methods": "close map unmap",
    },
    "GraphMemoryResource": {
        "properties": "attributes device_id is_device_accessible is_host_accessible is_managed",
        "methods": "allocate close deallocate trim",
    },
    "GraphMemoryResourceAttributes": {
        "properties": "reserved_mem_current reserved_mem_high used_mem_current used_mem_high",
    },
    "Host": {"properties": "is_numa_current numa_id", "classmethods": "numa_current"},
    "IPCAllocationHandle": {"properties": "handle is_closed uuid", "methods": "close"},
    "IPCBufferDescriptor": {"properties": "size"},
    "IPCEventDescriptor": {},
    "Kernel": {
        "properties": "arguments_info attributes handle num_arguments occupancy",
        "staticmethods": "from_handle",
    },
    "KernelAttributes": {
        "properties": (
            "binary_version cache_mode_ca cluster_scheduling_policy_preference cluster_size_must_be_set "
            "const_size_bytes local_size_bytes max_dynamic_shared_size_bytes max_threads_per_block "
            "non_portable_cluster_size_allowed num_regs preferred_shared_memory_carveout ptx_version "
            "required_cluster_depth required_cluster_height required_cluster_width shared_size_bytes"
        ),
    },
    "KernelOccupancy": {
        "methods": (
            "available_dynamic_shared_memory_per_block max_active_blocks_per_multiprocessor max_active_clusters "
            "max_potential_block_size max_potential_cluster_size"
        ),
    },
    "LaunchConfig": {"properties": "block cluster grid is_cooperative programmatic_stream_serialization shmem_size"},
    "LegacyPinnedMemoryResource": {
        "properties": "device_id is_device_accessible is_host_accessible is_managed",
        "methods": "allocate deallocate",
    },
    "Linker": {
        "properties": "handle is_closed",
        "classmethods": "which_backend",
        "methods": "close get_error_log get_info_log link",
    },
    "LinkerOptions": {
        "methods": "as_bytes",
        "fields": (
            "arch debug fma ftz kernels_used lineinfo link_time_optimization max_register_count name no_cache "
            "numba_debug optimization_level optimize_unused_variables prec_div prec_sqrt ptx ptxas_options "
            "split_compile split_compile_extended time variables_used verbose"
        ),
    },
    "ManagedBuffer": {
        "properties": (
            "accessed_by device_id handle ipc_descriptor is_closed is_device_accessible is_host_accessible is_managed "
            "is_mapped memory_resource owner preferred_location read_mostly size"
        ),
        "classmethods": "from_handle from_ipc_descriptor",
        "methods": "close copy_from copy_to discard discard_prefetch fill prefetch set_deallocation_stream",
    },
    "ManagedMemoryResource": {
        "properties": (
            "attributes device_id handle is_closed is_device_accessible is_handle_owned is_host_accessible "
            "is_ipc_enabled is_managed is_mapped preferred_location uuid"
        ),
        "methods": "allocate close deallocate",
    },
    "ManagedMemoryResourceOptions": {"fields": "preferred_location preferred_location_type"},
    "MaxPotentialBlockSizeOccupancyResult": {"fields": "max_block_size min_grid_size"},
    "MemoryResource": {
        "properties": "device_id is_device_accessible is_host_accessible is_managed",
        "methods": "allocate deallocate",
    },
    "ObjectCode": {
        "properties": "code code_type handle name symbol_mapping",
        "staticmethods": "from_cubin from_fatbin from_library from_ltoir from_object from_ptx",
        "methods": "get_kernel get_module",
    },
    "ParamInfo": {"fields": "offset size"},
    "PeerAccessibleBySetProxy": {
        "methods": "add clear difference_update discard intersection_update symmetric_difference_update update",
    },
    "PinnedMemoryResource": {
        "properties": (
            "allocation_handle attributes device_id handle is_closed is_device_accessible is_handle_owned "
            "is_host_accessible is_ipc_enabled is_managed is_mapped numa_id uuid"
        ),
        "classmethods": "from_allocation_handle",
        "staticmethods": "from_registry",
        "methods": "allocate close deallocate register",
    },
    "PinnedMemoryResourceOptions": {"fields": "ipc_enabled max_size numa_id"},
    "Program": {"properties": "backend handle is_closed pch_status", "methods": "close compile"},
    "ProgramOptions": {
        "methods": "as_bytes",
        "fields": (
            "arch brief_diagnostics builtin_initializer_list builtin_move_forward create_pch debug define_macro "
            "device_as_default_execution_space device_code_optimize device_float128 device_int128 diag_error "
            "diag_suppress diag_warn disable_warnings extensible_whole_program extra_device_vectorization "
            "extra_sources fdevice_syntax_only fdevice_time_trace fma frandom_seed ftz gen_opt_lto include_path "
            "instantiate_templates_in_pch lineinfo link_time_optimization max_register_count minimal name no_cache "
            "no_display_error_number no_source_include numba_debug ofast_compile optimization_info pch pch_dir "
            "pch_messages pch_verbose pre_include prec_div prec_sqrt ptxas_options relocatable_device_code restrict "
            "split_compile std time undefine_macro use_bundled_headers use_fast_math use_libdevice use_pch"
        ),
    },
    "SMResource": {"properties": "coscheduled_alignment flags handle min_partition_size sm_count", "methods": "split"},
    "SMResourceOptions": {"fields": "backfill coscheduled_sm_count count preferred_coscheduled_sm_count"},
    "Stream": {
        "properties": "context device handle is_closed is_nonblocking priority resources",
        "staticmethods": "from_handle",
        "methods": "close create_graph_builder record sync wait",
    },
    "StreamOptions": {"fields": "nonblocking priority"},
    "TensorMapDescriptor": {"properties": "device", "methods": "replace_address"},
    "TensorMapDescriptorOptions": {
        "fields": "box_dim data_type element_strides interleave l2_promotion oob_fill swizzle",
    },
    "VirtualMemoryResource": {
        "properties": "device_id is_device_accessible is_host_accessible is_managed",
        "methods": "allocate deallocate modify_allocation",
    },
    "VirtualMemoryResourceOptions": {
        "fields": (
            "addr_align addr_hint allocation_type gpu_direct_rdma granularity handle_type location_type peer_access "
            "peers self_access"
        ),
    },
    "WorkqueueResource": {"properties": "concurrency_limit device handle sharing_scope", "methods": "configure"},
    "WorkqueueResourceOptions": {"fields": "concurrency_limit sharing_scope"},
    "checkpoint.Process": {"properties": "pid restore_thread_id state", "methods": "checkpoint lock restore unlock"},
    "graph.AdjacencySetProxy": {"methods": "add clear discard update"},
    "graph.AllocNode": {
        "properties": "bytesize device_id dptr graph handle is_valid memory_type peer_access pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.ChildGraphNode": {
        "properties": "child_graph graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch update "
            "wait while_loop"
        ),
    },
    "graph.ConditionalNode": {
        "properties": "branches cond_type condition graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.EmptyNode": {
        "properties": "graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.EventRecordNode": {
        "properties": "event graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch update "
            "wait while_loop"
        ),
    },
    "graph.EventWaitNode": {
        "properties": "event graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch update "
            "wait while_loop"
        ),
    },
    "graph.ExecutableChildGraphNode": {"methods": "update"},
    "graph.ExecutableEventRecordNode": {"methods": "update"},
    "graph.ExecutableEventWaitNode": {"methods": "update"},
    "graph.ExecutableGraphNode": {},
    "graph.ExecutableHostCallbackNode": {"methods": "update"},
    "graph.ExecutableKernelNode": {"properties": "is_enabled", "methods": "disable enable update"},
    "graph.ExecutableMemcpyNode": {"properties": "is_enabled", "methods": "disable enable update"},
    "graph.ExecutableMemsetNode": {"properties": "is_enabled", "methods": "disable enable update"},
    "graph.FreeNode": {
        "properties": "dptr graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.Graph": {"properties": "handle is_closed", "methods": "close launch update upload"},
    "graph.GraphBuilder": {
        "properties": "graph_definition is_building is_closed is_join_required stream",
        "staticmethods": "join",
        "methods": (
            "begin_building callback close complete create_condition debug_dot_print embed end_building if_else "
            "if_then split switch while_loop"
        ),
    },
    "graph.GraphCompleteOptions": {"fields": "auto_free_on_launch device_launch upload_stream use_node_priority"},
    "graph.GraphCondition": {"properties": "handle"},
    "graph.GraphDebugPrintOptions": {
        "fields": (
            "batch_mem_op_node_params conditional_node_params event_node_params ext_semas_signal_node_params "
            "ext_semas_wait_node_params extra_topo_info handles host_node_params kernel_node_attributes "
            "kernel_node_params mem_alloc_node_params mem_free_node_params memcpy_node_params memset_node_params "
            "runtime_types verbose"
        ),
    },
    "graph.GraphDefinition": {
        "properties": "handle is_valid",
        "methods": (
            "allocate callback create_condition deallocate debug_dot_print edges embed empty if_else if_then "
            "instantiate join launch memcpy memset nodes record switch wait while_loop"
        ),
    },
    "graph.GraphNode": {
        "properties": "graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.HostCallbackNode": {
        "properties": "callback graph handle is_valid pred succ type",
        "methods": (
            "allocate deallocate destroy embed if_else if_then join launch memcpy memset record switch update wait "
            "while_loop"
        ),
    },
    "graph.IfElseNode": {
        "properties": "branches cond_type condition else_ graph handle is_valid pred succ then type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.IfNode": {
        "properties": "branches cond_type condition graph handle is_valid pred succ then type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.KernelNode": {
        "properties": "block config graph grid handle is_valid kernel pred shmem_size succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch update "
            "wait while_loop"
        ),
    },
    "graph.MemcpyNode": {
        "properties": "dst graph handle is_valid pred size src succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch update "
            "wait while_loop"
        ),
    },
    "graph.MemsetNode": {
        "properties": "dptr element_size graph handle height is_valid pitch pred succ type value width",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch update "
            "wait while_loop"
        ),
    },
    "graph.SwitchNode": {
        "properties": "branches cond_type condition graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "graph.WhileNode": {
        "properties": "body branches cond_type condition graph handle is_valid pred succ type",
        "methods": (
            "allocate callback deallocate destroy embed if_else if_then join launch memcpy memset record switch wait "
            "while_loop"
        ),
    },
    "system.BAR1MemoryInfo": {"properties": "free reserved total used"},
    "system.ClockInfo": {
        "methods": "get_current_mhz get_max_customer_boost_mhz get_max_mhz get_min_max_clock_of_pstate_mhz get_offsets",
    },
    "system.ClockOffsets": {"properties": "clock_offset_mhz max_offset_mhz min_offset_mhz"},
    "system.CoolerInfo": {"properties": "signal_type target"},
    "system.Device": {
        "properties": (
            "addressing_mode arch attributes bar1_memory_info brand compute_running_processes cooler "
            "cuda_compute_capability current_clock_event_reasons dynamic_pstates_info index inforom "
            "is_auto_boosted_clocks_enabled is_c2c_enabled is_display_active is_display_connected "
            "is_persistence_mode_enabled memory_info mig minor_number module_id name num_fans numa_node_id pci_bus_id "
            "pci_info performance_state repair_status serial supported_clock_event_reasons supported_pstates "
            "temperature utilization uuid uuid_without_prefix"
        ),
        "classmethods": "get_all_devices get_all_devices_with_cpu_affinity get_device_count",
        "methods": (
            "clear_cpu_affinity clear_field_values get_clock get_cpu_affinity get_fan get_field_values "
            "get_memory_affinity get_nvlink get_nvlink_count get_nvlinks get_supported_event_types "
            "get_topology_nearest_gpus register_events set_cpu_affinity to_cuda_device"
        ),
    },
    "system.DeviceArch": {},
    "system.DeviceAttributes": {
        "properties": (
            "compute_instance_slice_count gpu_instance_slice_count memory_size_mb multiprocessor_count "
            "shared_copy_engine_count shared_decoder_count shared_encoder_count shared_jpeg_count shared_ofa_count"
        ),
    },
    "system.DeviceEvents": {"methods": "wait"},
    "system.EventData": {"properties": "compute_instance_id device event_data event_type gpu_instance_id"},
    "system.FanInfo": {
        "properties": "control_policy min_max_speed speed speed_rpm target_speed",
        "methods": "set_default_speed",
    },
    "system.FieldValue": {"properties": "field_id latency_usec scope_id timestamp value"},
    "system.FieldValues": {"methods": "get_all_values validate"},
    "system.GpuDynamicPstatesInfo": {},
    "system.GpuDynamicPstatesUtilization": {"properties": "dec_threshold inc_threshold is_present percentage"},
    "system.InforomInfo": {
        "properties": "bbx_flush_time board_part_number configuration_checksum image_version",
        "methods": "get_version validate",
    },
    "system.MemoryInfo": {"properties": "free reserved total used"},
    "system.MigInfo": {
        "properties": "device_count is_mig_device mode parent pending_mode",
        "methods": "get_all_devices get_device_by_index",
    },
    "system.NvlinkInfo": {"properties": "state version"},
    "system.PciInfo": {
        "properties": (
            "base_class bus bus_id current_link_generation current_link_width device device_id domain link_generation "
            "max_link_generation max_link_width replay_counter rx_throughput sub_class subsystem_id tx_throughput "
            "vendor_id"
        ),
    },
    "system.ProcessInfo": {"properties": "compute_instance_id gpu_instance_id pid used_gpu_memory"},
    "system.RegisteredSystemEvents": {"methods": "wait"},
    "system.RepairStatus": {"properties": "channel_repair_pending tpc_repair_pending"},
    "system.SystemEvent": {"properties": "device event_type gpu_id"},
    "system.SystemEvents": {},
    "system.Temperature": {"properties": "margin", "methods": "get_sensor get_thermal_settings get_threshold"},
    "system.ThermalSensor": {"properties": "controller current_temp default_max_temp default_min_temp target"},
    "system.ThermalSettings": {},
    "system.Utilization": {"properties": "gpu memory"},
    "texture.MipmappedArray": {
        "properties": "device format handle is_closed is_surface_load_store num_channels num_levels shape",
        "methods": "close get_level",
    },
    "texture.MipmappedArrayOptions": {"fields": "format is_surface_load_store num_channels num_levels shape"},
    "texture.OpaqueArray": {
        "properties": (
            "device element_bytes format handle is_closed is_surface_load_store num_channels shape size_bytes"
        ),
        "methods": "close copy_from copy_to",
    },
    "texture.OpaqueArrayOptions": {"fields": "format is_surface_load_store num_channels shape"},
    "texture.ResourceDescriptor": {
        "properties": "format height kind num_channels pitch_bytes size_bytes source width",
        "classmethods": "from_linear from_mipmapped_array from_opaque_array from_pitch2d",
    },
    "texture.SurfaceObject": {"properties": "device handle is_closed resource", "methods": "close"},
    "texture.TextureObject": {"properties": "device handle is_closed options resource", "methods": "close"},
    "texture.TextureObjectOptions": {
        "fields": (
            "address_mode border_color disable_trilinear_optimization filter_mode max_anisotropy "
            "max_mipmap_level_clamp min_mipmap_level_clamp mipmap_filter_mode mipmap_level_bias normalized_coords "
            "read_mode seamless_cubemap srgb"
        ),
    },
    "utils.CopyOptions": {"fields": "dst_location_hint overlap_mode src_access_order src_location_hint"},
    "utils.FileStreamProgramCache": {"methods": "clear close get update"},
    "utils.InMemoryProgramCache": {"methods": "clear close get update"},
    "utils.ProgramCacheResource": {"methods": "clear close get update"},
    "utils.StridedMemoryView": {
        "properties": "device_id dtype exporting_obj is_device_accessible ptr readonly shape size strides",
        "classmethods": "from_any_interface from_array_interface from_buffer from_cuda_array_interface from_dlpack",
        "methods": "as_tensor_map copy_from copy_to view",
    },
}

CATEGORIES = ("properties", "classmethods", "staticmethods", "methods", "fields")

# cuda.core's private class names that cucore spells without the underscore.
CUCORE_NAME = {"_MemPoolAttributes": "MemPoolAttributes"}

# What cucore lacks of the list above (classes, then Class.name), as
# docs/python.md lists it. A name leaving cucore fails the test below, and so
# does a name cucore gains that is still listed here.
KNOWN_LACKING_CLASSES: set[str] = set()
KNOWN_LACKING_NAMES = {
    "ManagedMemoryResource.attributes", "ManagedMemoryResource.is_closed", "ManagedMemoryResource.close",
}


def _names(key, category):
    return CUDA_CORE[key].get(category, "").split()


def _cucore_class(key):
    """cucore's class for a key of CUDA_CORE, or None."""
    ns, _, name = key.rpartition(".")
    name = CUCORE_NAME.get(name, name)
    if ns:  # cucore.graph, cucore.system, ... and their compiled halves (cucore._core._graph, ...)
        places = [getattr(cucore, ns), getattr(cucore._core, "_" + ns, None)]
    else:
        places = [cucore, cucore._core, cucore._options, cucore._resources, cucore._memory_views, cucore._layout,
                  cucore._tensor_map, cucore.utils, cucore.graph, cucore._core._graph]
    for place in places:
        found = getattr(place, name, None)
        if isinstance(found, type):
            return found
    return None


def _is_nanobind_static(raw):
    # nanobind's def_static is a plain nb_func on the class (no __get__: it never
    # binds an instance); its signature names no self, where def's nb_method does.
    if type(raw).__name__ != "nb_func":
        return False
    return all(not sig[0].split("(", 1)[1].startswith("self") for sig in raw.__nb_signature__)


def _kind(cls, name):
    """How cucore's class declares `name`: property, classmethod, staticmethod,
    method, field, value, or None when absent."""
    if name in getattr(cls, "__dataclass_fields__", {}) or name in getattr(cls, "_fields", ()):
        return "field"
    try:
        raw = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    if isinstance(raw, classmethod):
        return "classmethod"
    if isinstance(raw, staticmethod) or _is_nanobind_static(raw):
        return "staticmethod"
    if inspect.isdatadescriptor(raw):
        return "property"
    if callable(raw):
        return "method"
    return "value"


# What each of cuda.core's declarations may be in cucore. A classmethod may be
# a staticmethod (nanobind has no classmethod: def_static): either is called on
# the class without an instance. A field may be a property too.
ACCEPTED = {
    "properties": {"property"},
    "classmethods": {"classmethod", "staticmethod"},
    "staticmethods": {"classmethod", "staticmethod"},
    "methods": {"method"},
    "fields": {"field", "property"},
}


def test_the_reference_list_is_whole():
    assert len(CUDA_CORE) > 100
    for key, entry in CUDA_CORE.items():
        assert set(entry) <= set(CATEGORIES), key
        seen = [n for c in CATEGORIES for n in _names(key, c)]
        assert len(seen) == len(set(seen)), (key, "a name in two categories")
    # The names this issue is about, as cuda.core declares them.
    assert "which_backend" in _names("Linker", "classmethods")
    assert {"max_threads_per_block", "num_regs", "shared_size_bytes"} <= set(_names("KernelAttributes", "properties"))
    assert {"attributes", "occupancy"} <= set(_names("Kernel", "properties"))
    assert "max_potential_block_size" in _names("KernelOccupancy", "methods")


@pytest.mark.parametrize("key", sorted(CUDA_CORE))
def test_each_name_is_declared_as_in_cuda_core(key):
    cls = _cucore_class(key)
    if cls is None:
        assert key in KNOWN_LACKING_CLASSES, f"cucore has no class for cuda.core's {key}"
        pytest.skip(f"cucore has no {key}: not implemented yet (issue 26)")
    wrong = []
    for category in CATEGORIES:
        for name in _names(key, category):
            got = _kind(cls, name)
            if got is not None and got not in ACCEPTED[category]:
                wrong.append(f"{cls.__qualname__}.{name}: cuda.core has it in {category}, cucore as a {got}")
    assert not wrong, "\n".join(wrong)


def test_class_and_static_methods_are_called_on_the_class():
    # Structural: each is reached on the class as a callable that binds no instance.
    for key in CUDA_CORE:
        cls = _cucore_class(key)
        if cls is None:
            continue
        for name in _names(key, "classmethods") + _names(key, "staticmethods"):
            if _kind(cls, name) is None:
                continue
            fn = getattr(cls, name)
            assert callable(fn), (key, name)
            assert not isinstance(fn, property), (key, name)
            if inspect.ismethod(fn):  # a classmethod: bound to the class itself
                assert fn.__self__ is cls, (key, name)
    # And called: Linker.which_backend() needs no Linker (a CompilerBackendType).
    backend = Linker.which_backend()
    assert isinstance(backend, cucore.typing.CompilerBackendType)
    assert backend in (cucore.typing.CompilerBackendType.NVJITLINK, cucore.typing.CompilerBackendType.DRIVER)


def test_a_method_is_told_from_a_property():
    # The classifier itself: nanobind's def is a method, def_prop_ro a property,
    # def_static a staticmethod; a Python dataclass field a field.
    assert _kind(cucore.Stream, "sync") == "method"
    assert _kind(cucore.Stream, "priority") == "property"
    assert _kind(cucore.Stream, "from_handle") == "staticmethod"
    assert _kind(cucore.StreamOptions, "nonblocking") == "field"
    assert _kind(cucore.Kernel, "no_such_name") is None

    class WithMethod:
        def num_regs(self):
            return 0

    assert _kind(WithMethod, "num_regs") not in ACCEPTED["properties"]


def test_names_cucore_lacks_are_the_known_ones():
    lacking_classes, lacking_names = set(), set()
    for key in CUDA_CORE:
        cls = _cucore_class(key)
        if cls is None:
            lacking_classes.add(key)
            continue
        for category in CATEGORIES:
            for name in _names(key, category):
                if _kind(cls, name) is None:
                    lacking_names.add(f"{key}.{name}")
    # Shown with pytest -s.
    print(f"\ncucore lacks {len(lacking_classes)} of cuda.core's classes: {', '.join(sorted(lacking_classes))}")
    print(f"and {len(lacking_names)} names of the others: {', '.join(sorted(lacking_names))}")
    # Both ways: a name cucore gains leaves the list too (the list is what docs/python.md says cucore lacks).
    assert lacking_classes == KNOWN_LACKING_CLASSES, sorted(lacking_classes ^ KNOWN_LACKING_CLASSES)
    assert lacking_names == KNOWN_LACKING_NAMES, sorted(lacking_names ^ KNOWN_LACKING_NAMES)


def test_pool_attributes_are_not_constructed_directly():
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        cucore._core.MemPoolAttributes()


# ---- GPU: what the properties read ------------------------------------------------------
# cuda.core's annotations: these are bool, every other attribute an int.
BOOL_KERNEL_ATTRIBUTES = {"cache_mode_ca", "cluster_size_must_be_set", "non_portable_cluster_size_allowed"}
BOOL_POOL_ATTRIBUTES = {"reuse_follow_event_dependencies", "reuse_allow_opportunistic",
                        "reuse_allow_internal_dependencies"}


def test_kernel_attributes_are_plain_values(device, saxpy):
    attrs = saxpy.attributes
    for view in (attrs, attrs[device], attrs[device.device_id]):
        for name in _names("KernelAttributes", "properties"):
            value = getattr(view, name)
            expected = bool if name in BOOL_KERNEL_ATTRIBUTES else int
            assert type(value) is expected, (name, type(value))
    assert attrs.num_regs > 0 and attrs.max_threads_per_block > 0


def test_occupancy_answers_plain_ints(device, saxpy):
    occ = saxpy.occupancy
    n = occ.max_active_blocks_per_multiprocessor(128, 0)
    assert type(n) is int and n > 0
    r = occ.max_potential_block_size(0, 0)
    assert type(r.min_grid_size) is int and type(r.max_block_size) is int and r.max_block_size > 0
    smem = occ.available_dynamic_shared_memory_per_block(1, 128)
    assert type(smem) is int and smem > 0


def test_pool_attributes_are_a_live_view(device):
    s = device.default_stream
    mr = DeviceMemoryResource(device, DeviceMemoryResourceOptions(max_size=1 << 26))
    attrs = mr.attributes
    for name in _names("_MemPoolAttributes", "properties"):
        expected = bool if name in BOOL_POOL_ATTRIBUTES else int
        assert type(getattr(attrs, name)) is expected, name
        assert attrs[name] == getattr(attrs, name)
    with pytest.raises(KeyError):
        attrs["no_such_attribute"]
    before = attrs.used_mem_current
    b = mr.allocate(1 << 20, stream=s)
    s.sync()
    # The same object reads the driver again, as cuda.core's does.
    assert attrs.used_mem_current >= before + (1 << 20)
    assert attrs.used_mem_high >= attrs.used_mem_current
    assert repr(attrs).startswith("MemPoolAttributes(release_threshold=")
    mr.close()
    with pytest.raises(cucore.ClosedError):
        mr.attributes
    assert attrs.used_mem_current >= 1 << 20  # a view made before keeps its share of the pool
    b.close(s)
    s.sync()
    assert attrs.used_mem_current == before


def test_properties_read_values_not_methods(device, saxpy):
    # On live objects: a property of cuda.core's gives a value, never a bound method.
    s = device.create_stream()
    objects = {"Device": device, "Stream": s, "Event": s.record(), "Kernel": saxpy,
               "Buffer": device.allocate(64, stream=s), "DeviceMemoryResource": device.memory_resource,
               "DeviceProperties": device.properties}
    for key, obj in objects.items():
        for name in _names(key, "properties"):
            if _kind(type(obj), name) is None:
                continue
            try:
                value = getattr(obj, name)
            except Exception:  # a property that refuses for this object (an IPC one on a plain buffer, ...)
                continue
            assert not inspect.ismethod(value) and not inspect.isbuiltin(value), (key, name, value)
    objects["Buffer"].close(s)
    s.sync()
