#include "text.h"

#include <cstring>

#include "triton/backend/backend_common.h"

#ifdef TRITON_KIT_CT2_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace triton_kit { namespace ct2 {

namespace {

constexpr const char* kEos = "</s>";
constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, sentencepiece's word boundary

TRITONSERVER_Error*
Invalid(const std::string& message)
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, message.c_str());
}

// The code point at ``text[i]`` of valid UTF-8, and its length in bytes.
char32_t
CodePoint(const std::string& text, size_t i, size_t* length)
{
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    *length = 1;
    return lead;
  }
  if (lead < 0xE0) {
    *length = 2;
    return ((lead & 0x1F) << 6) | (byte(1) & 0x3F);
  }
  if (lead < 0xF0) {
    *length = 3;
    return ((lead & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  }
  *length = 4;
  return ((lead & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) |
         (byte(3) & 0x3F);
}

// Python's str.isspace().
bool
IsSpace(char32_t c)
{
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// One value per row from a [rows, 1] or [1, 1] INT32 input, else ``fallback`` for every row
// (python_models/nmt/model.py ``_per_row``).
TRITONSERVER_Error*
PerRow(
    TRITONBACKEND_Request* request, const char* name, size_t rows, int64_t fallback,
    std::vector<int64_t>* out)
{
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* missing = TRITONBACKEND_RequestInput(request, name, &input);
  if (missing != nullptr) {
    TRITONSERVER_ErrorDelete(missing);
    out->assign(rows, fallback);
    return nullptr;
  }
  TRITONSERVER_DataType dtype;
  uint64_t byte_size;
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
      input, nullptr, &dtype, nullptr, nullptr, &byte_size, nullptr));
  if (dtype != TRITONSERVER_TYPE_INT32) {
    return Invalid(
        std::string(name) + " must be INT32, got " + TRITONSERVER_DataTypeString(dtype));
  }
  std::vector<int32_t> values(byte_size / sizeof(int32_t));
  size_t size = values.size() * sizeof(int32_t);
  RETURN_IF_ERROR(triton::backend::ReadInputTensor(
      request, name, reinterpret_cast<char*>(values.data()), &size));
  if (values.size() != 1 && values.size() != rows) {
    return Invalid(
        "expected " + std::to_string(rows) + " values, one per TEXT row, got " +
        std::to_string(values.size()));
  }
  out->clear();
  for (size_t i = 0; i < rows; ++i) {
    out->push_back(values[values.size() == 1 ? 0 : i]);
  }
  return nullptr;
}

// The TEXT rows: Triton's BYTES serialisation, a 4-byte length before each element.
TRITONSERVER_Error*
ReadTexts(TRITONBACKEND_Request* request, std::vector<std::string>* texts)
{
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* missing = TRITONBACKEND_RequestInput(request, kTextInput, &input);
  if (missing != nullptr) {
    TRITONSERVER_ErrorDelete(missing);
    return Invalid(std::string("the request has no ") + kTextInput);
  }
  TRITONSERVER_DataType dtype;
  const int64_t* dims;
  uint32_t dims_count;
  uint64_t byte_size;
  RETURN_IF_ERROR(TRITONBACKEND_InputProperties(
      input, nullptr, &dtype, &dims, &dims_count, &byte_size, nullptr));
  if (dtype != TRITONSERVER_TYPE_BYTES) {
    return Invalid(
        std::string(kTextInput) + " must be BYTES, got " + TRITONSERVER_DataTypeString(dtype));
  }
  size_t elements = 1;
  for (uint32_t d = 0; d < dims_count; ++d) {
    elements *= static_cast<size_t>(dims[d]);
  }
  std::string buffer(byte_size, '\0');
  size_t size = byte_size;
  RETURN_IF_ERROR(triton::backend::ReadInputTensor(request, kTextInput, buffer.data(), &size));
  texts->clear();
  size_t offset = 0;
  for (size_t e = 0; e < elements; ++e) {
    uint32_t length = 0;
    if (offset + sizeof(length) > buffer.size()) {
      return Invalid(std::string(kTextInput) + " holds fewer elements than its shape says");
    }
    std::memcpy(&length, buffer.data() + offset, sizeof(length));
    offset += sizeof(length);
    if (offset + length > buffer.size()) {
      return Invalid(std::string(kTextInput) + " element " + std::to_string(e) + " is cut short");
    }
    texts->emplace_back(buffer.data() + offset, length);
    offset += length;
  }
  return nullptr;
}

}  // namespace

