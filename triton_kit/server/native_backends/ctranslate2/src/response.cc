#include "response.h"

#include "triton/backend/backend_common.h"

namespace triton_kit { namespace ct2 {

TRITONSERVER_Error*
SendOutput(
    TRITONBACKEND_Request* request, const char* name, TRITONSERVER_DataType type, int64_t rows,
    int64_t width, size_t bytes, const std::function<void(char*)>& fill)
{
  TRITONBACKEND_Response* response;
  RETURN_IF_ERROR(TRITONBACKEND_ResponseNew(&response, request));
  const int64_t shape[2] = {rows, width};
  TRITONBACKEND_Output* output;
  TRITONSERVER_Error* error =
      TRITONBACKEND_ResponseOutput(response, &output, name, type, shape, 2);
  void* buffer = nullptr;
  TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
  int64_t memory_id = 0;
  if (error == nullptr) {
    error = TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory, &memory_id);
  }
  if (error == nullptr && memory != TRITONSERVER_MEMORY_CPU &&
      memory != TRITONSERVER_MEMORY_CPU_PINNED) {
    error = TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL, "the output buffer is not in CPU memory");
  }
  if (error == nullptr) {
    fill(static_cast<char*>(buffer));
  }
  LOG_IF_ERROR(
      TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error),
      "failed to send a ctranslate2 response");
  if (error != nullptr) {
    TRITONSERVER_ErrorDelete(error);
  }
  return nullptr;
}

}}  // namespace triton_kit::ct2
