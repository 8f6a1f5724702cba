// Triton backend "ctranslate2": serves a CTranslate2 sequence-to-sequence model (a converted
// Marian checkpoint in the version folder) with the CTranslate2 library of the PyPI wheel.
//
// With parameter "source_spm" the model takes TEXT and answers TRANSLATION (text.h), the
// python nmt model's contract, tokenising in the backend; else SOURCE_IDS -> TARGET_IDS (rows.h).
//
// Each execute translates every row of every request it was given with one batched
// translate call per (beam size, decoding limit) in the batch, on the Triton instance's own
// thread (one model replica per instance, the model's weights shared between instances); a
// request whose inputs are bad gets INVALID_ARG alone and the others are still answered.
//
// Only functions the library exports are called, never CTranslate2's header-only thread pool
// (ctranslate2::Translator / ReplicaPool): built from the vendored v4.8.1 headers against the
// 4.8.5 wheel's library, a Translator crashed inside the library's worker threads while the
// same translation through the replica's exported translate() was right; the wheel is pinned
// to 4.8.1 since, and the Translator was not tried again (third_party/ctranslate2/README.md).
#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "ctranslate2/devices.h"
#include "ctranslate2/models/sequence_to_sequence.h"
#include "ctranslate2/types.h"
#include "ctranslate2/utils.h"
#include "rows.h"
#include "settings.h"
#include "text.h"
#include "triton/backend/backend_common.h"
#include "triton/backend/backend_model.h"
#include "triton/backend/backend_model_instance.h"

namespace triton_kit { namespace ct2 {

using triton::backend::BackendModel;
using triton::backend::BackendModelInstance;

uint64_t
NowNs()
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ModelState : public BackendModel {
 public:
  static TRITONSERVER_Error* Create(TRITONBACKEND_Model* triton_model, ModelState** state)
  {
    try {
      *state = new ModelState(triton_model);
    }
    catch (const triton::backend::BackendModelException& ex) {
      RETURN_ERROR_IF_TRUE(
          ex.err_ == nullptr, TRITONSERVER_ERROR_INTERNAL,
          std::string("unexpected nullptr in BackendModelException"));
      RETURN_IF_ERROR(ex.err_);
    }
    RETURN_IF_ERROR(ReadSettings(**state, &(*state)->settings_));
    return (*state)->Load();
  }

  const Settings& settings() const { return settings_; }
  const std::shared_ptr<const ctranslate2::models::Model>& model() const { return model_; }
  const ctranslate2::models::SequenceToSequenceModel& seq2seq() const { return *seq2seq_; }
  // The source sentencepiece model in text mode (parameter source_spm), else nullptr.
  const SourcePieces* pieces() const { return pieces_.get(); }
  std::string ModelPath() const
  {
    return triton::backend::JoinPath({RepositoryPath(), std::to_string(Version())});
  }

 private:
  explicit ModelState(TRITONBACKEND_Model* triton_model)
      : BackendModel(triton_model, /* allow_optional= */ true)
  {
  }
  TRITONSERVER_Error* Load();

  Settings settings_;
  std::shared_ptr<const ctranslate2::models::Model> model_;
  const ctranslate2::models::SequenceToSequenceModel* seq2seq_ = nullptr;
  std::unique_ptr<SourcePieces> pieces_;
};

TRITONSERVER_Error*
ModelState::Load()
{
  const std::string path = ModelPath();
  try {
    ctranslate2::models::ModelLoader loader(path);
    loader.device = ctranslate2::str_to_device(settings_.device);
    loader.device_indices = {settings_.device_index};
    loader.compute_type = ctranslate2::str_to_compute_type(settings_.compute_type);
    model_ = loader.load().front();
  }
  catch (const std::exception& ex) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        ("cannot load the CTranslate2 model in " + path + ": " + ex.what()).c_str());
  }
  seq2seq_ = dynamic_cast<const ctranslate2::models::SequenceToSequenceModel*>(model_.get());
  if (seq2seq_ == nullptr) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (path + " is not a sequence-to-sequence CTranslate2 model").c_str());
  }
  if (!settings_.source_spm.empty()) {
    pieces_ = std::make_unique<SourcePieces>();
    RETURN_IF_ERROR(
        pieces_->Load(triton::backend::JoinPath({path, settings_.source_spm})));
  }
  LOG_MESSAGE(
      TRITONSERVER_LOG_INFO,
      (std::string("ctranslate2: loaded ") + path + " on " + settings_.device + " (" +
       settings_.compute_type + ", " + std::to_string(settings_.intra_threads) +
       " threads an instance" + (pieces_ ? ", text mode: " + settings_.source_spm : "") + ")")
          .c_str());
  return nullptr;
}