std::string
Utf8Problem(const std::string& text)
{
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    if (lead < 0xC2 || lead > 0xF4) {
      return "invalid start byte at byte " + std::to_string(i);
    }
    const size_t need = lead < 0xE0 ? 1 : lead < 0xF0 ? 2 : 3;
    // The second byte's range (CPython's decoder: no overlong forms, no surrogates, <= U+10FFFF).
    unsigned char low = 0x80, high = 0xBF;
    if (lead == 0xE0) {
      low = 0xA0;
    } else if (lead == 0xED) {
      high = 0x9F;
    } else if (lead == 0xF0) {
      low = 0x90;
    } else if (lead == 0xF4) {
      high = 0x8F;
    }
    for (size_t k = 1; k <= need; ++k) {
      if (i + k >= n) {
        return "unexpected end of data at byte " + std::to_string(i);
      }
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xBF)) {
        return "invalid continuation byte at byte " + std::to_string(i);
      }
    }
    i += need + 1;
  }
  return "";
}

std::string
PythonStrip(const std::string& text)
{
  size_t begin = 0, end = text.size();
  while (begin < end) {
    size_t length;
    if (!IsSpace(CodePoint(text, begin, &length))) {
      break;
    }
    begin += length;
  }
  while (end > begin) {
    size_t start = end - 1;  // back to the last code point's lead byte
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    size_t length;
    if (!IsSpace(CodePoint(text, start, &length))) {
      break;
    }
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string
Detokenize(const std::vector<std::string>& tokens)
{
  std::string joined;
  for (const auto& token : tokens) {
    if (token == kEos || token == "<unk>" || token == "<pad>") {
      continue;
    }
    joined += token;
  }
  std::string spaced;
  spaced.reserve(joined.size());
  const size_t width = std::strlen(kSpace);
  for (size_t i = 0; i < joined.size();) {
    if (joined.compare(i, width, kSpace) == 0) {
      spaced += ' ';
      i += width;
    } else {
      spaced += joined[i++];
    }
  }
  return PythonStrip(spaced);
}

SourcePieces::SourcePieces() = default;
SourcePieces::~SourcePieces() = default;

#ifdef TRITON_KIT_CT2_SENTENCEPIECE

TRITONSERVER_Error*
SourcePieces::Load(const std::string& path)
{
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->Load(path);
  if (!status.ok()) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        ("cannot load the sentencepiece model " + path + ": " + status.ToString()).c_str());
  }
  processor_ = std::move(processor);
  return nullptr;
}

TRITONSERVER_Error*
SourcePieces::Encode(
    const std::string& text, size_t max_length, std::vector<std::string>* tokens) const
{
  const auto status = processor_->Encode(text, tokens);
  if (!status.ok()) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL, ("sentencepiece: " + status.ToString()).c_str());
  }
  if (tokens->size() > max_length - 1) {
    tokens->resize(max_length - 1);
  }
  tokens->push_back(kEos);
  return nullptr;
}

#else

TRITONSERVER_Error*
SourcePieces::Load(const std::string& path)
{
  return TRITONSERVER_ErrorNew(
      TRITONSERVER_ERROR_UNSUPPORTED,
      ("parameter source_spm (" + path +
       ") needs the text mode, but this ctranslate2 backend was built without sentencepiece: "
       "install libsentencepiece-dev (scripts/install-system-deps.sh) and rebuild it "
       "(python -m triton_kit.server.native_backends build ctranslate2)")
          .c_str());
}

