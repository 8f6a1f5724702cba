// The backend's text mode (parameter "source_spm"): text in, text out, the python ``nmt``
// model's contract (triton_kit/python_models/nmt/model.py) with no python model on the path.
//
// Inputs (max_batch_size > 0, so each has the request's rows first):
//   TEXT        BYTES [rows, 1]: UTF-8; empty (only whitespace) or non-UTF-8 is INVALID_ARG.
//   BEAM_SIZE   INT32 [rows, 1] or [1, 1], optional (default: parameter beam_size):
//               1..max_beam_size.
//   MAX_LENGTH  INT32 [rows, 1] or [1, 1], optional (default: max_decoding_length + 1): Hugging
//               Face max_length, the decoder start token counted: 2..max_target_length.
// Output:
//   TRANSLATION BYTES [rows, 1]: the best hypothesis, detokenised.
//
// As MarianText (triton_kit/python_models/nmt/text.py): the source sentencepiece model
// segments the text into pieces, which go to CTranslate2 as tokens (its vocabulary maps them,
// unknown ones to "<unk>"; the build checks it orders tokens as vocab.json does), truncated to
// max_source_length - 1 pieces and "</s>" appended; the output tokens lose "</s>", "<unk>" and
// "<pad>", are joined, sentencepiece's U+2581 becomes a space and the ends are stripped of
// whitespace as Python's str.strip() does. A request fails alone, with the python model's
// messages, where a row is bad or rows x BEAM_SIZE x MAX_LENGTH exceeds max_beam_tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rows.h"
#include "settings.h"
#include "triton/core/tritonbackend.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace triton_kit { namespace ct2 {

constexpr const char* kTextInput = "TEXT";
constexpr const char* kMaxLengthInput = "MAX_LENGTH";
constexpr const char* kTranslationOutput = "TRANSLATION";

// The source sentencepiece model; Encode is const and used by every instance at once.
class SourcePieces {
 public:
  SourcePieces();
  ~SourcePieces();
  // Loads ``path``; an error names it (or says the backend was built without sentencepiece).
  TRITONSERVER_Error* Load(const std::string& path);
  // ``text``'s pieces, at most ``max_length - 1``, then "</s>".
  TRITONSERVER_Error* Encode(
      const std::string& text, size_t max_length, std::vector<std::string>* tokens) const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

// The request's rows; INVALID_ARG with the python model's message if the request is bad.
TRITONSERVER_Error* ParseTextRequest(
    TRITONBACKEND_Request* request, const SourcePieces& pieces, const Settings& settings,
    std::vector<Row>* rows);

// Sends the request's response: TRANSLATION of its rows' hypotheses (target tokens).
TRITONSERVER_Error* SendTexts(
    TRITONBACKEND_Request* request, const std::vector<const std::vector<std::string>*>& hypotheses);

// The helpers above, exposed for their unit test (text_test.cc).
std::string Detokenize(const std::vector<std::string>& tokens);
// Empty where ``text`` is valid UTF-8, else Python's reason and position: "invalid start byte
// at byte 3" (as ``bytes.decode`` reports them).
std::string Utf8Problem(const std::string& text);
// ``text`` without the whitespace Python's str.strip() removes at either end.
std::string PythonStrip(const std::string& text);

}}  // namespace triton_kit::ct2