class InstanceState : public BackendModelInstance {
 public:
  static TRITONSERVER_Error* Create(
      ModelState* model_state, TRITONBACKEND_ModelInstance* triton_instance,
      InstanceState** state)
  {
    try {
      *state = new InstanceState(model_state, triton_instance);
    }
    catch (const triton::backend::BackendModelInstanceException& ex) {
      RETURN_ERROR_IF_TRUE(
          ex.err_ == nullptr, TRITONSERVER_ERROR_INTERNAL,
          std::string("unexpected nullptr in BackendModelInstanceException"));
      RETURN_IF_ERROR(ex.err_);
    }
    return (*state)->Load();
  }

  void Execute(TRITONBACKEND_Request** requests, uint32_t count);

 private:
  InstanceState(ModelState* model_state, TRITONBACKEND_ModelInstance* triton_instance)
      : BackendModelInstance(model_state, triton_instance), model_state_(model_state)
  {
  }
  TRITONSERVER_Error* Load();

  ModelState* model_state_;
  std::unique_ptr<ctranslate2::models::SequenceToSequenceReplica> replica_;
};

TRITONSERVER_Error*
InstanceState::Load()
{
  try {
    replica_ = model_state_->model()->as_sequence_to_sequence();
  }
  catch (const std::exception& ex) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        (std::string("cannot create a CTranslate2 replica: ") + ex.what()).c_str());
  }
  return nullptr;
}

