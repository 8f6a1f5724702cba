// The one response a request gets, for both modes (ids and text): made in one place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "triton/core/tritonbackend.h"

namespace triton_kit { namespace ct2 {

// Sends the request's one response holding one [rows, width] output ``name`` of ``type``:
// ``fill`` writes its ``bytes`` into the CPU buffer Triton gives; where Triton cannot give
// one, that error goes out as the response instead. Both modes' responses are made here.
TRITONSERVER_Error* SendOutput(
    TRITONBACKEND_Request* request, const char* name, TRITONSERVER_DataType type, int64_t rows,
    int64_t width, size_t bytes, const std::function<void(char*)>& fill);

}}  // namespace triton_kit::ct2
