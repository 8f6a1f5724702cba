#!/usr/bin/env bash
# Triton's pytorch backend with AOTInductor support (platform "torch_aoti", added in r26.03),
# built against this machine's torch for the Triton 2.51 the kit embeds, and served there under
# its own backend name, pytorch_aoti (issue 30). Triton 2.51 refuses platform "torch_aoti" for
# backend "pytorch" but accepts any platform for a backend it does not know; both speak backend
# API 1.19. The r24.10 "pytorch" backend stays as it is for TorchScript.
#
# Sources: third_party/triton-aoti (pinned archives of pytorch_backend, backend, core and
# common; its README says which refs and why), or $TRITON_KIT_AOTI_SOURCES.
# tests/integration/server/test_aoti_backend.py builds it on CPU and serves an AOTInductor
# package through it; on the H100 it serves ResNet-50 (benchmarks/results/gpu_aoti.md).
# Usage: scripts/gpu/aoti_backend.sh CARRY DEST_DIR   (writes DEST_DIR/libtriton_pytorch_aoti.so;
# CARRY is read only for TRITON_KIT_AOTI_BACKEND_UTILS=r24.10: CARRY/triton-src)
# TRITON_KIT_AOTI_BUILD_TYPE=RelWithDebInfo keeps line tables for a debugger (default Release).
set -euo pipefail
carry=$1; dest=$2
py=${PYTHON:-python3}
work=$(mktemp -d /tmp/aoti-backend-XXXX); src=$work/src
mkdir -p "$src" "$dest"
sources=${TRITON_KIT_AOTI_SOURCES:-$(cd "$(dirname "$0")/../.." && pwd)/third_party/triton-aoti}
(cd "$sources" && sha256sum -c --quiet SHA256SUMS)
for archive in "$sources"/*.tar.gz; do tar -C "$src" -xzf "$archive"; done
# TRITON_KIT_AOTI_BACKEND_UTILS=r24.10: the backend utilities (input collector, output responder)
# Triton 2.51 was released with, from the r24.10 sources the kit already carries, instead of
# r26.02's (a suspect for the GPU crash, gpu_aoti.md). They lack only the status-returning
# GetElementCount forms the newer backend calls; a two-function shim adds them. On CPU this
# build serves packages exactly as the other does.
if [[ "${TRITON_KIT_AOTI_BACKEND_UTILS:-}" == r24.10 ]]; then
    rm -rf "$src/backend"
    tar -C "$src" -xzf "$carry/triton-src/backend-r24.10.tar.gz"
    "$py" - "$src/backend/include/triton/backend/backend_common.h" <<'PY'
import sys
from pathlib import Path
header = Path(sys.argv[1])
anchor = "int64_t GetElementCount(const std::vector<int64_t>& shape);"
shim = '''
inline TRITONSERVER_Error*
GetElementCount(const int64_t* dims, const size_t dims_count, int64_t* count)
{
  *count = GetElementCount(dims, dims_count);
  return (*count < 0) ? TRITONSERVER_ErrorNew(
                            TRITONSERVER_ERROR_INVALID_ARG,
                            "unable to get the element count of a dynamic shape")
                      : nullptr;
}

inline TRITONSERVER_Error*
GetElementCount(const std::vector<int64_t>& shape, int64_t* count)
{
  return GetElementCount(shape.data(), shape.size(), count);
}'''
text = header.read_text()
assert anchor in text, "backend r24.10's backend_common.h changed"
header.write_text(text.replace(anchor, anchor + "\n" + shim, 1))
PY
fi
# Two fixes to the PT2 output path (ReadOutputTensors), found on the H100 (gpu_aoti.md): the
# responder was told the outputs are not batched along their first dimension, so when the
# dynamic batcher put N requests into one execution each response got the whole batch and
# responses 2..N read past the end of the output (a SIGSEGV on the GPU, wrong shapes on CPU);
# and it took its pinned-memory switch from the input setting. r24.10's TorchScript path
# passes max_batch_size > 0 and the output setting.
"$py" - "$src/pytorch_backend/src/pt2/model_instance_state.cc" <<'PY'
import sys
from pathlib import Path
source = Path(sys.argv[1])
text = source.read_text()
old = """      /* first_dim_batching= */ false,
      /* pinned_enabled= */ model_->EnablePinnedInput(),"""
new = """      /* first_dim_batching= */ model_->MaxBatchSize() > 0,
      /* pinned_enabled= */ model_->EnablePinnedOutput(),"""
assert text.count(old) == 1, "pytorch_backend's PT2 ReadOutputTensors changed"
source.write_text(text.replace(old, new))
PY
# The PT2 loader is the model's, not the instance's (ModelState::model_loader_), and held one
# AOTInductor runner: every instance loaded its own package, the last one replaced the others,
# and all instances then ran that one runner, each waiting on the CUDA event of the run before
# it (AOTInductorModelContainer with one model), so a second instance only queued (instances
# beyond two gained nothing consistent on the H100: gpu.md, gpu_aoti/). Instances on a device
# now share one loader holding one runner per instance of the model (the container's models
# share the weights), as ENABLE_WEIGHT_SHARING already shared the loader. On the H100 4
# ResNet-50 instances then served 0.73-0.88x in process against 0.61-0.74x for 2
# (gpu_aoti/call22-resnet50-runners.md).
"$py" - "$src/pytorch_backend/src/pt2/model_state.cc" <<'PY'
import sys
from pathlib import Path
source = Path(sys.argv[1])
text = source.read_text()
share = "  if (weight_sharing_enabled_) {\n    device_pair = std::make_pair(!device.is_cpu(), device.index());"
assert text.count(share) == 1, "pytorch_backend's PT2 loader sharing changed"
text = text.replace(share, "  {  // triton-kit: instances on a device share one loader\n"
                    "    device_pair = std::make_pair(!device.is_cpu(), device.index());")
keep = "  model_loader_.reset(model_loader);\n\n  if (weight_sharing_enabled_) {"
assert text.count(keep) == 1, "pytorch_backend's PT2 loader bookkeeping changed"
text = text.replace(keep, "  model_loader_.reset(model_loader);\n\n  {  // triton-kit: see above")
count = """  TorchModelLoader* model_loader{nullptr};"""
assert text.count(count) == 1, "pytorch_backend's PT2 LoadModel changed"
text = text.replace(count, """  // triton-kit: one runner per instance of the model, all sharing this loader.
  size_t num_runners = 0;
  {
    triton::common::TritonJson::Value groups;
    if (ModelConfig().Find("instance_group", &groups)) {
      for (size_t i = 0; i < groups.ArraySize(); ++i) {
        triton::common::TritonJson::Value group;
        int64_t instances = 1;
        TRITONSERVER_Error* err = groups.IndexAsObject(i, &group);
        if (err == nullptr) {
          err = group.MemberAsInt("count", &instances);
        }
        if (err != nullptr) {
          TRITONSERVER_ErrorDelete(err);
        }
        num_runners += static_cast<size_t>(instances > 1 ? instances : 1);
      }
    }
  }
  if (num_runners == 0) {
    num_runners = 1;
  }
  TRITON_LOG_INFO("Inductor model loader with " << num_runners << " runner(s).");
