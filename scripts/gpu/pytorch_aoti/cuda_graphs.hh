// triton-kit: CUDA graphs around the AOTInductor forward of the kit's pytorch_aoti backend
// (issue 30). scripts/gpu/aoti_backend.sh copies this file into the backend's src/pt2 and
// wires it in.
//
// Why: at small batches the package's forward is bound by kernel launches (BERT-base batch 1
// took 2.3 ms in process on the H100, batch 64 4.1 ms), so Triton's instances, which run the
// batches the dynamic batcher forms (about 16 requests at c64 over 4 instances), spend their
// time launching. A graph replays a whole forward with one launch.
//
// Config: Triton's own `optimization { cuda { graphs: true } }`, as TensorRT's backend reads
// it, with `graph_spec { batch_size: N }` choosing the batch sizes captured (default: powers of
// two up to max_batch_size, and max_batch_size). A batch runs in the smallest captured size
// that holds it: its rows are copied into the graph's static inputs, the rows past them keep
// whatever they held (a model's rows must not depend on each other, as with TensorRT's
// padding), and the outputs are the first rows of the graph's static outputs.
//
// Each GPU instance captures a size the first time it meets it, on its own side stream (one for
// all its captures, so their pool can reuse its blocks), after one warm-up call there (lazy
// initialisation must stay out of the graph). The package is loaded
// run_single_threaded: its multi-threaded run records a CUDA event on the stream, and an event
// recorded during a capture cannot be queried after it (cudaErrorCapturedEvent), which the
// next run's bookkeeping does. The single-threaded run shares one model, so every call that is
// not a replay (warm-up, capture, a batch no graph holds) holds the model's mutex. Replays
// touch no model state: each graph owns its intermediates (a memory pool per instance, shared
// by its graphs, which that instance replays one at a time).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "triton/backend/backend_common.h"

