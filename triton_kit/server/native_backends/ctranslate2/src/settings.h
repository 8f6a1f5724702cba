// The ctranslate2 backend's model settings: config.pbtxt parameters, checked at load.
#pragma once

#include <cstddef>
#include <string>

#include "triton/backend/backend_model.h"

namespace triton_kit { namespace ct2 {

struct Settings {
  std::string device = "cpu";         // parameter "device": cpu or cuda
  int device_index = 0;               // parameter "device_index"
  std::string compute_type = "int8";  // parameter "compute_type": int8, float32, ...
  size_t intra_threads = 1;  // threads of one instance's translations (0: CTranslate2's default)
  size_t beam_size = 4;               // default when a request sends no BEAM_SIZE
  size_t max_beam_size = 16;          // BEAM_SIZE above this is INVALID_ARG
  size_t max_decoding_length = 256;   // default when a request sends no MAX_DECODING_LENGTH
  float patience = 1.0f;
  float length_penalty = 1.0f;
  // Text mode (parameter "source_spm": a sentencepiece model in the version folder): the model
  // takes TEXT and answers TRANSLATION as the python ``nmt`` model does (text.h); the limits
  // below are the python model's (triton_kit/python_models/nmt/settings.py Limits).
  std::string source_spm;             // empty: the ids mode (SOURCE_IDS -> TARGET_IDS)
  size_t max_source_length = 512;     // tokens a source keeps, its "</s>" included
  size_t max_target_length = 512;     // MAX_LENGTH at most (HF max_length: start token counted)
  size_t max_text_bytes = 65536;      // one TEXT row's UTF-8 bytes at most
  size_t max_beam_tokens = 16384;     // rows x BEAM_SIZE x MAX_LENGTH per request at most
};

// Reads the "parameters" of the model's config; an unparsable value is an error naming it.
TRITONSERVER_Error* ReadSettings(triton::backend::BackendModel& model, Settings* settings);

}}  // namespace triton_kit::ct2
