// SPDX-License-Identifier: Apache-2.0
// Segment layout computation, construction and validation (transport layer, shm transport).
#include "transport/shm/shm_layout.h"

#include <algorithm>
#include <new>

namespace cfx::transport::shm {

namespace {

constexpr size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

constexpr size_t kDescriptorsOffset = sizeof(FifoControl);

size_t slotsOffset(int nSlots) { return kDescriptorsOffset + static_cast<size_t>(nSlots) * sizeof(SlotDescriptor); }

}  // namespace

size_t fifoBytes(const FifoGeometry& geometry) {
  return alignUp(slotsOffset(geometry.nSlots) + static_cast<size_t>(geometry.nSlots) * geometry.slotBytes, kFifoAlign);
}

FifoGeometry scaledGeometry(const FifoGeometry& configured, int maxLocalRanks, size_t hostBytes) {
  if (hostBytes == 0 || maxLocalRanks < 2) return configured;
  const auto n = static_cast<size_t>(maxLocalRanks);
  const size_t fifos = n * (n - 1) * static_cast<size_t>(kNumChannels);
  if (fifos * fifoBytes(configured) <= hostBytes) return configured;
  const size_t share = std::max(kMinScaledFifoBytes, hostBytes / fifos / kFifoAlign * kFifoAlign);
  FifoGeometry g = configured;
  for (;;) {
    const size_t room = share > slotsOffset(g.nSlots) ? share - slotsOffset(g.nSlots) : 0;
    g.slotBytes = std::min(configured.slotBytes, room / static_cast<size_t>(g.nSlots) / kSlotAlign * kSlotAlign);
    if (g.slotBytes >= kMinScaledSlotBytes || g.nSlots <= 2) break;
    g.nSlots = std::max(2, g.nSlots / 2);
  }
  g.slotBytes = std::max(g.slotBytes, kSlotAlign);
  return g;
}

SegmentLayout computeLayout(int nRanks, const FifoGeometry& geometry, const std::vector<bool>& incoming) {
  SegmentLayout layout;
  layout.directoryOffset = kHeaderBytes;
  layout.fifoBytes = fifoBytes(geometry);
  layout.fifoOffsets.assign(static_cast<size_t>(kNumChannels) * static_cast<size_t>(nRanks), 0);
  const size_t directoryBytes = layout.fifoOffsets.size() * sizeof(uint64_t);
  size_t next = alignUp(layout.directoryOffset + directoryBytes, kFifoAlign);
  const auto n = static_cast<size_t>(nRanks);
  for (size_t ch = 0; ch < static_cast<size_t>(kNumChannels); ++ch) {
    for (size_t sender = 0; sender < n; ++sender) {
      if (!incoming[sender]) continue;
      layout.fifoOffsets[ch * n + sender] = next;
      next += layout.fifoBytes;
    }
  }
  layout.totalBytes = next;
  return layout;
}

SegmentHeader* initSegment(void* base, const SegmentLayout& layout, int rank, int nRanks, const FifoGeometry& geometry,
                           const ProcessIdentity& self) {
  auto* header = new (base) SegmentHeader{};
  header->magic = kSegmentMagic;
  header->version = kLayoutVersion;
  header->headerBytes = static_cast<uint32_t>(kHeaderBytes);
  header->segmentBytes = layout.totalBytes;
  header->rank = rank;
  header->nRanks = nRanks;
  header->pid = self.pid;
  header->nChannels = kNumChannels;
  header->startTime = self.startTime;
  header->pidNamespace = self.pidNamespace;
  header->slotBytes = geometry.slotBytes;
  header->nSlots = static_cast<uint64_t>(geometry.nSlots);
  header->fifoBytes = layout.fifoBytes;
  header->directoryOffset = layout.directoryOffset;
  header->features = kKnownFeatures;
  header->extensionOffset = 0;

  char* bytes = static_cast<char*>(base);
  auto* directory = reinterpret_cast<uint64_t*>(bytes + layout.directoryOffset);
  for (size_t i = 0; i < layout.fifoOffsets.size(); ++i) {
    directory[i] = layout.fifoOffsets[i];
    if (layout.fifoOffsets[i] != 0) new (bytes + layout.fifoOffsets[i]) FifoControl{};
  }
  return header;
}

FifoView fifoAt(void* segmentBase, uint64_t fifoOffset, int nSlots) {
  char* fifo = static_cast<char*>(segmentBase) + fifoOffset;
  FifoView view;
  view.control = reinterpret_cast<FifoControl*>(fifo);
  view.descriptors = reinterpret_cast<SlotDescriptor*>(fifo + kDescriptorsOffset);
  view.slots = fifo + slotsOffset(nSlots);
  return view;
}

Status validateSegment(const void* base, size_t bytes, int rank, int nRanks, const FifoGeometry& geometry, int sender,
                       std::vector<uint64_t>* fifoOffsets) {
  if (bytes < kHeaderBytes) {
    return Status::error(Errc::InternalError, strprintf("segment of rank %d is too small (%zu bytes)", rank, bytes));
  }
  const auto* header = static_cast<const SegmentHeader*>(base);
  if (header->magic != kSegmentMagic || header->version != kLayoutVersion) {
    return Status::error(
        Errc::InvalidUsage,
        strprintf("segment of rank %d has format version %u (magic %#llx); this library writes "
                  "version %u: every rank must run the same Conflux build",
                  rank, header->version, static_cast<unsigned long long>(header->magic), kLayoutVersion));
  }
  if (header->rank != rank || header->nRanks != nRanks || header->segmentBytes != bytes ||
      header->nChannels != static_cast<uint32_t>(kNumChannels)) {
    return Status::error(
        Errc::InternalError,
        strprintf("segment announced by rank %d describes rank %d of %d (%llu bytes, %u channels); "
                  "expected rank %d of %d (%zu bytes, %d channels)",
                  rank, header->rank, header->nRanks, static_cast<unsigned long long>(header->segmentBytes),
                  header->nChannels, rank, nRanks, bytes, kNumChannels));
  }
  if (header->slotBytes != geometry.slotBytes || header->nSlots != static_cast<uint64_t>(geometry.nSlots) ||
      header->fifoBytes != fifoBytes(geometry)) {
    return Status::error(
        Errc::InvalidUsage,
        strprintf("rank %d uses %llu slots of %llu bytes, this rank %d of %zu bytes: set "
                  "CFX_SHM_SLOTS and CFX_SHM_SLOT_BYTES to the same values on every rank",
                  rank, static_cast<unsigned long long>(header->nSlots),
                  static_cast<unsigned long long>(header->slotBytes), geometry.nSlots, geometry.slotBytes));
  }
  const size_t directoryBytes = static_cast<size_t>(kNumChannels) * static_cast<size_t>(nRanks) * sizeof(uint64_t);
  if (header->directoryOffset < sizeof(SegmentHeader) || header->directoryOffset % alignof(uint64_t) != 0 ||
      header->directoryOffset > bytes || bytes - header->directoryOffset < directoryBytes) {
    return Status::error(Errc::InternalError, strprintf("segment of rank %d has a corrupt FIFO directory", rank));
  }
  const auto* directory = reinterpret_cast<const uint64_t*>(static_cast<const char*>(base) + header->directoryOffset);
  fifoOffsets->assign(kNumChannels, 0);
  for (int ch = 0; ch < kNumChannels; ++ch) {
    const uint64_t offset =
        directory[static_cast<size_t>(ch) * static_cast<size_t>(nRanks) + static_cast<size_t>(sender)];
    if (offset != 0 && (offset % kFifoAlign != 0 || offset > bytes || bytes - offset < header->fifoBytes)) {
      return Status::error(Errc::InternalError,
                           strprintf("segment of rank %d places FIFO (channel %d, sender %d) outside its %zu bytes",
                                     rank, ch, sender, bytes));
    }
    (*fifoOffsets)[static_cast<size_t>(ch)] = offset;
  }
  return Status();
}

}  // namespace cfx::transport::shm