""" + count)
runners = "        /*num_runners=*/1,"
assert text.count(runners) == 2, "pytorch_backend's PT2 runner count changed"
text = text.replace(runners, "        /*num_runners=*/num_runners,")
source.write_text(text)
PY
# Each execution looked its outputs up with model_->OutputMap()[name] (the model's map, keyed by
# the package's names, "RESULT"): operator[] inserted the config's name ("OUTPUT__0") on the
# first execution, so every instance created after one (all but the first once the first ran
# model_warmup) refused to load ("io_data already contains ordinal name"), and concurrent
# instances' first executions raced on that shared map. The instance's own map_outputs_ knows
# both names (tests/integration/server/test_aoti_backend.py, mlp3w).
"$py" - "$src/pytorch_backend/src/pt2/model_instance_state.cc" <<'PY'
import sys
from pathlib import Path
source = Path(sys.argv[1])
text = source.read_text()
old = "      int output_index = model_->OutputMap()[name.first];"
new = ("      int output_index = map_outputs_.contains(name.first)\n"
       "          ? static_cast<int>(map_outputs_.get(name.first).model_index())\n"
       "          : -1;  // triton-kit: no insertion into the model's shared map")
assert text.count(old) == 1, "pytorch_backend's PT2 output index lookup changed"
source.write_text(text.replace(old, new))
PY
# Two changes to the PT2 execution (issue 30):
# 1. It reported each request's statistics with its timestamps in the wrong order:
#    TRITONBACKEND_ModelInstanceReportStatistics takes exec_start, compute_start, compute_end,
#    exec_end, and it passed exec_start, exec_end, compute_start, compute_end. Triton then showed
#    the whole execution as "compute input", the forward as "compute output", and a compute
#    infer below zero summed as unsigned (10^8 ms and more in every PT2 row on the H100, on CPU
#    too). The batch statistics, passed in the right order, were right.
# 2. The parameter GATHER_KERNEL_BUFFER_THRESHOLD (as TensorRT's gather_kernel_buffer_threshold)
#    sets the input collector's kernel_buffer_threshold: inputs already in GPU or pinned memory
#    (CUDA shared memory) of at least that many requests are gathered by one Triton kernel
#    instead of a copy per request. Absent or 0: a copy per request, as before; a value that is
#    not a whole number of 0 or more fails the model's load with INVALID_ARG naming it.
# Tests: tests/integration/server/test_aoti_backend.py (statistics; the parameter).
"$py" - "$src/pytorch_backend/src/pt2/model_instance_state.cc" \
    "$src/pytorch_backend/src/pt2/model_instance_state.hh" <<'PY'
import sys
from pathlib import Path
source, header = Path(sys.argv[1]), Path(sys.argv[2])
text = source.read_text()
order = """            /* exec_start_ns= */ exec_start_ns,
            /* exec_end_ns= */ exec_end_ns,
            /* compute_start_ns= */ compute_start_ns,
            /* compute_end_ns= */ compute_end_ns)) {"""
assert text.count(order) == 1, "pytorch_backend's PT2 request statistics changed"
text = text.replace(order, """            /* exec_start_ns= */ exec_start_ns,
            /* compute_start_ns= */ compute_start_ns,
            /* compute_end_ns= */ compute_end_ns,
            /* exec_end_ns= */ exec_end_ns)) {  // triton-kit: the API's order""")
threshold = "        /* kernel_buffer_threshold= */ 0,"
assert text.count(threshold) == 1, "pytorch_backend's PT2 input collector changed"
text = text.replace(threshold, "        /* kernel_buffer_threshold= */ gather_kernel_buffer_threshold_,")
anchor = "  size_t expected_input_count{model_inputs.size()};"
assert text.count(anchor) == 1, "pytorch_backend's PT2 instance constructor changed"
text = text.replace(anchor, """  {  // triton-kit: GATHER_KERNEL_BUFFER_THRESHOLD
    TritonJsonValue parameters;
    int threshold = 0;
    if (model_->ModelConfig().Find("parameters", &parameters)) {
      if (auto err = ParseParameter(
              parameters, "GATHER_KERNEL_BUFFER_THRESHOLD", &threshold)) {
        const bool absent =
            TRITONSERVER_ErrorCode(err) == TRITONSERVER_ERROR_NOT_FOUND;
        const std::string message = TRITONSERVER_ErrorMessage(err);
        TRITONSERVER_ErrorDelete(err);
        if (!absent) {
          THROW_TRITON_EXCEPTION(
              TRITONSERVER_ERROR_INVALID_ARG,
              "Failed to parse 'GATHER_KERNEL_BUFFER_THRESHOLD' for model \\""
                  << model_->Name() << "\\": " << message);
        }
      }
    }
    if (threshold < 0) {
      THROW_TRITON_EXCEPTION(
          TRITONSERVER_ERROR_INVALID_ARG,
          "'GATHER_KERNEL_BUFFER_THRESHOLD' for model \\""
              << model_->Name() << "\\" must be 0 (a copy per request) or more, got "
              << threshold);
    }
    gather_kernel_buffer_threshold_ = threshold;
    TRITON_LOG_INFO(
        "Gather kernel buffer threshold " << gather_kernel_buffer_threshold_
                                          << " for model instance \\"" << Name()
                                          << "\\".");
  }
""" + anchor)
source.write_text(text)
members = header.read_text()
member = "  int device_count_{0};"
assert members.count(member) == 1, "pytorch_backend's PT2 instance members changed"
header.write_text(members.replace(
    member, member + "\n  size_t gather_kernel_buffer_threshold_{0};  // triton-kit"))
PY
# CUDA graphs around the forward (issue 30): Triton's optimization.cuda.graphs and graph_spec
# batch sizes, as TensorRT's backend reads them; scripts/gpu/pytorch_aoti/cuda_graphs.hh says
# how and why (the package is then loaded run_single_threaded, and non-replayed calls hold the
# model's mutex). A GPU instance captures each size on first use; a CPU instance runs without
# graphs and says so; graphs without batching, or a graph_spec batch size outside
# 1..max_batch_size, fail the load with INVALID_ARG. Tests: tests/integration/server/
# test_aoti_backend.py (the config's errors and the CPU fallback here; graphs on the GPU).
cp "$(dirname "$0")/pytorch_aoti/cuda_graphs.hh" "$src/pytorch_backend/src/pt2/"
"$py" - "$src/pytorch_backend/src/pt2" <<'PY'
import sys
from pathlib import Path
root = Path(sys.argv[1])


def patch(name: str, old: str, new: str, count: int = 1) -> None:
    path = root / name
    text = path.read_text()
    assert text.count(old) == count, f"pytorch_backend's {name} changed near: {old[:60]!r}"
    path.write_text(text.replace(old, new))


patch("model_state.hh", '#include <ATen/Parallel.h>\n',
      '#include <ATen/Parallel.h>\n\n#include <mutex>\n\n#include "cuda_graphs.hh"  // triton-kit\n')
patch("model_state.hh", "  bool weight_sharing_enabled_{false};\n",
      "  bool weight_sharing_enabled_{false};\n"
      "  triton_kit::CudaGraphConfig cuda_graphs_;  // triton-kit\n"
      "  std::mutex cuda_graph_mutex_;  // triton-kit: every call that is not a replay\n")
patch("model_state.hh", "  [[nodiscard]] bool WeightSharingEnabled() const;\n",
      "  [[nodiscard]] bool WeightSharingEnabled() const;\n\n"
      "  // triton-kit: optimization.cuda.graphs (cuda_graphs.hh)\n"
      "  [[nodiscard]] const triton_kit::CudaGraphConfig& CudaGraphs() const\n"
      "  {\n    return cuda_graphs_;\n  }\n"
      "  [[nodiscard]] std::mutex& CudaGraphMutex() { return cuda_graph_mutex_; }\n")
patch("model_state.cc", "  TorchModelLoader* model_loader{nullptr};\n",
      """  try {  // triton-kit: optimization.cuda.graphs
    cuda_graphs_ = triton_kit::ParseCudaGraphConfig(ModelConfig(), MaxBatchSize(), Name());
  }
  catch (const std::invalid_argument& error) {
    THROW_TRITON_EXCEPTION(TRITONSERVER_ERROR_INVALID_ARG, error.what());
  }
  TorchModelLoader* model_loader{nullptr};
""")
patch("model_state.cc", """        /*run_single_threaded=*/false,
        /*num_runners=*/num_runners,
        /*device_index=*/device.index()};""",
      """        /*run_single_threaded=*/cuda_graphs_.enabled,  // triton-kit: see cuda_graphs.hh
        /*num_runners=*/cuda_graphs_.enabled ? 1 : num_runners,
        /*device_index=*/device.index()};""")
patch("model_instance_state.hh", "  std::vector<cudaStream_t> stream_vector_;\n",
      "  std::vector<cudaStream_t> stream_vector_;\n"
      "  std::unique_ptr<triton_kit::CudaGraphs> cuda_graphs_;  // triton-kit\n")
patch("model_instance_state.cc", "  size_t expected_input_count{model_inputs.size()};\n",
      """  if (model_->CudaGraphs().enabled) {  // triton-kit: optimization.cuda.graphs
    const auto sizes = triton_kit::JoinSizes(model_->CudaGraphs().batch_sizes);
#ifdef TRITON_ENABLE_GPU
    if (Kind() == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
      cuda_graphs_ = std::make_unique<triton_kit::CudaGraphs>(
          model_->CudaGraphs().batch_sizes, &model_->CudaGraphMutex(),
          [name = Name()](const std::string& message) {
            TRITON_LOG_INFO(message << " on instance \\"" << name << "\\".");
          });
      TRITON_LOG_INFO(
          "CUDA graphs for batch sizes " << sizes << " on instance \\"" << Name()
                                         << "\\".");
    } else
#endif
    {
      TRITON_LOG_WARN(
          "CUDA graphs (batch sizes " << sizes << ") need a GPU instance: instance \\""
                                      << Name() << "\\" runs without them.");
    }
  }
  size_t expected_input_count{model_inputs.size()};
""")
patch("model_instance_state.cc", "    model_outputs = model_->Forward(input_tensors);\n",
      """    model_outputs = [&]() -> std::vector<torch::Tensor> {  // triton-kit
#ifdef TRITON_ENABLE_GPU
      if (cuda_graphs_) {
        auto graphed = cuda_graphs_->Run(
            input_tensors, [this](const std::vector<at::Tensor>& inputs) {
              return model_->Forward(inputs);
            });
        if (graphed) {
          return std::move(*graphed);
        }
      }
#endif
      if (model_->CudaGraphs().enabled && device_.is_cuda()) {
        std::lock_guard<std::mutex> lock(model_->CudaGraphMutex());
        return model_->Forward(input_tensors);
      }
      return model_->Forward(input_tensors);
    }();
""")
PY
# The r26 sources ask for CMake 3.31.8; nothing this build uses needs more than 3.18.
sed -i -E 's/cmake_minimum_required ?\(VERSION 3\.31\.8\)/cmake_minimum_required(VERSION 3.18)/' \
    "$src"/*/CMakeLists.txt "$src/core/src/CMakeLists.txt"
# common's test folder downloads googletest.
sed -i 's/^\(\s*\)add_subdirectory(test)/\1# add_subdirectory(test)/' "$src/common/src/CMakeLists.txt"
# The GPU machine has no Python headers; only OpTree (off) needs them.
sed -i 's/COMPONENTS Interpreter Development.Module)/COMPONENTS Interpreter)/' "$src/pytorch_backend/CMakeLists.txt"
# torch::cuda::device_count() needs <torch/cuda.h> with recent torch headers.
sed -i '1i #include <torch/cuda.h>' "$src/pytorch_backend/src/pt/model_instance_state.cc" \
    "$src/pytorch_backend/src/pt2/model_instance_state.cc"
torch_dir=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
gpu=$("$py" -c 'import torch; print("ON" if torch.version.cuda else "OFF")')
# The compiler that builds the packages builds the backend too ($TRITON_KIT_AOTI_CXX): see
# triton_kit/benchmarks/gpu/aoti/ on the GPU machine's /opt/gcc and its static libstdc++.
export CXX=${TRITON_KIT_AOTI_CXX:-${CXX:-c++}}
CUDA_ARCH_LIST=${CUDA_ARCH_LIST:-9.0} cmake -G Ninja -S "$src/pytorch_backend" -B "$work/build" \
    "-DCMAKE_BUILD_TYPE=${TRITON_KIT_AOTI_BUILD_TYPE:-Release}" \
    "-DCMAKE_CXX_FLAGS=-Wno-error=maybe-uninitialized -Wno-error=deprecated-declarations" \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
    "-DFETCHCONTENT_SOURCE_DIR_REPO-COMMON=$src/common" \
    "-DFETCHCONTENT_SOURCE_DIR_REPO-CORE=$src/core" \
    "-DFETCHCONTENT_SOURCE_DIR_REPO-BACKEND=$src/backend" \
    "-DTRITON_ENABLE_GPU=$gpu" -DTRITON_MIN_CXX_STANDARD=20 \
    -DTRITON_PYTORCH_ENABLE_TORCHVISION=OFF -DTRITON_PYTORCH_ENABLE_TORCHTRT=OFF \
    -DTRITON_PYTORCH_NVSHMEM=OFF -DTRITON_PYTORCH_OPTREE=OFF \
    "-DTRITON_PYTORCH_INCLUDE_PATHS=$torch_dir/include;$torch_dir/include/torch/csrc/api/include" \
    "-DTRITON_PYTORCH_LIB_PATHS=$torch_dir/lib" > "$work/configure.log" 2>&1 \
    || { tail -40 "$work/configure.log"; exit 1; }
cmake --build "$work/build" --target triton-pytorch-backend -j "$(nproc)" > "$work/compile.log" 2>&1 \
    || { grep -A6 -E 'error|FAILED' "$work/compile.log" | head -60; exit 1; }
lib=$dest/libtriton_pytorch_aoti.so
cp "$work/build/libtriton_pytorch.so" "$lib"
# The nvidia-pytriton wheel renames libtritonserver.so; the backend must NEED that name.
server_lib=$("$py" -c 'from triton_kit.server.native_backends.__main__ import _wheel_server_library as f; print(f() or "")')
if [[ -n "$server_lib" ]]; then patchelf --replace-needed libtritonserver.so "$server_lib" "$lib"; fi
patchelf --set-rpath "$torch_dir/lib" "$lib"
echo "built $lib (GPU $gpu) against torch $("$py" -c 'import torch; print(torch.__version__)')"
