// Umbrella header: the whole public API of libnmkit.
#pragma once

#include "nmkit/checkpoint.h"
#include "nmkit/cpu.h"
#include "nmkit/dtype.h"
#include "nmkit/format.h"
#include "nmkit/metrics.h"
#include "nmkit/pattern.h"
#include "nmkit/prune.h"
#include "nmkit/safetensors.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"
#include "nmkit/threads.h"
