#pragma once
// Loaded weights re-quantized in memory, as `tandem quantize` writes them to disk: for comparing
// precisions of one checkpoint without writing it again (model_logits, `tandem eval fidelity`).

#include "common/status.h"
#include "engine/core/dtype.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_weights.h"

namespace tandem::engine::model {

// kInt4Group32: the routed experts to INT4 group-32, everything else as loaded; kFp8Block128:
// every Linear but lm_head (attention, dense and shared MLPs, experts) to FP8 block-128; kBf16:
// nothing. Values go through fp32 (a Linear's decoded values) and the reference quantizers.
// REQUIRES: pool non-null. Errors from the packers (shapes they cannot take).
Status RequantizeModel(ModelWeights* weights, WeightFormat to, ThreadPool* pool);

}  // namespace tandem::engine::model