void
InstanceState::Execute(TRITONBACKEND_Request** requests, const uint32_t count)
{
  const uint64_t exec_start = NowNs();
  const Settings& settings = model_state_->settings();
  const auto& source = model_state_->seq2seq().get_source_vocabulary();
  const auto& target = model_state_->seq2seq().get_target_vocabulary();
  const SourcePieces* pieces = model_state_->pieces();  // text mode where not null
  // What CTranslate2's own worker threads do once: this thread's OpenMP/ruy thread count
  // (Triton runs an instance's executes on one thread; setting it again costs nothing).
  ctranslate2::set_num_threads(settings.intra_threads);
  if (model_state_->model()->device() != ctranslate2::Device::CPU) {
    ctranslate2::set_device_index(
        model_state_->model()->device(), model_state_->model()->device_index());
  }

  // Parse every request; a bad one is answered now and takes no part in the batch.
  std::vector<std::vector<Row>> parsed(count);
  std::vector<bool> ok(count, false);
  size_t total_rows = 0;
  for (uint32_t r = 0; r < count; ++r) {
    TRITONSERVER_Error* error =
        pieces != nullptr ? ParseTextRequest(requests[r], *pieces, settings, &parsed[r])
                          : ParseRequest(requests[r], source, settings, &parsed[r]);
    if (error != nullptr) {
      SendError(requests[r], error);
      continue;
    }
    ok[r] = true;
    total_rows += parsed[r].size();
  }

  // One translate_batch per (beam size, decoding limit): rows keep their request and index.
  std::map<std::pair<size_t, size_t>, std::vector<std::pair<uint32_t, size_t>>> groups;
  for (uint32_t r = 0; r < count; ++r) {
    for (size_t i = 0; ok[r] && i < parsed[r].size(); ++i) {
      groups[{parsed[r][i].beam_size, parsed[r][i].max_decoding_length}].emplace_back(r, i);
    }
  }
  std::vector<std::vector<ctranslate2::TranslationResult>> results(count);
  for (uint32_t r = 0; r < count; ++r) {
    results[r].resize(parsed[r].size());
  }
  const uint64_t compute_start = NowNs();
  for (const auto& [key, members] : groups) {
    std::vector<std::vector<std::string>> batch;
    batch.reserve(members.size());
    for (const auto& [r, i] : members) {
      batch.push_back(std::move(parsed[r][i].tokens));
    }
    ctranslate2::TranslationOptions options;
    options.beam_size = key.first;
    options.max_decoding_length = key.second;
    options.patience = settings.patience;
    options.length_penalty = settings.length_penalty;
    try {
      auto translated = replica_->translate(batch, {}, options);
      for (size_t k = 0; k < members.size(); ++k) {
        results[members[k].first][members[k].second] = std::move(translated[k]);
      }
    }
    catch (const std::exception& ex) {
      for (const auto& [r, i] : members) {
        if (ok[r]) {
          ok[r] = false;
          SendError(
              requests[r],
              TRITONSERVER_ErrorNew(
                  TRITONSERVER_ERROR_INTERNAL,
                  (std::string("ctranslate2 translate_batch failed: ") + ex.what()).c_str()));
        }
      }
    }
  }
  const uint64_t compute_end = NowNs();

  for (uint32_t r = 0; r < count; ++r) {
    if (ok[r]) {
      std::vector<const std::vector<std::string>*> hypotheses;
      for (const auto& result : results[r]) {
        hypotheses.push_back(&result.output());
      }
      TRITONSERVER_Error* error = pieces != nullptr
                                      ? SendTexts(requests[r], hypotheses)
                                      : SendTranslations(requests[r], target, hypotheses);
      if (error != nullptr) {
        ok[r] = false;
        SendError(requests[r], error);
      }
    }
  }
  const uint64_t exec_end = NowNs();
  for (uint32_t r = 0; r < count; ++r) {
    LOG_IF_ERROR(
        TRITONBACKEND_ModelInstanceReportStatistics(
            TritonModelInstance(), requests[r], ok[r], exec_start, compute_start, compute_end,
            exec_end),
        "failed to report request statistics");
    LOG_IF_ERROR(
        TRITONBACKEND_RequestRelease(requests[r], TRITONSERVER_REQUEST_RELEASE_ALL),
        "failed to release a request");
  }
  if (total_rows > 0) {
    LOG_IF_ERROR(
        TRITONBACKEND_ModelInstanceReportBatchStatistics(
            TritonModelInstance(), total_rows, exec_start, compute_start, compute_end, exec_end),
        "failed to report batch statistics");
  }
}

}}  // namespace triton_kit::ct2

extern "C" {

using triton_kit::ct2::InstanceState;
using triton_kit::ct2::ModelState;

TRITONBACKEND_ISPEC TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  ModelState* state;
  RETURN_IF_ERROR(ModelState::Create(model, &state));
  RETURN_IF_ERROR(TRITONBACKEND_ModelSetState(model, reinterpret_cast<void*>(state)));
  return nullptr;
}

TRITONBACKEND_ISPEC TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  delete reinterpret_cast<ModelState*>(state);
  return nullptr;
}

TRITONBACKEND_ISPEC TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  TRITONBACKEND_Model* model;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* model_state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &model_state));
  InstanceState* state;
  RETURN_IF_ERROR(
      InstanceState::Create(reinterpret_cast<ModelState*>(model_state), instance, &state));
  RETURN_IF_ERROR(
      TRITONBACKEND_ModelInstanceSetState(instance, reinterpret_cast<void*>(state)));
  return nullptr;
}

TRITONBACKEND_ISPEC TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  delete reinterpret_cast<InstanceState*>(state);
  return nullptr;
}

TRITONBACKEND_ISPEC TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count)
{
  void* state;
  RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  reinterpret_cast<InstanceState*>(state)->Execute(requests, request_count);
  return nullptr;
}

}  // extern "C"