#ifdef TRITON_ENABLE_GPU
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace triton_kit {

// True where a TritonJson call succeeded; its error, if any, is released.
inline bool
Ok(TRITONSERVER_Error* error)
{
  if (error == nullptr) {
    return true;
  }
  TRITONSERVER_ErrorDelete(error);
  return false;
}

struct CudaGraphConfig {
  bool enabled{false};
  std::vector<int64_t> batch_sizes;  // ascending, each in 1..max_batch_size
};

// The model config's optimization.cuda.graphs and graph_spec batch sizes. Throws
// std::invalid_argument (the caller answers INVALID_ARG) when graphs are asked for without
// batching or a graph_spec batch size is outside 1..max_batch_size.
inline CudaGraphConfig
ParseCudaGraphConfig(
    triton::common::TritonJson::Value& model_config, int64_t max_batch_size,
    const std::string& model_name)
{
  CudaGraphConfig config;
  triton::common::TritonJson::Value optimization, cuda, graphs, specs;
  if (!model_config.Find("optimization", &optimization) ||
      !optimization.Find("cuda", &cuda) || !cuda.Find("graphs", &graphs)) {
    return config;
  }
  bool enabled = false;
  if (!Ok(graphs.AsBool(&enabled)) || !enabled) {
    return config;
  }
  if (max_batch_size <= 0) {
    throw std::invalid_argument(
        "optimization.cuda.graphs for model \"" + model_name +
        "\" needs max_batch_size > 0: a graph is captured per batch size");
  }
  if (cuda.Find("graph_spec", &specs)) {
    for (size_t i = 0; i < specs.ArraySize(); ++i) {
      triton::common::TritonJson::Value spec;
      int64_t batch_size = 0;
      if (!Ok(specs.IndexAsObject(i, &spec))) {
        continue;
      }
      triton::common::TritonJson::Value value;
      if (!spec.Find("batch_size", &value) || !Ok(value.AsInt(&batch_size)) ||
          batch_size == 0) {
        continue;  // proto3 leaves an unset batch_size out, or at 0
      }
      if (batch_size < 0 || batch_size > max_batch_size) {
        throw std::invalid_argument(
            "optimization.cuda.graph_spec batch_size " + std::to_string(batch_size) +
            " for model \"" + model_name + "\" must be in 1.." +
            std::to_string(max_batch_size) + " (max_batch_size)");
      }
      config.batch_sizes.push_back(batch_size);
    }
  }
  if (config.batch_sizes.empty()) {
    for (int64_t size = 1; size < max_batch_size; size *= 2) {
      config.batch_sizes.push_back(size);
    }
    config.batch_sizes.push_back(max_batch_size);
  }
  std::sort(config.batch_sizes.begin(), config.batch_sizes.end());
  config.batch_sizes.erase(
      std::unique(config.batch_sizes.begin(), config.batch_sizes.end()),
      config.batch_sizes.end());
  config.enabled = true;
  return config;
}

inline std::string
JoinSizes(const std::vector<int64_t>& sizes)
{
  std::ostringstream text;
  for (size_t i = 0; i < sizes.size(); ++i) {
    text << (i ? ", " : "") << sizes[i];
  }
  return text.str();
}

#ifdef TRITON_ENABLE_GPU
// One GPU instance's graphs, one per captured batch size.
class CudaGraphs {
 public:
  using Forward =
      std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  using Log = std::function<void(const std::string&)>;

  CudaGraphs(std::vector<int64_t> batch_sizes, std::mutex* model_mutex, Log log)
      : sizes_(std::move(batch_sizes)), model_mutex_(model_mutex), log_(std::move(log))
  {
  }

  // The forward of this batch through a graph, captured on first use; nullopt where no
  // graph can hold it (no size large enough, inputs off the GPU or of another shape than
  // the graph's): the caller then runs the forward itself under the model's mutex.
  std::optional<std::vector<at::Tensor>> Run(
      const std::vector<at::Tensor>& inputs, const Forward& forward)
  {
    if (inputs.empty() || inputs[0].dim() == 0) {
      return std::nullopt;
    }
    const int64_t batch = inputs[0].size(0);
    for (const auto& input : inputs) {
      if (!input.is_cuda() || input.dim() == 0 || input.size(0) != batch) {
        return std::nullopt;
      }
    }
    auto size = std::lower_bound(sizes_.begin(), sizes_.end(), batch);
    if (size == sizes_.end()) {
      return std::nullopt;
    }
    auto found = graphs_.find(*size);
    if (found == graphs_.end()) {
      found = graphs_.emplace(*size, Capture(*size, inputs, forward)).first;
    }
    Graph& graph = found->second;
    if (!Fits(graph, inputs)) {
      return std::nullopt;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      graph.inputs[i].narrow(0, 0, batch).copy_(inputs[i], /*non_blocking=*/true);
    }
    graph.graph->replay();
    std::vector<at::Tensor> outputs;
    outputs.reserve(graph.outputs.size());
    for (const auto& output : graph.outputs) {
      const bool batched = output.dim() > 0 && output.size(0) == *size;
      outputs.push_back(batched ? output.narrow(0, 0, batch) : output);
    }
    return outputs;
  }

 private:
  struct Graph {
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    std::vector<at::Tensor> inputs;  // static: [size, ...] each
    std::vector<at::Tensor> outputs;
  };

  static bool Fits(const Graph& graph, const std::vector<at::Tensor>& inputs)
  {
    if (graph.inputs.size() != inputs.size()) {
      return false;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& held = graph.inputs[i];
      if (held.scalar_type() != inputs[i].scalar_type() ||
          held.device() != inputs[i].device() ||
          held.sizes().slice(1) != inputs[i].sizes().slice(1)) {
        return false;
      }
    }
    return true;
  }

  Graph Capture(
      int64_t size, const std::vector<at::Tensor>& inputs, const Forward& forward)
  {
    std::lock_guard<std::mutex> lock(*model_mutex_);
    const auto started = std::chrono::steady_clock::now();
    Graph graph;
    for (const auto& input : inputs) {
      auto shape = input.sizes().vec();
      shape[0] = size;
      auto held = at::zeros(shape, input.options());
      held.narrow(0, 0, input.size(0)).copy_(input);
      graph.inputs.push_back(held);
    }
    auto current = at::cuda::getCurrentCUDAStream();
    // One side stream for all of this instance's captures: the caching allocator keeps a freed
    // block for the stream it was used on, so graphs captured on a stream each could not reuse
    // each other's blocks in their shared pool, and warm-ups on a stream each kept a cache
    // each (ResNet-50's 48 graphs ran four instances out of the H100's memory that way).
    if (!side_) {
      side_ = at::cuda::getStreamFromPool(false, current.device_index());
    }
    auto side = *side_;
    at::cuda::CUDAEvent ready, done;
    ready.record(current);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      (void)forward(graph.inputs);  // warm-up: lazy initialisation outside the graph
      graph.graph = std::make_unique<at::cuda::CUDAGraph>();
      graph.graph->capture_begin(pool_, cudaStreamCaptureModeRelaxed);
      try {
        graph.outputs = forward(graph.inputs);
      }
      catch (...) {
        // End the capture before the error travels on: a stream left capturing, and the
        // allocator still routing its allocations into the graph's pool, would fail every
        // later call on it.
        try {
          graph.graph->capture_end();
        }
        catch (...) {
        }
        throw;
      }
      graph.graph->capture_end();
    }
    done.record(side);
    done.block(current);
    if (pool_ == at::cuda::MempoolId_t{0, 0}) {
      pool_ = graph.graph->pool();
    }
    const auto ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    log_(
        "CUDA graph captured for batch size " + std::to_string(size) + " (first batch " +
        std::to_string(inputs[0].size(0)) + ") on stream " + std::to_string(side.id()) +
        " in " + std::to_string(ms) + " ms");
    return graph;
  }

  std::vector<int64_t> sizes_;
  std::mutex* model_mutex_;
  Log log_;
  std::map<int64_t, Graph> graphs_;
  at::cuda::MempoolId_t pool_{0, 0};
  std::optional<c10::cuda::CUDAStream> side_;
};
#endif  // TRITON_ENABLE_GPU

}  // namespace triton_kit
