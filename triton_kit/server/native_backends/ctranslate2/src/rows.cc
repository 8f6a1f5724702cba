#include "rows.h"

#include <algorithm>
#include <cstring>

#include "triton/backend/backend_common.h"

namespace triton_kit { namespace ct2 {

namespace {

TRITONSERVER_Error*
Invalid(const std::string& message)
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, message.c_str());
}

// The input's INT32 values and shape; ``found`` false where the request does not send it.
TRITONSERVER_Error*
ReadInt32(
    TRITONBACKEND_Request* request, const char* name, std::vector<int32_t>* values,
    std::vector<int64_t>* shape, bool* found)
{
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* missing = TRITONBACKEND_RequestInput(request, name, &input);
  *found = missing == nullptr;
  if (!*found) {
    TRITONSERVER_ErrorDelete(missing);
    return nullptr;
  }
  TRITONSERVER_DataType dtype;
  const int64_t* dims;
  uint32_t dims_count;
  uint64_t byte_size;
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
      input, nullptr, &dtype, &dims, &dims_count, &byte_size, nullptr));
  if (dtype != TRITONSERVER_TYPE_INT32) {
    return Invalid(
        std::string(name) + " must be INT32, got " + TRITONSERVER_DataTypeString(dtype));
  }
  if (dims_count != 2) {
    return Invalid(
        std::string(name) + " must have 2 dimensions [rows, values], got " +
        std::to_string(dims_count));
  }
  shape->assign(dims, dims + dims_count);
  values->resize(byte_size / sizeof(int32_t));
  size_t size = byte_size;
  RETURN_IF_ERROR(triton::backend::ReadInputTensor(
      request, name, reinterpret_cast<char*>(values->data()), &size));
  return nullptr;
}

// One value per row from a [rows, 1] or [1, 1] input, else ``fallback`` for every row.
TRITONSERVER_Error*
PerRow(
    TRITONBACKEND_Request* request, const char* name, size_t rows, size_t fallback,
    size_t minimum, size_t maximum, std::vector<size_t>* out)
{
  std::vector<int32_t> values;
  std::vector<int64_t> shape;
  bool found;
  RETURN_IF_ERROR(ReadInt32(request, name, &values, &shape, &found));
  if (!found) {
    out->assign(rows, fallback);
    return nullptr;
  }
  if (values.size() != 1 && values.size() != rows) {
    return Invalid(
        std::string(name) + " must hold 1 value or one per row (" + std::to_string(rows) +
        "), got " + std::to_string(values.size()));
  }
  out->clear();
  for (size_t i = 0; i < rows; ++i) {
    const int32_t value = values[values.size() == 1 ? 0 : i];
    if (value < static_cast<int64_t>(minimum) || value > static_cast<int64_t>(maximum)) {
      return Invalid(
          std::string(name) + " must be in " + std::to_string(minimum) + ".." +
          std::to_string(maximum) + ", got " + std::to_string(value));
    }
    out->push_back(static_cast<size_t>(value));
  }
  return nullptr;
}

}  // namespace

TRITONSERVER_Error*
ParseRequest(
    TRITONBACKEND_Request* request, const ctranslate2::Vocabulary& source,
    const Settings& settings, std::vector<Row>* rows)
{
  std::vector<int32_t> ids;
  std::vector<int64_t> shape;
  bool found;
  RETURN_IF_ERROR(ReadInt32(request, kSourceInput, &ids, &shape, &found));
  if (!found) {
    return Invalid(std::string("the request has no ") + kSourceInput);
  }
  const size_t count = static_cast<size_t>(shape[0]);
  const size_t width = static_cast<size_t>(shape[1]);
  if (ids.size() != count * width) {
    return Invalid(std::string(kSourceInput) + " holds fewer values than its shape says");
  }
  std::vector<size_t> beams, lengths;
  RETURN_IF_ERROR(PerRow(
      request, kBeamInput, count, settings.beam_size, 1, settings.max_beam_size, &beams));
  RETURN_IF_ERROR(PerRow(
      request, kLengthInput, count, settings.max_decoding_length, 1, 1 << 20, &lengths));
  const size_t vocabulary = source.size();
  rows->clear();
  for (size_t r = 0; r < count; ++r) {
    Row row{{}, beams[r], lengths[r]};
    const int32_t* begin = ids.data() + r * width;
    size_t length = width;
    while (length > 0 && begin[length - 1] == kPad) {
      --length;
    }
    if (length == 0) {
      return Invalid(
          std::string(kSourceInput) + " row " + std::to_string(r) + " is empty (only padding)");
    }
    for (size_t i = 0; i < length; ++i) {
      const int32_t id = begin[i];
      if (id < 0 || static_cast<size_t>(id) >= vocabulary) {
        return Invalid(
            std::string(kSourceInput) + " row " + std::to_string(r) + " holds id " +
            std::to_string(id) + ", not in the source vocabulary (0.." +
            std::to_string(vocabulary - 1) + "; -1 pads only at the end)");
      }
      row.tokens.push_back(source.to_token(static_cast<size_t>(id)));
    }
    rows->push_back(std::move(row));
  }
  return nullptr;
}

TRITONSERVER_Error*
SendTranslations(
    TRITONBACKEND_Request* request, const ctranslate2::Vocabulary& target,
    const std::vector<const std::vector<std::string>*>& hypotheses)
{
  size_t width = 1;
  for (const auto* tokens : hypotheses) {
    width = std::max(width, tokens->size());
  }
  const size_t bytes = hypotheses.size() * width * sizeof(int32_t);
  return SendOutput(
      request, kTargetOutput, TRITONSERVER_TYPE_INT32, static_cast<int64_t>(hypotheses.size()),
      static_cast<int64_t>(width), bytes, [&](char* buffer) {
        int32_t* out = reinterpret_cast<int32_t*>(buffer);
        for (const auto* tokens : hypotheses) {
          for (size_t i = 0; i < width; ++i) {
            out[i] =
                i < tokens->size() ? static_cast<int32_t>(target.to_id((*tokens)[i])) : kPad;
          }
          out += width;
        }
      });
}

void
SendError(TRITONBACKEND_Request* request, TRITONSERVER_Error* error)
{
  TRITONBACKEND_Response* response;
  TRITONSERVER_Error* created = TRITONBACKEND_ResponseNew(&response, request);
  if (created == nullptr) {
    LOG_IF_ERROR(
        TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error),
        "failed to send a ctranslate2 error response");
  } else {
    LOG_IF_ERROR(created, "failed to create a ctranslate2 error response");
  }
  TRITONSERVER_ErrorDelete(error);
}

}}  // namespace triton_kit::ct2
