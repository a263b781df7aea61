// SPDX-License-Identifier: Apache-2.0
// Calibration (topology layer): short measurements that replace default class figures. Today it measures the
// Memory class (a large memcpy, as shared-memory transfers between ranks do); the other classes need peers and
// are measured by the layers that own those connections, which pass their numbers to TopologyView::calibrated.
#pragma once

#include <vector>

#include "topology/topology_view.h"

namespace cfx::topo {

// About 10 ms of copying: the Memory class's bandwidth (its latency is kept from `view`). Never fails; the
// figures are what this host achieved at that moment.
Calibration measureLocalCalibration(const TopologyView& view);

// What a communicator plans with: per class, the median of the ranks' measurements (the lower middle one for an
// even count), so every rank gets the same figures from the same inputs; classes no rank measured stay empty.
Calibration agreeOn(const std::vector<Calibration>& perRank);

}  // namespace cfx::topo
