#include "settings.h"

#include <stdexcept>

#include "triton/backend/backend_common.h"

namespace triton_kit { namespace ct2 {

namespace {

// The parameter's string value, or nullptr where the config does not set it.
TRITONSERVER_Error*
Parameter(
    triton::common::TritonJson::Value& parameters, const char* key, std::string* value,
    bool* found)
{
  *found = false;
  triton::common::TritonJson::Value entry;
  if (!parameters.Find(key, &entry)) {
    return nullptr;
  }
  RETURN_IF_ERROR(entry.MemberAsString("string_value", value));
  *found = true;
  return nullptr;
}

TRITONSERVER_Error*
SizeParameter(
    triton::common::TritonJson::Value& parameters, const char* key, size_t minimum,
    size_t* value)
{
  std::string text;
  bool found;
  RETURN_IF_ERROR(Parameter(parameters, key, &text, &found));
  if (!found) {
    return nullptr;
  }
  long long parsed = 0;
  try {
    size_t used = 0;
    parsed = std::stoll(text, &used);
    if (used != text.size()) {
      throw std::invalid_argument(text);
    }
  }
  catch (const std::exception&) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (std::string("parameter ") + key + " must be an integer, got '" + text + "'").c_str());
  }
  if (parsed < static_cast<long long>(minimum)) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (std::string("parameter ") + key + " must be at least " + std::to_string(minimum) +
         ", got " + text)
            .c_str());
  }
  *value = static_cast<size_t>(parsed);
  return nullptr;
}

TRITONSERVER_Error*
FloatParameter(triton::common::TritonJson::Value& parameters, const char* key, float* value)
{
  std::string text;
  bool found;
  RETURN_IF_ERROR(Parameter(parameters, key, &text, &found));
  if (!found) {
    return nullptr;
  }
  try {
    *value = std::stof(text);
  }
  catch (const std::exception&) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (std::string("parameter ") + key + " must be a number, got '" + text + "'").c_str());
  }
  return nullptr;
}

}  // namespace

TRITONSERVER_Error*
ReadSettings(triton::backend::BackendModel& model, Settings* settings)
{
  triton::common::TritonJson::Value parameters;
  if (!model.ModelConfig().Find("parameters", &parameters)) {
    return nullptr;
  }
  bool found;
  RETURN_IF_ERROR(Parameter(parameters, "device", &settings->device, &found));
  RETURN_IF_ERROR(Parameter(parameters, "compute_type", &settings->compute_type, &found));
  size_t index = settings->device_index;
  RETURN_IF_ERROR(SizeParameter(parameters, "device_index", 0, &index));
  settings->device_index = static_cast<int>(index);
  RETURN_IF_ERROR(SizeParameter(parameters, "intra_threads", 0, &settings->intra_threads));
  RETURN_IF_ERROR(SizeParameter(parameters, "beam_size", 1, &settings->beam_size));
  RETURN_IF_ERROR(SizeParameter(parameters, "max_beam_size", 1, &settings->max_beam_size));
  RETURN_IF_ERROR(
      SizeParameter(parameters, "max_decoding_length", 1, &settings->max_decoding_length));
  RETURN_IF_ERROR(FloatParameter(parameters, "patience", &settings->patience));
  RETURN_IF_ERROR(FloatParameter(parameters, "length_penalty", &settings->length_penalty));
  RETURN_IF_ERROR(Parameter(parameters, "source_spm", &settings->source_spm, &found));
  RETURN_IF_ERROR(
      SizeParameter(parameters, "max_source_length", 2, &settings->max_source_length));
  RETURN_IF_ERROR(
      SizeParameter(parameters, "max_target_length", 2, &settings->max_target_length));
  RETURN_IF_ERROR(SizeParameter(parameters, "max_text_bytes", 1, &settings->max_text_bytes));
  RETURN_IF_ERROR(SizeParameter(parameters, "max_beam_tokens", 1, &settings->max_beam_tokens));
  if (settings->beam_size > settings->max_beam_size) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG, "parameter beam_size exceeds max_beam_size");
  }
  return nullptr;
}

}}  // namespace triton_kit::ct2
