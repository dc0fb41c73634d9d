// CPU-only builds: no accelerator code is linked in.
#include "engine/core/accelerator.h"

namespace tandem::engine {

AcceleratorInfo QueryAccelerators() { return AcceleratorInfo{}; }

}  // namespace tandem::engine