TRITONSERVER_Error*
SourcePieces::Encode(const std::string&, size_t, std::vector<std::string>*) const
{
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "built without sentencepiece");
}

#endif

TRITONSERVER_Error*
ParseTextRequest(
    TRITONBACKEND_Request* request, const SourcePieces& pieces, const Settings& settings,
    std::vector<Row>* rows)
{
  std::vector<std::string> texts;
  RETURN_IF_ERROR(ReadTexts(request, &texts));
  std::vector<int64_t> beams, lengths;
  const int64_t default_length = static_cast<int64_t>(settings.max_decoding_length) + 1;
  RETURN_IF_ERROR(PerRow(
      request, kBeamInput, texts.size(), static_cast<int64_t>(settings.beam_size), &beams));
  RETURN_IF_ERROR(PerRow(request, kMaxLengthInput, texts.size(), default_length, &lengths));
  rows->clear();
  int64_t work = 0;
  for (size_t r = 0; r < texts.size(); ++r) {
    const int64_t beam = beams[r], length = lengths[r];
    if (beam < 1 || beam > static_cast<int64_t>(settings.max_beam_size)) {
      return Invalid(
          "BEAM_SIZE must be in 1.." + std::to_string(settings.max_beam_size) + ", got " +
          std::to_string(beam));
    }
    if (length < 2 || length > static_cast<int64_t>(settings.max_target_length)) {
      return Invalid(
          "MAX_LENGTH must be in 2.." + std::to_string(settings.max_target_length) +
          " (it counts the decoder start token), got " + std::to_string(length));
    }
    const std::string& text = texts[r];
    if (text.size() > settings.max_text_bytes) {
      return Invalid(
          "TEXT is " + std::to_string(text.size()) + " bytes; the limit is " +
          std::to_string(settings.max_text_bytes) + " bytes");
    }
    const std::string problem = Utf8Problem(text);
    if (!problem.empty()) {
      return Invalid("TEXT is not valid UTF-8 (" + problem + ")");
    }
    if (PythonStrip(text).empty()) {
      return Invalid("TEXT is empty");
    }
    Row row{{}, static_cast<size_t>(beam), static_cast<size_t>(length - 1)};
    RETURN_IF_ERROR(pieces.Encode(text, settings.max_source_length, &row.tokens));
    rows->push_back(std::move(row));
    work += beam * length;
  }
  if (work > static_cast<int64_t>(settings.max_beam_tokens)) {
    return Invalid(
        "rows x BEAM_SIZE x MAX_LENGTH is " + std::to_string(work) + "; the limit is " +
        std::to_string(settings.max_beam_tokens) +
        " per request: split the request or lower BEAM_SIZE/MAX_LENGTH");
  }
  return nullptr;
}

TRITONSERVER_Error*
SendTexts(
    TRITONBACKEND_Request* request, const std::vector<const std::vector<std::string>*>& hypotheses)
{
  std::vector<std::string> texts;
  size_t bytes = 0;
  for (const auto* tokens : hypotheses) {
    texts.push_back(Detokenize(*tokens));
    bytes += sizeof(uint32_t) + texts.back().size();
  }
  return SendOutput(
      request, kTranslationOutput, TRITONSERVER_TYPE_BYTES, static_cast<int64_t>(texts.size()),
      1, bytes, [&](char* out) {
        for (const auto& text : texts) {  // BYTES: a 4-byte length, then the bytes, per row
          const uint32_t length = static_cast<uint32_t>(text.size());
          std::memcpy(out, &length, sizeof(length));
          out += sizeof(length);
          std::memcpy(out, text.data(), text.size());
          out += text.size();
        }
      });
}

}}  // namespace triton_kit::ct2
