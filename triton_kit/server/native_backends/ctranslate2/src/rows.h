// One request's rows in (token ids → the model's source tokens) and its translations out.
//
// Inputs (max_batch_size > 0, so each has the request's rows first):
//   SOURCE_IDS           INT32 [rows, length]: source vocabulary ids, "</s>" included;
//                        -1 pads a row on the right (rows of a request differ in length).
//   BEAM_SIZE            INT32 [rows, 1] or [1, 1], optional: 1..max_beam_size.
//   MAX_DECODING_LENGTH  INT32 [rows, 1] or [1, 1], optional: tokens generated at most.
// Output:
//   TARGET_IDS           INT32 [rows, length]: target vocabulary ids of the best hypothesis
//                        (no start token, no "</s>"), -1 on the right of shorter rows.
#pragma once

#include <string>
#include <vector>

#include "ctranslate2/vocabulary.h"
#include "response.h"
#include "settings.h"
#include "triton/core/tritonbackend.h"

namespace triton_kit { namespace ct2 {

constexpr const char* kSourceInput = "SOURCE_IDS";
constexpr const char* kBeamInput = "BEAM_SIZE";
constexpr const char* kLengthInput = "MAX_DECODING_LENGTH";
constexpr const char* kTargetOutput = "TARGET_IDS";
constexpr int32_t kPad = -1;

struct Row {
  std::vector<std::string> tokens;
  size_t beam_size;
  size_t max_decoding_length;
};

// The request's rows; INVALID_ARG naming the input and the problem if any row is bad.
TRITONSERVER_Error* ParseRequest(
    TRITONBACKEND_Request* request, const ctranslate2::Vocabulary& source,
    const Settings& settings, std::vector<Row>* rows);

// Sends the request's response: TARGET_IDS of its rows' hypotheses (target tokens).
TRITONSERVER_Error* SendTranslations(
    TRITONBACKEND_Request* request, const ctranslate2::Vocabulary& target,
    const std::vector<const std::vector<std::string>*>& hypotheses);

// Sends ``error`` as the request's response and deletes it.
void SendError(TRITONBACKEND_Request* request, TRITONSERVER_Error* error);

}}  // namespace triton_kit::ct2
