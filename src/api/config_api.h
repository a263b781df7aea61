// SPDX-License-Identifier: Apache-2.0
// ncclConfig_t parsing with NCCL 2.28's exact rules (api layer).
#pragma once

#include "common/status.h"
#include "core/comm_config.h"
#include "nccl.h"

namespace cfx::api {

// Copies min(config->size, ours) bytes so older and newer callers both work, checks the magic, resets fields
// newer than the caller's version, validates, applies defaults and NCCL_* environment overrides, and logs
// every user-set field as "Comm config <Field> set to <v>". NULL means all defaults (or `inherit`, if given).
Result<core::CommConfig> parseConfig(const ncclConfig_t* config, const core::CommConfig* inherit = nullptr);

}  // namespace cfx::api
