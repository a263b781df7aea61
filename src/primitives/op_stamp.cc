// SPDX-License-Identifier: Apache-2.0
#include "primitives/op_stamp.h"

#include "common/status.h"

namespace cfx::prims {

std::string describeMismatch(int peer, uint64_t inTag, uint64_t expectTag, const OpNaming* naming,
                             const std::string& detail) {
  auto kindOf = [naming](uint64_t tag) {
    const uint32_t kind = tagKind(tag);
    if (kind == 0) return std::string("a point-to-point or bare message");
    return naming != nullptr ? naming->kindName(kind) : strprintf("an op of kind %#x", kind);
  };
  const std::string mine = naming != nullptr ? naming->call() : kindOf(expectTag);
  std::string why;
  if (tagSeq(inTag) != tagSeq(expectTag)) {
    why = strprintf("the ranks are at different ops (rank %d at op #%u, this rank at op #%u): every rank must call the "
                    "same collectives in the same order",
                    peer, tagSeq(inTag), tagSeq(expectTag));
  } else if (tagKind(inTag) != tagKind(expectTag)) {
    why = "the ranks called different collectives, datatypes or reduction ops";
  } else {
    why = "the same collective, datatype and op, but a different count, root, codec or op shape";
  }
  return strprintf("%s: rank %d sent a message of %s (op #%u, tag %#llx) while this "
                   "rank runs %s (op #%u, %s, tag %#llx): %s",
                   std::string(kMismatchText).c_str(), peer, kindOf(inTag).c_str(), tagSeq(inTag), static_cast<unsigned long long>(inTag), mine.c_str(),
                   tagSeq(expectTag), detail.c_str(), static_cast<unsigned long long>(expectTag), why.c_str());
}

}  // namespace cfx::prims
